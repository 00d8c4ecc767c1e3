//! Configuration files mutated from real ones (config.toml, the configuration reference, the
//! client JSON examples): `config check` and `config dump` end with 0 or 1 and a message.

use std::process::{Command, Stdio};
use std::time::Duration;

use mcp_gateway_tests::{example_server, gateway_bin, repo, wait_exit};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use crate::{fail, run_property};

/// The configuration reference in docs/configuration.md (its first TOML block).
fn configuration_reference() -> String {
    let readme = std::fs::read_to_string(repo().join("docs/configuration.md")).unwrap();
    let start = readme
        .find("## config.toml reference")
        .expect("the reference section");
    let block = &readme[start..];
    let open = block.find("```toml\n").expect("a TOML block") + "```toml\n".len();
    let close = block[open..].find("```").expect("the end of the block");
    block[open..open + close].to_owned()
}

/// Seeds for the mutations: real configurations (TOML, and client JSON files).
fn config_seeds() -> Vec<(String, &'static str)> {
    let mut seeds = vec![
        (
            std::fs::read_to_string(repo().join("config.toml")).unwrap(),
            "toml",
        ),
        (configuration_reference(), "toml"),
        (example_server("kv", "kv"), "toml"),
    ];
    for entry in std::fs::read_dir(repo().join("examples/clients"))
        .unwrap()
        .flatten()
    {
        if entry.path().extension().is_some_and(|e| e == "json") {
            seeds.push((std::fs::read_to_string(entry.path()).unwrap(), "json"));
        }
    }
    seeds
}

/// Pieces that make a configuration hostile.
const CONFIG_SNIPPETS: &[&str] = &[
    "[servers.x]\n",
    "[servers.\"a.b\"]\n",
    "[servers.'']\n",
    "[[policy]]\n",
    "[profiles.p]\n",
    "[gateway]\n",
    "[listen]\n",
    "[log]\n",
    "[code]\n",
    "[[servers]]\n",
    " = ",
    "=",
    "\"",
    "'''",
    "\"\"\"",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\n",
    "\r\n",
    "#",
    "\\",
    "\\u0000",
    "${",
    "${GATEWAY_TOKEN}",
    "${UNSET_FUZZ_VARIABLE}",
    "${}",
    "$${X}",
    "99999999999999999999",
    "-1",
    "0",
    "1e309",
    "inf",
    "nan",
    "-0",
    "0x7fffffffffffffff",
    "1979-05-27T07:32:00Z",
    "true",
    "timeout_ms = -5\n",
    "timeout_ms = 0\n",
    "max_body_bytes = 0\n",
    "max_argument_depth = 0\n",
    "max_result_bytes = 18446744073709551615\n",
    "thresholds = []\n",
    "thresholds = [0, 0]\n",
    "thresholds = [8, 5, 3]\n",
    "mode = \"code\"\n",
    "mode = \"\"\n",
    "address = \"0.0.0.0:1\"\n",
    "address = \"[::1]:0\"\n",
    "address = \"nope\"\n",
    "tokens = []\n",
    "tokens = [{ token = \"\", profile = \"nope\" }]\n",
    "sessions_dir = false\n",
    "sessions_dir = \"\"\n",
    "command = \"\"\n",
    "url = \"http://[::1\"\n",
    "url = \"file:///etc/passwd\"\n",
    "transport = \"carrier-pigeon\"\n",
    "decision = \"maybe\"\n",
    "tool = \"[\"\n",
    "tool = \"**/{a,\"\n",
    "allow = [\"{\"]\n",
    "enabled = \"yes\"\n",
    "é",
    "🦀",
    "\u{feff}",
    "\u{0}",
    "\"mcpServers\": {}",
    "\"servers\": {\"x\": {\"command\": 5}}",
    "null",
];

#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, &'static str),
    InsertChar(usize, char),
    Delete(usize, usize),
    Duplicate(usize, usize, usize),
    Truncate(usize),
}

fn edit() -> BoxedStrategy<Edit> {
    prop_oneof![
        4 => (any::<usize>(), select(CONFIG_SNIPPETS)).prop_map(|(at, s)| Edit::Insert(at, s)),
        2 => (any::<usize>(), any::<char>()).prop_map(|(at, c)| Edit::InsertChar(at, c)),
        2 => (any::<usize>(), 1usize..32).prop_map(|(at, n)| Edit::Delete(at, n)),
        1 => (any::<usize>(), 1usize..200, any::<usize>()).prop_map(|(f, n, t)| Edit::Duplicate(f, n, t)),
        1 => any::<usize>().prop_map(Edit::Truncate),
    ]
    .boxed()
}

/// The char boundary at or before `at % (len + 1)`.
fn boundary(s: &str, at: usize) -> usize {
    let mut at = at % (s.len() + 1);
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut s = text.to_owned();
    for edit in edits {
        match *edit {
            Edit::Insert(at, snippet) => s.insert_str(boundary(&s, at), snippet),
            Edit::InsertChar(at, c) => s.insert(boundary(&s, at), c),
            Edit::Delete(at, n) => {
                let from = boundary(&s, at);
                let to = boundary(&s, from + n.min(s.len() - from)).max(from);
                s.replace_range(from..to, "");
            }
            Edit::Duplicate(from, n, to) => {
                let from = boundary(&s, from);
                let end = boundary(&s, from + n.min(s.len() - from)).max(from);
                let piece = s[from..end].to_owned();
                s.insert_str(boundary(&s, to), &piece);
            }
            Edit::Truncate(at) => {
                let at = boundary(&s, at);
                s.truncate(at);
            }
        }
    }
    s
}

/// Runs `mcp-gateway ARGS` with output to files (no pipe can fill) and a deadline.
fn run_cli(
    dir: &std::path::Path,
    args: &[&str],
) -> Result<(std::process::ExitStatus, String, String), String> {
    let stdout = dir.join("stdout");
    let stderr = dir.join("stderr");
    let mut child = Command::new(gateway_bin())
        .args(args)
        .env("RUST_LOG", "warn")
        .env("GATEWAY_TOKEN", "fuzz-token-of-16+chars")
        .env("CI_TOKEN", "fuzz-ci-token-of-16+")
        .env("REDIS_URL", "redis://127.0.0.1:6379")
        .env("TOKEN", "fuzz")
        .env("K", "k")
        .env_remove("UNSET_FUZZ_VARIABLE")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let Some(status) = wait_exit(&mut child, Duration::from_secs(30)) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("`mcp-gateway {}` hung", args.join(" ")));
    };
    let read = |p: &std::path::Path| {
        String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned()
    };
    Ok((status, read(&stdout), read(&stderr)))
}

/// The dump without `command = …` lines and `args = […]` arrays, where substituted secrets
/// are known to show (see `regression_config_dump_masks_secrets_in_command_and_args`), so
/// the property can look for leaks elsewhere.
fn without_command_and_args(dump: &str) -> String {
    let mut kept = Vec::new();
    let mut in_args = false;
    for line in dump.lines() {
        if line.starts_with("args = [") {
            in_args = !line.ends_with(']');
        } else if in_args {
            in_args = line != "]";
        } else if !line.starts_with("command = ") {
            kept.push(line);
        }
    }
    kept.join("\n")
}

/// `config check` and `config dump` on `text`: exit 0 or 1, a message on 1, no panic; the
/// dump never shows the value of `$GATEWAY_TOKEN`.
fn check_config_text(text: &str, extension: &str) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("config.{extension}"));
    std::fs::write(&file, text).unwrap();
    let file = file.to_string_lossy().into_owned();
    for action in ["check", "dump"] {
        let (status, stdout, stderr) =
            run_cli(dir.path(), &["config", action, "--config", &file]).map_err(fail)?;
        prop_assert!(
            !stderr.contains("panicked"),
            "config {} panicked: {}",
            action,
            stderr
        );
        prop_assert!(
            matches!(status.code(), Some(0 | 1)),
            "config {} ended with {:?}: {}",
            action,
            status,
            stderr
        );
        if status.code() == Some(1) {
            prop_assert!(
                stderr.contains("error"),
                "config {} failed without a message",
                action
            );
        } else if action == "dump" {
            prop_assert!(
                !without_command_and_args(&stdout).contains("fuzz-token"),
                "a secret in the dump: {}",
                stdout
            );
        }
    }
    Ok(())
}

#[test]
fn mutated_configurations_are_checked_without_panicking() {
    let seeds = config_seeds();
    let strategy = (select(seeds), vec(edit(), 0..8));
    run_property(32, strategy, |((seed, extension), edits)| {
        check_config_text(&apply(&seed, &edits), extension)
    });
}

#[test]
fn the_configuration_seeds_are_valid() {
    // The reference in docs/configuration.md and the repository's config.toml pass as written, so the
    // mutations start from valid files.
    for (seed, extension) in config_seeds() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(format!("config.{extension}"));
        std::fs::write(&file, &seed).unwrap();
        let (status, _, stderr) = run_cli(
            dir.path(),
            &["config", "check", "--config", &file.to_string_lossy()],
        )
        .unwrap();
        assert!(status.success(), "{seed}\n{stderr}");
    }
}

/// Found by `mutated_configurations_are_checked_without_panicking` (a `${GATEWAY_TOKEN}`
/// inserted into a client file's `args`): `config dump` prints `command` and `args` with
/// variables substituted, so a key passed as `args = ["--api-key", "${API_KEY}"]` (a common
/// way to configure MCP servers) is shown in clear, while `env`, `headers`, `url` and
/// `tokens` are masked. Fails until the dump masks them (or shows the `${…}` form).
#[test]
fn regression_config_dump_masks_secrets_in_command_and_args() {
    let text = "[servers.a]\ncommand = \"/opt/${GATEWAY_TOKEN}/server\"\n\
                args = [\"--api-key\", \"${GATEWAY_TOKEN}\", \"--key=${GATEWAY_TOKEN}\"]\n";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, text).unwrap();
    let (status, dump, stderr) = run_cli(
        dir.path(),
        &["config", "dump", "--config", &file.to_string_lossy()],
    )
    .unwrap();
    assert!(status.success(), "{stderr}");
    let leaks: Vec<&str> = dump.lines().filter(|l| l.contains("fuzz-token")).collect();
    assert!(leaks.is_empty(), "the secret is in the dump: {leaks:?}");
}
