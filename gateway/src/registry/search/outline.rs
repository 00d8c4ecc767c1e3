//! The catalog at a glance, in a fixed budget: what `run_code`'s description carries in
//! `search` mode instead of the whole SDK. One line per server with its tool count and
//! tool names; each name with a short summary (the first sentence of its description) when
//! every summary fits; names cut with "+N more" when even the names do not. Types come
//! from `search_tools`.
//!
//! ```text
//! git (12): git_add (Adds file contents to the staging area); git_branch (List Git branches); …
//! time (2): convert_time (Convert time between timezones); get_current_time (Get current …)
//! ```

use std::collections::BTreeMap;

use super::SearchIndex;
use crate::registry::FederatedTool;

/// Characters the outline may take.
pub const OUTLINE_BUDGET: usize = 1600;

/// Summary lengths tried, longest first; 0 is names only.
const SUMMARY_LENGTHS: [usize; 7] = [120, 80, 60, 40, 30, 20, 0];

/// What ends a cut name list or summary.
const ELLIPSIS: &str = "…";

/// The outline of `index` in at most `budget` bytes.
pub fn outline(index: &SearchIndex, budget: usize) -> String {
    let mut servers: BTreeMap<&str, Vec<&FederatedTool>> = BTreeMap::new();
    for tool in index.tools() {
        servers.entry(&tool.server).or_default().push(tool);
    }
    for tools in servers.values_mut() {
        tools.sort_by(|a, b| a.original.cmp(&b.original));
    }
    for length in SUMMARY_LENGTHS {
        let text = whole(&servers, length);
        if text.len() <= budget {
            return text;
        }
    }
    cut(&servers, budget)
}

/// Every server and every tool, with summaries of at most `length` characters.
fn whole(servers: &BTreeMap<&str, Vec<&FederatedTool>>, length: usize) -> String {
    let mut out = String::new();
    for (server, tools) in servers {
        out.push_str(&format!("{server} ({}): ", tools.len()));
        let entries: Vec<String> = tools
            .iter()
            .map(|tool| match summary(tool, length) {
                Some(summary) => format!("{} ({summary})", tool.original),
                None => tool.original.clone(),
            })
            .collect();
        out.push_str(&entries.join(if length > 0 { "; " } else { ", " }));
        out.push('\n');
    }
    out
}

/// Names only, each server's list cut to an equal share of `budget`; servers past the
/// budget are counted, not named.
fn cut(servers: &BTreeMap<&str, Vec<&FederatedTool>>, budget: usize) -> String {
    let share = (budget / servers.len().max(1)).saturating_sub(1);
    let mut out = String::new();
    for (shown, (server, tools)) in servers.iter().enumerate() {
        let mut line = format!("{server} ({}):", tools.len());
        let mut listed = 0;
        for tool in tools {
            let more = format!(", {ELLIPSIS} +{} more", tools.len() - listed);
            if line.len() + 2 + tool.original.len() + more.len() > share {
                break;
            }
            line.push_str(if listed == 0 { " " } else { ", " });
            line.push_str(&tool.original);
            listed += 1;
        }
        if listed < tools.len() {
            line.push_str(&format!(
                "{}{ELLIPSIS} +{} more",
                if listed == 0 { " " } else { ", " },
                tools.len() - listed
            ));
        }
        let rest = format!("{ELLIPSIS} +{} more servers\n", servers.len() - shown);
        // The line, and room to say what follows unless nothing does.
        let after = if shown + 1 < servers.len() {
            rest.len()
        } else {
            0
        };
        if out.len() + line.len() + 1 + after > budget {
            out.push_str(&rest);
            return out;
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The first sentence of the tool's description (or its title), cut to `length`
/// characters; `None` for names-only.
fn summary(tool: &FederatedTool, length: usize) -> Option<String> {
    if length == 0 {
        return None;
    }
    let definition = &tool.definition;
    let text = definition
        .description
        .as_deref()
        .or(definition.title.as_deref())?
        .trim();
    let sentence = text
        .split_terminator(['\n'])
        .next()
        .unwrap_or_default()
        .split(". ")
        .next()
        .unwrap_or_default()
        .trim()
        .trim_end_matches('.');
    if sentence.is_empty() {
        return None;
    }
    if sentence.chars().count() <= length {
        return Some(sentence.to_owned());
    }
    let cut: String = sentence.chars().take(length.saturating_sub(1)).collect();
    Some(format!("{}{ELLIPSIS}", cut.trim_end()))
}
