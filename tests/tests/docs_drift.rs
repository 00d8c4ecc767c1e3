//! The documentation read against the code, so that one cannot change without the other
//! or a failing test. Everything is parsed from both sides, never listed here:
//! - every key docs/configuration.md (and run-code.md's `[code]` table) gives a value has
//!   that value as its default in the parser (`mcp-gateway config dump` of a configuration
//!   naming only what must be named; a key the dump leaves out has no default, but for an
//!   empty list or table), unless its own comment begins `an example`;
//! - every documented table refuses a key it does not have, and every documented key a
//!   value of another type, naming the file, the key and its line;
//! - every error code of docs/error-codes.md is a string the gateway's code holds, and
//!   every code the gateway gives is listed there: those its error types give
//!   (`fn code(&self) -> &'static str`, `ErrorCode`, the run_code failure kinds) and every
//!   other `LIKE_THIS` string of its sources that does not name an environment variable;
//! - every relative link and anchor of README.md and docs/*.md resolves;
//! - every refusal of a configuration value names the file, the key, the line and, where
//!   it has one, the code (each code of error-codes.md's configuration table is tried);
//! - `rust-version` is what the dependencies need.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use mcp_gateway_tests::docs::{blocks, documents, table_after};
use mcp_gateway_tests::*;

fn read(file: &str) -> String {
    std::fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

// ---- configuration defaults ----

/// One `key = value  # comment` of a documented TOML block, with its table's path and
/// the comment on its own line.
struct Setting {
    place: String,
    path: Vec<String>,
    value: toml::Value,
    comment: String,
}

impl Setting {
    /// Its value is an example, not the default: its own comment says so first
    /// (`# an example: …`). A comment on the lines under it does not count: that is where
    /// the comment of the setting before continues, or a setting left commented out.
    fn is_example(&self) -> bool {
        self.comment.starts_with("an example")
    }

    /// The table it is in.
    fn table(&self) -> &[String] {
        &self.path[..self.path.len() - 1]
    }

    fn key(&self) -> String {
        self.path.join(".")
    }
}

/// The settings of a TOML block, line by line; comment lines are not settings, and
/// `[[array]]` tables are skipped (their entries have no defaults).
fn settings(place: &str, text: &str) -> Vec<Setting> {
    let mut found: Vec<Setting> = Vec::new();
    let mut table: Option<Vec<String>> = Some(Vec::new());
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            continue;
        }
        let (code, comment) = split_comment(trimmed);
        if code.starts_with("[[") {
            table = None;
        } else if let Some(header) = code.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            table = Some(header.split('.').map(|s| s.trim().to_owned()).collect());
        } else if let (Some(table), Some((key, value))) = (&table, code.split_once('=')) {
            let parsed: toml::Table = toml::from_str(&format!("v = {}", value.trim()))
                .unwrap_or_else(|e| panic!("{place}+{index}: `{line}`: {e}"));
            let mut path = table.clone();
            path.push(key.trim().to_owned());
            found.push(Setting {
                place: format!("{place}+{}", index + 1),
                path,
                value: parsed["v"].clone(),
                comment: comment.to_owned(),
            });
        }
    }
    found
}

/// A line's code and its comment (a `#` outside a string).
fn split_comment(line: &str) -> (&str, &str) {
    let mut quote = None;
    for (at, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(open), _) if c == open => quote = None,
            (None, '#') => return (line[..at].trim(), line[at + 1..].trim()),
            _ => {}
        }
    }
    (line.trim(), "")
}

/// What must be named for the documented tables to exist: each `[servers.NAME]` with its
/// `command` or `url`, each `[profiles.NAME]`; nothing else.
fn named_only(settings: &[Setting]) -> String {
    let mut text = String::new();
    let mut written = BTreeSet::new();
    for setting in settings {
        let [map, name, ..] = setting.path.as_slice() else {
            continue;
        };
        if !["servers", "profiles"].contains(&map.as_str()) || setting.path.len() < 3 {
            continue;
        }
        if written.insert(format!("{map}.{name}")) {
            text.push_str(&format!("[{map}.{name}]\n"));
        }
        if map == "servers" && ["command", "url"].contains(&setting.path[2].as_str()) {
            text.push_str(&format!("{} = {}\n", setting.path[2], setting.value));
        }
    }
    text
}

/// `mcp-gateway config dump` of `text`, parsed.
fn dump(text: &str) -> toml::Table {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, text).unwrap();
    let output = Command::new(gateway_bin())
        .args(["config", "dump", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "config dump of\n{text}\nfailed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    toml::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn lookup<'a>(table: &'a toml::Table, path: &[String]) -> Option<&'a toml::Value> {
    let (last, tables) = path.split_last()?;
    let mut table = table;
    for key in tables {
        table = table.get(key)?.as_table()?;
    }
    table.get(last)
}

/// The settings the documentation states defaults for: configuration.md's blocks, and
/// the `[code]` block of run-code.md, which configuration.md refers to.
fn documented_settings() -> Vec<Setting> {
    blocks()
        .into_iter()
        .filter(|block| block.lang == "toml")
        .filter(|block| {
            block.file == "docs/configuration.md"
                || (block.file == "docs/run-code.md"
                    && block.text.trim_start().starts_with("[code]"))
        })
        .flat_map(|block| settings(&block.place(), &block.text))
        .collect()
}

/// An empty list or table: what `config dump` leaves out rather than prints.
fn is_empty(value: &toml::Value) -> bool {
    match value {
        toml::Value::Array(items) => items.is_empty(),
        toml::Value::Table(table) => table.is_empty(),
        _ => false,
    }
}

#[test]
fn every_documented_value_is_the_parsers_default_unless_called_an_example() {
    let documented = documented_settings();
    assert!(documented.len() > 40, "too few settings read");
    let defaults = dump(&named_only(&documented));
    let mut compared = 0;
    let mut wrong = Vec::new();
    for setting in documented.iter().filter(|s| !s.is_example()) {
        compared += 1;
        match lookup(&defaults, &setting.path) {
            Some(default) if *default == setting.value => {}
            Some(default) => wrong.push(format!(
                "{}: `{} = {}` but the default is {default}",
                setting.place,
                setting.key(),
                setting.value
            )),
            None if is_empty(&setting.value) => {}
            None => wrong.push(format!(
                "{}: `{} = {}` but `config dump` has no `{}`: there is no such default; \
                 show the default, or begin the comment with `an example`",
                setting.place,
                setting.key(),
                setting.value,
                setting.key()
            )),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(compared > 40, "only {compared} defaults compared");
}

// ---- refusals of unknown keys and of values of the wrong type ----

/// The lines that open `table` as the documentation writes it: its header, after the
/// header of the server it belongs to and that server's `command` or `url` (unless
/// `endpoint_tried` is the one being tried).
fn opening(table: &[String], documented: &[Setting], endpoint_tried: Option<&str>) -> String {
    let mut text = String::new();
    if let [servers, name, ..] = table
        && servers == "servers"
    {
        text.push_str(&format!("[servers.{name}]\n"));
        let endpoint = documented.iter().find(|s| {
            s.path.len() == 3
                && s.path[..2] == table[..2]
                && ["command", "url"].contains(&s.path[2].as_str())
        });
        if let Some(endpoint) = endpoint
            && (table.len() > 2 || endpoint_tried != Some(endpoint.path[2].as_str()))
        {
            text.push_str(&format!("{} = {}\n", endpoint.path[2], endpoint.value));
        }
        if table.len() > 2 {
            text.push_str(&format!("[{}]\n", table.join(".")));
        }
    } else if !table.is_empty() {
        text.push_str(&format!("[{}]\n", table.join(".")));
    }
    text
}

/// A value of another type than `value`.
fn of_another_type(value: &toml::Value) -> &'static str {
    match value {
        toml::Value::String(_) => "1",
        toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Datetime(_) => "\"1\"",
        toml::Value::Boolean(_) => "\"yes\"",
        toml::Value::Array(_) | toml::Value::Table(_) => "1",
    }
}

#[test]
fn an_unknown_key_or_a_value_of_the_wrong_type_is_refused_naming_the_key_and_its_line() {
    let documented = documented_settings();
    // (the file's text, the key the refusal must name, its line)
    let mut cases: Vec<(String, String, usize)> = Vec::new();
    let tables: BTreeSet<&[String]> = documented.iter().map(Setting::table).collect();
    for table in tables {
        let text = opening(table, &documented, None);
        let line = text.lines().count() + 1;
        let mut key = table.to_vec();
        key.push("no_such_key".into());
        cases.push((format!("{text}no_such_key = 1\n"), key.join("."), line));
    }
    for setting in &documented {
        let last = setting.path.last().map(String::as_str);
        let text = opening(setting.table(), &documented, last);
        let line = text.lines().count() + 1;
        let written = format!(
            "{text}{} = {}\n",
            last.unwrap_or_default(),
            of_another_type(&setting.value)
        );
        cases.push((written, setting.key(), line));
    }
    assert!(cases.len() > 60, "only {} cases", cases.len());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.toml");
    let mut wrong = Vec::new();
    for (text, key, line) in &cases {
        std::fs::write(&file, text).unwrap();
        let output = Command::new(gateway_bin())
            .args(["config", "check", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let expected = format!("{}:{line}: `{key}`: ", file.display());
        if output.status.success() || !stderr.contains(&expected) {
            wrong.push(format!("{text}expected `{expected}`, got: {stderr}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n---\n"));
}

// ---- error codes ----

/// The codes of error-codes.md's tables: the backticked names in each row's first cell
/// (`A` / `B` rows name two), and the backticked upper-case names (`PARKED_REPLICA_GONE`)
/// in its other cells, by the heading they are under. Numeric JSON-RPC codes are left out:
/// they are the protocol's.
fn documented_codes() -> BTreeMap<String, String> {
    let mut codes = BTreeMap::new();
    let mut heading = String::new();
    for line in read("docs/error-codes.md").lines() {
        if let Some(title) = line.strip_prefix("## ") {
            heading = title.to_owned();
        }
        let Some(row) = line.strip_prefix('|') else {
            continue;
        };
        for (index, cell) in row.split('|').enumerate() {
            for name in cell.split('`').skip(1).step_by(2) {
                let named = if index == 0 {
                    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                } else {
                    is_upper_snake(name)
                };
                if named {
                    codes.insert(name.to_owned(), heading.clone());
                }
            }
        }
    }
    codes
}

/// `LIKE_THIS`: upper-case words joined by `_`, the shape of our codes (and of
/// environment variables' names).
fn is_upper_snake(text: &str) -> bool {
    text.contains('_')
        && text.starts_with(|c: char| c.is_ascii_uppercase())
        && text
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The gateway's Rust sources (not its tests).
fn sources() -> Vec<(String, String)> {
    let mut pending = vec![repo().join("gateway/src")];
    let mut found = Vec::new();
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            let text = std::fs::read_to_string(&path).unwrap();
            // Unit tests sit at the end of a file, after `#[cfg(test)]`.
            let text = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or_default()
                .to_owned();
            found.push((path.display().to_string(), text));
        }
    }
    found
}

/// The text of each function body that starts at `signature`.
fn bodies<'a>(text: &'a str, signature: &str) -> Vec<&'a str> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices(signature) {
        let rest = &text[at..];
        let Some(open) = rest.find('{') else { continue };
        let mut depth = 0;
        for (i, c) in rest[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        found.push(&rest[open..open + i]);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// The string literals of `text`.
fn literals(text: &str) -> Vec<&str> {
    text.split('"').skip(1).step_by(2).collect()
}

/// Every code the gateway gives: the literals (and named constants) in each
/// `fn code(&self) -> &'static str`, in `ErrorCode::as_str`, and run_code's failure kinds
/// in `FailureKind::as_str`; and wherever else it writes one, every `LIKE_THIS` string
/// literal of its sources that is not the name of an environment variable.
fn emitted_codes() -> BTreeSet<String> {
    let sources = sources();
    let constants: BTreeMap<&str, &str> = sources
        .iter()
        .flat_map(|(_, text)| text.lines())
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("pub ").unwrap_or(line.trim());
            let (name, value) = rest.strip_prefix("const ")?.split_once(": &str = \"")?;
            Some((name, value.strip_suffix("\";")?))
        })
        .collect();
    let mut codes = BTreeSet::new();
    for (_, text) in &sources {
        let mut found = bodies(text, "fn code(&self) -> &'static str");
        for kind in ["impl ErrorCode {", "impl FailureKind {"] {
            if let Some(at) = text.find(kind) {
                found.extend(
                    bodies(&text[at..], "fn as_str(self) -> &'static str")
                        .into_iter()
                        .take(1),
                );
            }
        }
        for body in found {
            codes.extend(literals(body).into_iter().map(str::to_owned));
            for word in words(body) {
                if let Some(value) = constants.get(word) {
                    codes.insert((*value).to_owned());
                }
            }
        }
    }
    let variables = environment_variables(&sources, &constants);
    for (_, text) in &sources {
        // Between two consecutive quotes: a whole `LIKE_THIS` is a literal's text, never
        // code between two literals.
        for quoted in text.split('"').filter(|piece| is_upper_snake(piece)) {
            if !variables.contains(quoted) {
                codes.insert(quoted.to_owned());
            }
        }
    }
    codes
}

/// The identifiers of `text`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
}

/// The names of the environment variables the sources read or set: the literals on a line
/// that reads or sets one (`env!`, `env::var`, `var_os`, `.env(`, clap's `env =`), and the
/// constants such a line names.
fn environment_variables<'a>(
    sources: &'a [(String, String)],
    constants: &BTreeMap<&str, &'a str>,
) -> BTreeSet<&'a str> {
    const USES: &[&str] = &["env!(", "env::var", "var_os(", ".env(", "env = "];
    let mut names = BTreeSet::new();
    let lines = sources.iter().flat_map(|(_, text)| text.lines());
    for line in lines.filter(|line| USES.iter().any(|usage| line.contains(usage))) {
        names.extend(line.split('"').filter(|piece| is_upper_snake(piece)));
        names.extend(words(line).filter_map(|word| constants.get(word).copied()));
    }
    names
}

#[test]
fn every_documented_error_code_is_in_the_code_and_every_code_is_documented() {
    let documented = documented_codes();
    let emitted = emitted_codes();
    assert!(
        emitted.contains("INVALID_ARGS") && emitted.contains("heap") && emitted.len() > 40,
        "the code's error codes were not found: {emitted:?}"
    );
    let everywhere: String = sources().into_iter().map(|(_, text)| text).collect();
    let missing: Vec<String> = documented
        .iter()
        .filter(|(code, _)| !everywhere.contains(&format!("\"{code}\"")))
        .map(|(code, heading)| format!("{code} (under \"{heading}\")"))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/error-codes.md lists codes the gateway never gives: {missing:?}"
    );
    let undocumented: Vec<&String> = emitted
        .iter()
        .filter(|code| !documented.contains_key(*code))
        .collect();
    assert!(
        undocumented.is_empty(),
        "codes the gateway gives that docs/error-codes.md does not list: {undocumented:?}"
    );
}

// ---- links ----

/// GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces
/// as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    prose_lines(text)
        .filter_map(|line| {
            line.trim_start_matches('#')
                .strip_prefix(' ')
                .filter(|_| line.starts_with('#'))
        })
        .map(anchor)
        .collect()
}

/// The lines of a Markdown text outside fenced code blocks.
fn prose_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    text.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The targets of the inline links `[text](target)` of a Markdown text (outside code).
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(text) {
        // Code spans hold no links.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    targets
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for (file, text) in documents() {
        let folder = Path::new(&file).parent().unwrap_or(Path::new(""));
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let linked = if path.is_empty() {
                file.clone()
            } else {
                folder.join(path).to_string_lossy().into_owned()
            };
            let full = repo().join(&linked);
            if !full.exists() {
                broken.push(format!("{file}: ({target}): no file {linked}"));
                continue;
            }
            if !fragment.is_empty() {
                let headings = anchors(&std::fs::read_to_string(&full).unwrap_or_default());
                if !headings.contains(fragment) {
                    broken.push(format!(
                        "{file}: ({target}): no heading #{fragment} in {linked}"
                    ));
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} links found");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

// ---- refusals of configuration values ----

/// A configuration the gateway refuses, the key it must name, that key's line, and the
/// code (if any).
const REFUSED: &[(&str, &str, usize, &str)] = &[
    (
        "[servers.kv]\ncommand = \"kv\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
        "servers.kv.url",
        3,
        "",
    ),
    (
        "[servers.kv]\ncommand = \"kv\"\nprefix = \"a b\"\n",
        "servers.kv.prefix",
        3,
        "",
    ),
    (
        "[gateway]\nmode = \"both\"\n\n[servers.kv]\ncommand = \"kv\"\nenv = { K = \"${MCP_GATEWAY_UNSET_FOR_DRIFT}\" }\n",
        "servers.kv.env.K",
        6,
        "",
    ),
    (
        "[[policy]]\ntool = \"a\"\ndecision = \"allow\"\n\n[[policy]]\ntool = \"[\"\ndecision = \"deny\"\n",
        "policy[1].tool",
        6,
        "",
    ),
    (
        "[profiles.p]\ndeny = [\"ok\", \"[\"]\n",
        "profiles.p.deny[1]",
        2,
        "",
    ),
    (
        "[servers.kv]\ncommand = \"kv\"\n\n[servers.kv.oauth]\n",
        "servers.kv.oauth",
        4,
        "OAUTH_NOT_REMOTE",
    ),
    (
        "[servers.r]\nurl = \"http://127.0.0.1:1/mcp\"\n[servers.r.oauth]\ngrant = \"client_credentials\"\nclient_id = \"gw\"\n",
        "servers.r.oauth",
        3,
        "OAUTH_MACHINE_WITHOUT_SECRET",
    ),
    (
        "[servers.r]\nurl = \"http://127.0.0.1:1/mcp\"\n[servers.r.oauth]\nclient_secret = \"s\"\n",
        "servers.r.oauth",
        3,
        "OAUTH_SECRET_WITHOUT_ID",
    ),
    (
        "[servers.r]\nurl = \"http://127.0.0.1:1/mcp\"\n[servers.r.oauth]\ngrant = \"client_credentials\"\nclient_id = \"gw\"\nclient_secret = \"s\"\nper_user = true\n",
        "servers.r.oauth",
        3,
        "OAUTH_MACHINE_PER_USER",
    ),
    (
        "[servers.r]\nurl = \"http://127.0.0.1:1/mcp\"\n[servers.r.oauth]\ngrant = \"token_exchange\"\n",
        "servers.r.oauth",
        3,
        "OAUTH_EXCHANGE_WITHOUT_CLIENT",
    ),
    (
        "[listen.oauth]\naudience = \"https://gw.example/mcp\"\n",
        "listen.oauth",
        1,
        "OAUTH_NO_KEY_SOURCE",
    ),
    (
        "[listen.oauth]\nissuer = \"https://idp.example\"\naudience = \"https://gw.example/mcp\"\nalgorithms = []\n",
        "listen.oauth.algorithms",
        4,
        "OAUTH_NO_ALGORITHMS",
    ),
    (
        "[listen.oauth]\nissuer = \"https://idp.example\"\naudience = \"gateway\"\n",
        "listen.oauth.resource",
        1,
        "OAUTH_RESOURCE_NOT_URL",
    ),
    (
        "[listen]\naddress = \"0.0.0.0:8765\"\n",
        "listen.address",
        2,
        "LISTEN_NON_LOOPBACK_WITHOUT_TOKENS",
    ),
    (
        "[listen]\ntokens = [\"short\"]\n",
        "listen.tokens[0]",
        2,
        "LISTEN_INVALID_TOKEN",
    ),
    (
        "[listen]\ntokens = [\n  \"a-token-of-sixteen\",\n  \"a-token-of-sixteen\",\n]\n",
        "listen.tokens[1]",
        4,
        "LISTEN_DUPLICATE_TOKEN",
    ),
    (
        "[listen]\nallowed_hosts = [\"ok.example\", \"bad host\"]\n",
        "listen.allowed_hosts[1]",
        2,
        "LISTEN_INVALID_ALLOWED_HOST",
    ),
    (
        "[listen]\nallowed_origins = [\"nope\"]\n",
        "listen.allowed_origins[0]",
        2,
        "LISTEN_INVALID_ALLOWED_ORIGIN",
    ),
    (
        "[listen]\npublic_url = \"https://gateway.example/mcp\"\n",
        "listen.public_url",
        2,
        "LISTEN_INVALID_PUBLIC_URL",
    ),
    (
        "[listen]\nmax_body_bytes = 0\n",
        "listen.max_body_bytes",
        2,
        "LISTEN_ZERO_BODY_LIMIT",
    ),
    (
        "[listen]\nbehind_proxy = true\n",
        "listen.behind_proxy",
        2,
        "LISTEN_BEHIND_PROXY_WITHOUT_TOKENS",
    ),
    (
        "[listen]\nbehind_proxy = true\ntokens = [\"a-token-of-sixteen\"]\n",
        "listen.behind_proxy",
        2,
        "LISTEN_BEHIND_PROXY_WITHOUT_HOSTS",
    ),
];

#[test]
fn every_refusal_names_the_file_the_key_the_line_and_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.toml");
    let mut wrong = Vec::new();
    for (text, key, line, code) in REFUSED {
        std::fs::write(&file, text).unwrap();
        let output = Command::new(gateway_bin())
            .args(["config", "check", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let mut expected = format!("{}:{line}: `{key}`: ", file.display());
        if !code.is_empty() {
            expected.push_str(&format!("{code}: "));
        }
        if output.status.success() || !stderr.contains(&expected) {
            wrong.push(format!("{text}\nexpected `{expected}`, got: {stderr}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n---\n"));
    // Every code of error-codes.md's table of refused configurations is tried above.
    let (_, table) = table_after(&read("docs/error-codes.md"), "A configuration is refused");
    let untried: Vec<&str> = table
        .iter()
        .flat_map(|cells| cells[0].split('`').skip(1).step_by(2))
        .filter(|code| !REFUSED.iter().any(|(_, _, _, tried)| tried == code))
        .collect();
    assert!(
        table.len() > 10,
        "the table of refused configurations was not found"
    );
    assert!(
        untried.is_empty(),
        "configuration codes no case tries: {untried:?}"
    );
}

// ---- rust-version ----

/// `1.95` or `1.95.0` as (1, 95, 0).
fn version(text: &str) -> (u64, u64, u64) {
    let mut parts = text.split('.').map(|p| p.parse().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

#[test]
fn rust_version_is_what_the_dependencies_need() {
    let workspace: toml::Table = toml::from_str(&read("Cargo.toml")).unwrap();
    let ours = workspace["workspace"]["package"]["rust-version"]
        .as_str()
        .expect("[workspace.package] rust-version");
    for member in workspace["workspace"]["members"].as_array().unwrap() {
        let manifest: toml::Table =
            toml::from_str(&read(&format!("{}/Cargo.toml", member.as_str().unwrap()))).unwrap();
        assert_eq!(
            manifest["package"]
                .get("rust-version")
                .and_then(|v| v.get("workspace")),
            Some(&toml::Value::Boolean(true)),
            "{member} does not take the workspace's rust-version"
        );
    }
    // The dependencies' own manifests, as cargo unpacked them for this build.
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(&std::env::var_os("HOME").unwrap()).join(".cargo"));
    let registries: Vec<_> = std::fs::read_dir(home.join("registry/src"))
        .map(|dirs| dirs.flatten().map(|d| d.path()).collect())
        .unwrap_or_default();
    let lock: toml::Table = toml::from_str(&read("Cargo.lock")).unwrap();
    let mut needed = ((0, 0, 0), String::from("nothing"));
    let mut read_manifests = 0;
    for package in lock["package"].as_array().unwrap() {
        if package.get("source").is_none() {
            continue;
        }
        let folder = format!(
            "{}-{}",
            package["name"].as_str().unwrap(),
            package["version"].as_str().unwrap()
        );
        let Some(manifest) = registries.iter().find_map(|registry| {
            std::fs::read_to_string(registry.join(&folder).join("Cargo.toml")).ok()
        }) else {
            continue;
        };
        read_manifests += 1;
        let manifest: toml::Table = toml::from_str(&manifest).unwrap();
        if let Some(wanted) = manifest["package"]
            .get("rust-version")
            .and_then(|v| v.as_str())
            && version(wanted) > needed.0
        {
            needed = (version(wanted), format!("{folder} ({wanted})"));
        }
    }
    assert!(
        read_manifests > 100,
        "only {read_manifests} dependency manifests found"
    );
    assert_eq!(
        version(ours),
        needed.0,
        "rust-version = \"{ours}\", but {} needs another",
        needed.1
    );
}
