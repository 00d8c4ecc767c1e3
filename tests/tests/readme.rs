//! The code blocks of README.md and of every page in docs/, run or parsed, so the
//! documentation cannot drift from the product.
//!
//! The same rules hold in every file: TOML blocks load as our configuration and JSON blocks
//! as a client's server file (both through `mcp-gateway config check`), Python blocks run
//! with the official SDK against a real gateway, TypeScript blocks run as run_code
//! (`mcp-gateway run`), and shell blocks name scripts that exist and parse, or `cargo`
//! commands whose packages, benches and tests exist. Every command of a command-line table
//! has the flags the table gives it (and `--config`, which the documentation says every
//! command takes). A sample log is what the gateway prints on the repository's
//! config.toml. A block in a language not handled here fails the test, so a new kind of
//! block gets a check too.

use std::path::Path;
use std::process::Command;

use mcp_gateway_tests::docs::{Block, blocks, documents};
use mcp_gateway_tests::*;

fn blocks_in(lang: &str) -> Vec<Block> {
    let found: Vec<Block> = blocks().into_iter().filter(|b| b.lang == lang).collect();
    assert!(
        !found.is_empty(),
        "the documentation has no `{lang}` block any more"
    );
    found
}

/// The languages checked below; a plain fence is a diagram, not code.
const CHECKED: &[&str] = &["", "sh", "json", "python", "toml", "ts"];

#[test]
fn every_block_is_in_a_checked_language() {
    for block in blocks() {
        assert!(
            CHECKED.contains(&block.lang.as_str()),
            "{}: a `{}` block that no test checks",
            block.place(),
            block.lang
        );
    }
}

/// `mcp-gateway config check --config FILE`, with the variables the README's examples use.
fn config_check(file: &Path) -> std::process::Output {
    Command::new(gateway_bin())
        .args(["config", "check", "--config"])
        .arg(file)
        .env("K", "k")
        .env("TOKEN", "t")
        .env("GATEWAY_TOKEN", "gateway-token-of-16+")
        .env("CI_TOKEN", "ci-token-of-16+chars")
        .env("ALICE_TOKEN", "alice-token-of-16+chars")
        .env("OPS_TOKEN", "ops-token-of-16+chars")
        .env("REDIS_URL", "redis://127.0.0.1:6379")
        .output()
        .unwrap()
}

/// What the command run for `block` printed; it must have succeeded.
fn succeeded(block: &Block, output: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{}: {stdout}\n{}",
        block.place(),
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Writes each `lang` block to a `.ext` file and checks it with `config check`, which
/// must accept it; returns what `config check` printed for each.
fn accepted_configurations(lang: &str, ext: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    blocks_in(lang)
        .into_iter()
        .map(|block| {
            let name = block.file.replace('/', "-");
            let file = dir.path().join(format!("{name}-{}.{ext}", block.line));
            std::fs::write(&file, &block.text).unwrap();
            succeeded(&block, &config_check(&file))
        })
        .collect()
}

#[test]
fn toml_blocks_are_valid_configurations() {
    accepted_configurations("toml", "toml");
}

#[test]
fn json_blocks_are_client_configurations() {
    for servers in accepted_configurations("json", "json") {
        assert!(servers.contains("(1 servers"), "{servers}");
    }
}

#[test]
fn the_python_block_runs_against_a_gateway() {
    let workspace = Workspace::new(&example_server("kv", "kv"));
    let gateway = workspace.serve_http(&[]);
    for block in blocks_in("python") {
        assert!(block.text.contains("127.0.0.1:8765"), "{}", block.text);
        let program = block
            .text
            .replace("127.0.0.1:8765", &gateway.address.to_string());
        let output = Command::new(python())
            .arg("-W")
            .arg("error::DeprecationWarning")
            .arg("-c")
            .arg(&program)
            .output()
            .unwrap();
        let stdout = succeeded(&block, &output);
        // The printed CallToolResult carries kv's answer for the unset key.
        assert!(stdout.contains("'key': 'x'"), "{stdout}");
        assert!(stdout.contains("'value': None"), "{stdout}");
    }
}

/// A line of a log as the gateway writes it (`2026-12-07T09:55:24.666509Z  INFO …`), without
/// its time and with `127.0.0.1:PORT` as the README writes it.
fn log_line(line: &str, port: u16) -> Option<String> {
    let (time, rest) = line.split_once(' ')?;
    if !(time.starts_with("20") && time.ends_with('Z')) {
        return None;
    }
    Some(
        rest.trim_start()
            .replace(&format!("127.0.0.1:{port}"), "127.0.0.1:8765"),
    )
}

#[test]
fn the_sample_log_is_what_the_gateway_prints_on_the_repositorys_configuration() {
    let samples: Vec<Block> = blocks_in("")
        .into_iter()
        .filter(|block| block.text.lines().all(|line| log_line(line, 0).is_some()))
        .collect();
    assert!(!samples.is_empty(), "no sample log in the documentation");
    // config.toml as scripts/run serves it, with the example servers' debug builds, and
    // the gateway's default log (no RUST_LOG).
    let config = std::fs::read_to_string(repo().join("config.toml"))
        .unwrap()
        .replace(
            "\"target/release/kv\"",
            &toml_str(bin("kv").to_string_lossy()),
        )
        .replace(
            "\"target/release/slow\"",
            &toml_str(bin("slow").to_string_lossy()),
        );
    let workspace = Workspace::new(&config);
    let address = free_address();
    let log = workspace.path("serve.log");
    let mut gateway = Command::new(gateway_bin())
        .args(["serve", "--config"])
        .arg(workspace.config())
        .args(["--listen", &address.to_string()])
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let wanted: Vec<String> = samples
        .iter()
        .flat_map(|block| block.text.lines().filter_map(|line| log_line(line, 0)))
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let printed = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<String> = text
            .lines()
            .filter_map(|line| log_line(line, address.port()))
            .collect();
        let all = wanted.iter().all(|sample| lines.contains(sample));
        if all || std::time::Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    gateway.kill().unwrap();
    gateway.wait().unwrap();
    for block in &samples {
        for sample in block.text.lines().filter_map(|line| log_line(line, 0)) {
            assert!(
                printed.contains(&sample),
                "{}: the gateway never printed\n{sample}\nbut:\n{}",
                block.place(),
                printed.join("\n")
            );
        }
    }
}

#[test]
fn the_typescript_block_runs_as_run_code() {
    let workspace = Workspace::new(&format!(
        "{}{}",
        example_server("kv", "kv"),
        npm_server("everything", "mcp-server-everything", &["stdio"])
    ));
    for block in blocks_in("ts") {
        let file = workspace.path(&format!(
            "{}-{}.ts",
            block.file.replace('/', "-"),
            block.line
        ));
        std::fs::write(&file, &block.text).unwrap();
        let output = workspace.cli(&["run", &file.to_string_lossy()]);
        let stdout = succeeded(&block, &output);
        assert!(stdout.contains("The sum of 1 and 2 is 3"), "{stdout}");
    }
}

#[test]
fn shell_blocks_run_scripts_that_exist_and_parse() {
    for block in blocks_in("sh") {
        for line in block.text.lines() {
            let command = line.split('#').next().unwrap();
            // Leading `NAME=value` words set the environment, and `/usr/bin/time -v` only
            // measures: the program follows them.
            let words: Vec<&str> = command
                .split_whitespace()
                .skip_while(|w| w.split_once('=').is_some_and(|(name, _)| is_env_name(name)))
                .skip_while(|w| *w == "/usr/bin/time" || w.starts_with('-'))
                .collect();
            match words.first() {
                None => {}
                Some(&"cargo") => check_cargo(&block, &words),
                Some(&"podman" | &"docker") => check_container_build(&block, &words),
                Some(program) => check_script(&block, program),
            }
        }
    }
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
}

/// A script of the repository: it exists, is executable and parses.
fn check_script(block: &Block, program: &str) {
    let path = repo().join(program);
    let mode =
        std::fs::metadata(&path).unwrap_or_else(|e| panic!("{}: {program}: {e}", block.place()));
    assert!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o111 != 0,
        "{}: {program} is not executable",
        block.place()
    );
    let syntax = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(
        syntax.status.success(),
        "{}: {program}: {}",
        block.place(),
        String::from_utf8_lossy(&syntax.stderr)
    );
}

/// A container engine's command: the file it builds from (`-f`), if it names one, is the
/// repository's.
fn check_container_build(block: &Block, words: &[&str]) {
    for file in values_of(words, "-f") {
        assert!(
            repo().join(file).is_file(),
            "{}: {file} is not a file of the repository",
            block.place()
        );
    }
}

/// A `cargo` command: the packages it names (`-p`) are the workspace's, and the benches
/// and tests it names (`--bench`, `--test`) are files of those packages.
fn check_cargo(block: &Block, words: &[&str]) {
    let packages = values_of(words, "-p");
    assert!(
        !packages.is_empty(),
        "{}: {words:?} names no package",
        block.place()
    );
    let folders: Vec<std::path::PathBuf> = packages
        .iter()
        .map(|package| {
            package_folder(package)
                .unwrap_or_else(|| panic!("{}: no workspace package {package}", block.place()))
        })
        .collect();
    for (flag, folder) in [("--bench", "benches"), ("--test", "tests")] {
        for target in values_of(words, flag) {
            assert!(
                folders
                    .iter()
                    .any(|package| package.join(folder).join(format!("{target}.rs")).is_file()),
                "{}: no {flag} {target} in {packages:?}",
                block.place()
            );
        }
    }
}

/// The words that follow `flag` in `words`.
fn values_of<'a>(words: &[&'a str], flag: &str) -> Vec<&'a str> {
    words
        .windows(2)
        .filter(|pair| pair[0] == flag)
        .map(|pair| pair[1])
        .collect()
}

/// The folder of the workspace member whose `Cargo.toml` names `package`.
fn package_folder(package: &str) -> Option<std::path::PathBuf> {
    let wanted = format!("name = \"{package}\"");
    ["gateway", "sdkgen", "examples", "tests"]
        .into_iter()
        .map(|member| repo().join(member))
        .find(|folder| {
            std::fs::read_to_string(folder.join("Cargo.toml"))
                .is_ok_and(|manifest| manifest.lines().any(|line| line.trim() == wanted))
        })
}

/// The commands of the command-line tables, in every document: each backquoted command of
/// a row's first cell (`config dump` stands for `mcp-gateway config dump`).
fn table_commands() -> Vec<String> {
    let documents = documents();
    let mut commands = Vec::new();
    let rows = documents
        .iter()
        .flat_map(|(_, text)| text.lines())
        .filter(|l| l.starts_with("| `mcp-gateway "));
    for row in rows {
        let first_cell = row[1..].split(" | ").next().unwrap();
        for (index, span) in first_cell.split('`').enumerate() {
            if index % 2 == 1 {
                let span = span.replace("\\|", "|");
                commands.push(match span.strip_prefix("mcp-gateway ") {
                    Some(rest) => rest.to_owned(),
                    None => span,
                });
            }
        }
    }
    assert!(commands.len() >= 8, "{commands:?}");
    commands
}

#[test]
fn the_command_table_matches_the_command_line() {
    for command in table_commands() {
        let words: Vec<&str> = command.split_whitespace().collect();
        let subcommand: Vec<&str> = words
            .iter()
            .take_while(|w| {
                !w.starts_with('-') && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            })
            .copied()
            .collect();
        let help = Command::new(gateway_bin())
            .args(&subcommand)
            .arg("--help")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&help.stdout);
        assert!(help.status.success(), "`{command}`: {text}");
        let flags = words
            .iter()
            .map(|w| w.trim_matches(|c| matches!(c, '[' | ']' | '|')))
            .filter(|w| w.starts_with('-'));
        for flag in flags.chain(["--config"]) {
            assert!(
                text.contains(flag),
                "`mcp-gateway {}` has no {flag}: {text}",
                subcommand.join(" ")
            );
        }
    }
}
