//! Where a key is written in a configuration file, so that a refusal of its value names
//! the line to fix and not only the key.
//!
//! Keys are written as the refusals name them: dotted, with `[N]` for an entry of an
//! array (`servers.kv.url`, `listen.tokens[0]`, `policy[1].tool`). A key that is not in
//! the file (a missing `command`, a default) is placed at the nearest enclosing key that
//! is: a `[servers.kv]` header, say.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// The 1-based line of `key` in `text` (TOML, or a client's JSON when `json`), or of its
/// nearest written ancestor; `None` when nothing of it is written.
pub fn line_of(text: &str, json: bool, key: &str) -> Option<usize> {
    let offset = if json {
        json_offset(text, key)
    } else {
        toml_offset(text, key)
    }?;
    Some(text[..offset.min(text.len())].matches('\n').count() + 1)
}

/// The key written at byte `offset` of the TOML `text`, named as refusals name keys
/// (`servers.kv.timeout_ms`, `listen.tokens[0]`, `policy[1].decision`): the innermost key
/// or value whose text holds `offset`; `None` when `text` does not parse or nothing is
/// written there. The parser's refusals (an unknown key, a value of the wrong type) point
/// at the key or the value they refuse.
pub fn key_at(text: &str, offset: usize) -> Option<String> {
    let document = DeTable::parse(text).ok()?;
    let mut innermost = None;
    visit_table(document.get_ref(), "", offset, &mut innermost);
    innermost.map(|(_, key)| key)
}

/// The innermost written thing found so far: its length and its key.
type Innermost = Option<(usize, String)>;

fn visit_table(table: &DeTable<'_>, path: &str, offset: usize, innermost: &mut Innermost) {
    for (key, value) in table.iter() {
        let path = if path.is_empty() {
            key.get_ref().to_string()
        } else {
            format!("{path}.{}", key.get_ref())
        };
        consider(key.span(), &path, offset, innermost);
        visit_value(value, &path, offset, innermost);
    }
}

fn visit_value(value: &Spanned<DeValue<'_>>, path: &str, offset: usize, innermost: &mut Innermost) {
    consider(value.span(), path, offset, innermost);
    match value.get_ref() {
        DeValue::Table(table) => visit_table(table, path, offset, innermost),
        DeValue::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                visit_value(item, &format!("{path}[{index}]"), offset, innermost);
            }
        }
        _ => {}
    }
}

fn consider(span: Range<usize>, path: &str, offset: usize, innermost: &mut Innermost) {
    let holds = span.contains(&offset) || (span.is_empty() && span.start == offset);
    if holds
        && innermost
            .as_ref()
            .is_none_or(|(length, _)| span.len() <= *length)
    {
        *innermost = Some((span.len(), path.to_owned()));
    }
}

/// `servers.kv.args[2]` → `servers`, `kv`, `args`, `[2]`.
enum Step<'k> {
    Key(&'k str),
    Index(usize),
}

fn steps(key: &str) -> Vec<Step<'_>> {
    let mut steps = Vec::new();
    for part in key.split('.') {
        let (name, mut rest) = part
            .split_once('[')
            .map_or((part, ""), |(name, rest)| (name, rest));
        if !name.is_empty() {
            steps.push(Step::Key(name));
        }
        while let Some((index, after)) = rest.split_once(']') {
            if let Ok(index) = index.parse() {
                steps.push(Step::Index(index));
            }
            rest = after.strip_prefix('[').unwrap_or(after);
        }
    }
    steps
}

/// The byte offset where the deepest written part of `key` starts, from the parsed
/// document's spans.
fn toml_offset(text: &str, key: &str) -> Option<usize> {
    let document = DeTable::parse(text).ok()?;
    let mut found = None;
    let mut value: Option<&DeValue<'_>> = None;
    let mut table = Some(document.get_ref());
    for step in steps(key) {
        let next: Option<(usize, &Spanned<DeValue<'_>>)> = match (step, table, value) {
            (Step::Key(name), Some(table), _) => table
                .iter()
                .find(|(written, _)| written.get_ref() == name)
                .map(|(written, value)| (written.span().start, value)),
            (Step::Index(index), _, Some(DeValue::Array(items))) => {
                items.get(index).map(|item| (item.span().start, item))
            }
            _ => None,
        };
        let Some((at, next)) = next else { break };
        found = Some(at);
        value = Some(next.get_ref());
        table = match next.get_ref() {
            DeValue::Table(inner) => Some(inner),
            _ => None,
        };
    }
    found
}

/// The byte offset of the deepest part of `key` found as a JSON object key (`"name":`),
/// each searched after the last one found. A client's file names its servers under
/// `mcpServers` or `servers`, so a part that is not written is passed over.
fn json_offset(text: &str, key: &str) -> Option<usize> {
    let mut found = None;
    for step in steps(key) {
        let Step::Key(name) = step else { continue };
        let from = found.unwrap_or(0);
        let quoted = format!("\"{name}\"");
        let at = text[from..].match_indices(&quoted).find_map(|(at, _)| {
            let after = &text[from + at + quoted.len()..];
            after.trim_start().starts_with(':').then_some(from + at)
        });
        if at.is_some() {
            found = at;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOML: &str = "\
[gateway]
mode = \"both\"

[listen]
tokens = [
  \"first-token-of-sixteen\",
  \"second-token-of-sixteen\",
]

[servers.kv]
command = \"kv\"
env = { K = \"${K}\" }

[[policy]]
tool = \"a\"
decision = \"allow\"

[[policy]]
tool = \"[\"
decision = \"deny\"
";

    #[test]
    fn finds_keys_array_entries_and_tables_of_arrays() {
        let line = |key| line_of(TOML, false, key);
        assert_eq!(line("gateway.mode"), Some(2));
        assert_eq!(line("listen.tokens[1]"), Some(7));
        assert_eq!(line("servers.kv.command"), Some(11));
        assert_eq!(line("servers.kv.env.K"), Some(12));
        assert_eq!(line("policy[1].tool"), Some(19));
    }

    #[test]
    fn a_key_not_written_is_placed_at_its_nearest_written_ancestor() {
        assert_eq!(line_of(TOML, false, "servers.kv.url"), Some(10));
        assert_eq!(line_of(TOML, false, "listen.behind_proxy"), Some(4));
        assert_eq!(line_of(TOML, false, "telemetry.otlp_endpoint"), None);
    }

    #[test]
    fn names_the_key_written_at_an_offset() {
        let at = |written: &str| key_at(TOML, TOML.find(written).unwrap());
        assert_eq!(at("mode").as_deref(), Some("gateway.mode"));
        assert_eq!(at("\"both\"").as_deref(), Some("gateway.mode"));
        assert_eq!(at("\"second-token").as_deref(), Some("listen.tokens[1]"));
        assert_eq!(at("\"${K}\"").as_deref(), Some("servers.kv.env.K"));
        assert_eq!(at("\"deny\"").as_deref(), Some("policy[1].decision"));
        assert_eq!(key_at("x = [\n", 4), None);
    }

    #[test]
    fn finds_keys_in_a_clients_json() {
        let json = "{\n  \"mcpServers\": {\n    \"kv\": {\n      \"command\": \"kv\",\n      \"url\": \"x\"\n    }\n  }\n}\n";
        assert_eq!(line_of(json, true, "servers.kv.url"), Some(5));
        assert_eq!(line_of(json, true, "servers.kv.cwd"), Some(3));
    }
}
