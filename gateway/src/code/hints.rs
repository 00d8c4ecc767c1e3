//! Hints for a program that failed on a tool its session does not have.
//!
//! The SDK a session sees declares only the tools its profile shows, but a program may
//! still name others: a server the profile hides, a tool it misremembers. In JavaScript
//! that is a bare `TypeError` (`Cannot read properties of undefined (reading 'x')`,
//! `tools.kv.set is not a function`), which does not say what is missing. The run_code
//! tool adds these hints to such a failure: each `tools.<server>` or
//! `tools.<server>.<tool>` the program names that the session lacks, with what it has.
//! Worked out only for a failed run, from the program's text and the run's tool table.

use std::collections::{BTreeMap, BTreeSet};

/// Names listed at most in one hint.
const MAX_LISTED: usize = 20;

/// Hints at most per failure.
const MAX_HINTS: usize = 5;

/// One line per `tools.<server>[.<tool>]` in `program` that the session lacks, given its
/// tool `table` (sdkgen's binding table: `[server, tool, federated name, structured]`
/// rows) and its `pending` servers (whose tools are not known yet, so any name may
/// exist); empty when every name resolves or the table cannot be read.
pub(crate) fn missing_tools(program: &str, table: &str, pending: &[String]) -> Vec<String> {
    let Ok(rows) = serde_json::from_str::<Vec<(String, String, String, u8)>>(table) else {
        return Vec::new();
    };
    let mut servers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (server, tool, _, _) in &rows {
        servers.entry(server).or_default().insert(tool);
    }
    let mut hints = Vec::new();
    for (server, tool) in tool_references(program) {
        if pending.contains(&server) {
            continue;
        }
        let hint = match (servers.get(server.as_str()), tool) {
            (None, _) => format!(
                "hint: this session has no server `{server}` (`tools.{server}`); its servers: {}",
                listed(servers.keys().copied())
            ),
            (Some(tools), Some(tool)) if !tools.contains(tool.as_str()) => format!(
                "hint: server `{server}` offers this session no tool `{tool}` \
                 (`tools.{server}.{tool}`); its tools: {}",
                listed(tools.iter().copied())
            ),
            _ => continue,
        };
        if !hints.contains(&hint) {
            hints.push(hint);
        }
        if hints.len() == MAX_HINTS {
            break;
        }
    }
    hints
}

/// `names`, comma-separated, at most [`MAX_LISTED`] of them.
fn listed<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> String {
    let count = names.len();
    if count == 0 {
        return "none".into();
    }
    let mut text = names.take(MAX_LISTED).collect::<Vec<_>>().join(", ");
    if count > MAX_LISTED {
        text.push_str(&format!(", … ({count} in all)"));
    }
    text
}

/// The `(server, tool)` names of every `tools.server`, `tools.server.tool`,
/// `tools["server"]` and `tools["server"]["tool"]` in `program`, in order. A mention in a
/// comment or a string counts too; that can only add a hint that is true anyway.
fn tool_references(program: &str) -> Vec<(String, Option<String>)> {
    let mut found = Vec::new();
    let mut rest = program;
    let mut before: Option<char> = None;
    while let Some(at) = rest.find("tools") {
        let preceding = rest[..at].chars().next_back().or(before);
        let after = &rest[at + "tools".len()..];
        before = Some('s');
        rest = after;
        if preceding.is_some_and(|c| c == '.' || is_identifier_char(c)) {
            continue;
        }
        let Some((server, after_server)) = member(after) else {
            continue;
        };
        let tool = member(after_server).map(|(tool, _)| tool);
        found.push((server, tool));
    }
    found
}

/// The name of a `.name`, `?.name` or `["name"]` member access at the start of `text`
/// (after spaces), and the text after it.
fn member(text: &str) -> Option<(String, &str)> {
    let text = text.trim_start();
    let (optional, text) = match text.strip_prefix("?.") {
        Some(after) => (true, after.trim_start()),
        None => (false, text),
    };
    let dotted = match optional {
        true => (!text.starts_with('[')).then_some(text),
        false => text.strip_prefix('.').map(str::trim_start),
    };
    if let Some(dotted) = dotted {
        let end = dotted
            .find(|c: char| !is_identifier_char(c))
            .unwrap_or(dotted.len());
        let name = &dotted[..end];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        return Some((name.to_owned(), &dotted[end..]));
    }
    let quoted = text.strip_prefix('[')?.trim_start();
    let quote = quoted.chars().next().filter(|q| *q == '"' || *q == '\'')?;
    let inner = &quoted[1..];
    let end = inner.find(quote)?;
    let name = &inner[..end];
    if name.contains('\\') {
        return None;
    }
    let after = inner[end + 1..].trim_start().strip_prefix(']')?;
    Some((name.to_owned(), after))
}

fn is_identifier_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = r#"[["kv", "get", "mcp__kv__get", 0], ["kv", "list", "mcp__kv__list", 1]]"#;

    #[test]
    fn a_hidden_server_and_a_missing_tool_are_named_with_what_there_is() {
        let program = "const v = await tools.kv.set({key: 'a'});\nreturn tools.broken.x();";
        assert_eq!(
            missing_tools(program, TABLE, &[]),
            [
                "hint: server `kv` offers this session no tool `set` (`tools.kv.set`); its tools: get, list",
                "hint: this session has no server `broken` (`tools.broken`); its servers: kv",
            ]
        );
    }

    #[test]
    fn known_tools_pending_servers_and_other_objects_give_no_hint() {
        let program = "await tools.kv.get({}); await tools['kv'][\"list\"]({});\n\
                       await tools.later.anything(); mytools.nope.x; a.tools.nope.x;";
        assert!(missing_tools(program, TABLE, &["later".into()]).is_empty());
    }

    #[test]
    fn bracket_and_optional_forms_are_read() {
        assert_eq!(
            tool_references(
                "tools?.kv?.set; tools [ 'a-b' ] [\"c\"]; tools?.[\"d\"]; tools.x; tools"
            ),
            [
                ("kv".to_owned(), Some("set".to_owned())),
                ("a-b".to_owned(), Some("c".to_owned())),
                ("d".to_owned(), None),
                ("x".to_owned(), None),
            ]
        );
    }

    #[test]
    fn long_lists_are_cut_and_an_unreadable_table_gives_nothing() {
        let rows: Vec<String> = (0..25)
            .map(|i| format!(r#"["s{i:02}", "t", "mcp__s{i:02}__t", 0]"#))
            .collect();
        let table = format!("[{}]", rows.join(","));
        let hints = missing_tools("tools.zz.y()", &table, &[]);
        assert!(hints[0].ends_with("s19, … (25 in all)"), "{hints:?}");
        assert!(missing_tools("tools.zz.y()", "not json", &[]).is_empty());
    }
}
