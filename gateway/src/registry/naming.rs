//! Federated names: `mcp__<server>__<name>`, the way every upstream tool and prompt is
//! re-exported.
//!
//! Clients accept only `[A-Za-z0-9_-]` and at most 64 characters, so other characters
//! become `_`, and a longer name is cut and given a short hash suffix computed from the
//! original (server, name) pair: the same on every start. Two names that sanitize to the
//! same string are told apart the same way, deterministically, and reported.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

/// The longest name clients accept.
pub const MAX_NAME_LEN: usize = 64;
const PREFIX: &str = "mcp__";
const SEPARATOR: &str = "__";
const HASH_LEN: usize = 8;

/// A stable short hash of an upstream (server, name) pair.
fn short_hash(server: &str, name: &str) -> String {
    let digest = Sha256::new()
        .chain_update(server.as_bytes())
        .chain_update([0u8])
        .chain_update(name.as_bytes())
        .finalize();
    digest
        .iter()
        .take(HASH_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn sanitize(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The prefix of every name `server` exports: `mcp__<server>__`.
pub fn prefix(server: &str) -> String {
    format!("{PREFIX}{}{SEPARATOR}", sanitize(server))
}

/// `mcp__<server>__<name>` sanitized, cut to 64 with a hash suffix when `force_hash`
/// or when it would be longer.
fn federate(server: &str, name: &str, force_hash: bool) -> String {
    let full = format!("{}{}", prefix(server), sanitize(name));
    if full.len() <= MAX_NAME_LEN && !force_hash {
        return full;
    }
    let suffix = short_hash(server, name);
    let keep = full.len().min(MAX_NAME_LEN - HASH_LEN - 1);
    format!("{}_{suffix}", &full[..keep])
}

/// A name the assigner had to change beyond plain sanitizing, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collision {
    pub server: String,
    pub name: String,
    pub assigned: String,
    pub clashed_with: String,
}

/// Assigns federated names to upstream `(server, name)` pairs.
///
/// Deterministic whatever the input order: pairs are taken in sorted order, the first
/// pair to produce a name keeps it, later ones get the hash-suffixed form.
pub fn assign<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> (BTreeMap<(String, String), String>, Vec<Collision>) {
    let sorted: BTreeSet<(&str, &str)> = pairs.into_iter().collect();
    let mut taken: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut assigned = BTreeMap::new();
    let mut collisions = Vec::new();
    for (server, name) in sorted {
        let mut candidate = federate(server, name, false);
        if let Some((other_server, other_name)) = taken.get(&candidate) {
            let clashed_with = format!("{other_server}/{other_name}");
            candidate = federate(server, name, true);
            collisions.push(Collision {
                server: server.to_owned(),
                name: name.to_owned(),
                assigned: candidate.clone(),
                clashed_with,
            });
        }
        taken.insert(candidate.clone(), (server.to_owned(), name.to_owned()));
        assigned.insert((server.to_owned(), name.to_owned()), candidate);
    }
    (assigned, collisions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_prefixed() {
        assert_eq!(federate("kv", "get", false), "mcp__kv__get");
        assert_eq!(
            federate("everything", "get-sum", false),
            "mcp__everything__get-sum"
        );
        assert_eq!(federate("s", "a.b/c d", false), "mcp__s__a_b_c_d");
    }

    #[test]
    fn long_names_are_cut_to_64_with_a_stable_suffix() {
        let long = "x".repeat(70);
        let name = federate("srv", &long, false);
        assert_eq!(name.len(), MAX_NAME_LEN);
        assert_eq!(name, federate("srv", &long, false));
        assert_ne!(name, federate("srv", &"x".repeat(71), false));
    }

    #[test]
    fn sanitized_clashes_keep_both_names_callable() {
        let (names, collisions) = assign([("s", "a.b"), ("s", "a_b")]);
        let first = &names[&("s".to_owned(), "a.b".to_owned())];
        let second = &names[&("s".to_owned(), "a_b".to_owned())];
        assert_ne!(first, second);
        assert_eq!(collisions.len(), 1);
        let (again, _) = assign([("s", "a_b"), ("s", "a.b")]);
        assert_eq!(names, again, "order of discovery must not matter");
    }
}
