//! Federated names: `<prefix><name>`, the way every upstream tool and prompt is
//! re-exported. The prefix is the server's `prefix` setting, by default `mcp__<server>__`;
//! an empty prefix exposes the upstream's own names.
//!
//! Clients accept only `[A-Za-z0-9_-]` and at most 64 characters, so other characters
//! become `_`, and a longer name is cut and given a short hash suffix computed from the
//! original (server, name) pair: the same on every start. Two names that come out the same
//! (two servers with the same prefix offering the same name, or two names that sanitize
//! alike) go to the first in (server name, upstream name) order, lexically, whichever
//! server came up first: a server's first offer competes as if it had been there from the
//! start. Once a server's offer is settled (it was in the previous catalog), a name it
//! adds later (`list_changed`) does not take a name another server holds: the first owner
//! keeps it. The other is told apart by the hash suffix and reported as a [`Collision`]
//! naming both servers and the contested name.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

/// The longest name clients accept.
pub const MAX_NAME_LEN: usize = 64;
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

/// The default prefix of `server`'s names: `mcp__<server>__`.
pub fn prefix(server: &str) -> String {
    format!("mcp__{}__", sanitize(server))
}

/// A configured prefix as it appears in the names clients see.
pub fn exposed_prefix(prefix: &str) -> String {
    sanitize(prefix)
}

/// `<prefix><name>` sanitized, cut to 64 with a hash suffix when `force_hash` or when it
/// would be longer.
fn federate(prefix: &str, server: &str, name: &str, force_hash: bool) -> String {
    let full = format!("{}{}", sanitize(prefix), sanitize(name));
    if full.len() <= MAX_NAME_LEN && !force_hash {
        return full;
    }
    let suffix = short_hash(server, name);
    let keep = full.len().min(MAX_NAME_LEN - HASH_LEN - 1);
    format!("{}_{suffix}", &full[..keep])
}

/// Two upstream names that wanted the same exposed name, for the log and `config check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collision {
    /// The contested exposed name, which stays with `owner`.
    pub exposed: String,
    /// `(server, upstream name)` that keeps `exposed`.
    pub owner: (String, String),
    /// `(server, upstream name)` that lost it.
    pub loser: (String, String),
    /// What `loser` is exposed as instead; `None` when it is not exposed at all (a
    /// resource URI or template, which cannot be renamed).
    pub assigned: Option<String>,
}

impl std::fmt::Display for Collision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` is offered by server `{}` (as `{}`) and by server `{}` (as `{}`): `{}` keeps it",
            self.exposed, self.owner.0, self.owner.1, self.loser.0, self.loser.1, self.owner.0,
        )?;
        match &self.assigned {
            Some(assigned) => write!(f, ", `{}`'s is exposed as `{assigned}`", self.loser.0),
            None => write!(f, ", `{}`'s is not exposed", self.loser.0),
        }
    }
}

/// One upstream name to expose: its server, that server's prefix, and the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Offered<'a> {
    pub server: &'a str,
    pub name: &'a str,
    pub prefix: &'a str,
}

/// Exposed name → `(server, upstream name)`: who holds each name now.
pub type Owners = BTreeMap<String, (String, String)>;

/// Whether an offer comes after a name's current holder: it does when its server's offer
/// was already settled (in the previous catalog) and someone else holds the name, which
/// means the server added it later. A holder, and a server's first offer, compete by
/// (server, name) order.
pub fn yields(holder: Option<(&str, &str)>, server: &str, name: &str, settled: bool) -> bool {
    settled && holder.is_some_and(|holder| holder != (server, name))
}

/// Assigns exposed names to upstream names.
///
/// Deterministic whatever the order upstreams came up in: names are given in (server,
/// name) order, except that an offer that [`yields`] to the name's holder in `previous`
/// comes after every one that does not. `settled` tells whether a server's offer was in
/// the previous catalog. The first to produce a name keeps it; later ones get the
/// hash-suffixed form and a [`Collision`].
pub fn assign<'a>(
    offered: impl IntoIterator<Item = Offered<'a>>,
    previous: &Owners,
    settled: impl Fn(&str) -> bool,
) -> (BTreeMap<(String, String), String>, Vec<Collision>) {
    let after_holder = |o: &Offered<'_>| {
        let holder = previous
            .get(&federate(o.prefix, o.server, o.name, false))
            .map(|(server, name)| (server.as_str(), name.as_str()));
        yields(holder, o.server, o.name, settled(o.server))
    };
    let sorted: BTreeSet<(bool, Offered<'a>)> =
        offered.into_iter().map(|o| (after_holder(&o), o)).collect();
    let mut taken: Owners = BTreeMap::new();
    let mut assigned = BTreeMap::new();
    let mut collisions = Vec::new();
    for (_, o) in sorted {
        let key = (o.server.to_owned(), o.name.to_owned());
        let mut candidate = federate(o.prefix, o.server, o.name, false);
        if let Some(owner) = taken.get(&candidate) {
            let exposed = candidate;
            candidate = federate(o.prefix, o.server, o.name, true);
            collisions.push(Collision {
                exposed,
                owner: owner.clone(),
                loser: key.clone(),
                assigned: Some(candidate.clone()),
            });
        }
        taken.insert(candidate.clone(), key.clone());
        assigned.insert(key, candidate);
    }
    (assigned, collisions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn federated(server: &str, name: &str) -> String {
        federate(&prefix(server), server, name, false)
    }

    fn offered<'a>(server: &'a str, prefix: &'a str, name: &'a str) -> Offered<'a> {
        Offered {
            server,
            name,
            prefix,
        }
    }

    #[test]
    fn plain_names_are_prefixed() {
        assert_eq!(federated("kv", "get"), "mcp__kv__get");
        assert_eq!(
            federated("everything", "get-sum"),
            "mcp__everything__get-sum"
        );
        assert_eq!(federated("s", "a.b/c d"), "mcp__s__a_b_c_d");
        assert_eq!(federate("", "s", "get", false), "get");
        assert_eq!(federate("kv_", "s", "get", false), "kv_get");
    }

    #[test]
    fn long_names_are_cut_to_64_with_a_stable_suffix() {
        let long = "x".repeat(70);
        let name = federated("srv", &long);
        assert_eq!(name.len(), MAX_NAME_LEN);
        assert_eq!(name, federated("srv", &long));
        assert_ne!(name, federated("srv", &"x".repeat(71)));
        assert_eq!(federate("", "srv", &long, false).len(), MAX_NAME_LEN);
    }

    #[test]
    fn sanitized_clashes_keep_both_names_callable() {
        let p = prefix("s");
        let (names, collisions) = assign(
            [offered("s", &p, "a.b"), offered("s", &p, "a_b")],
            &Owners::new(),
            |_| true,
        );
        let first = &names[&("s".to_owned(), "a.b".to_owned())];
        let second = &names[&("s".to_owned(), "a_b".to_owned())];
        assert_ne!(first, second);
        assert_eq!(collisions.len(), 1);
        let (again, _) = assign(
            [offered("s", &p, "a_b"), offered("s", &p, "a.b")],
            &Owners::new(),
            |_| true,
        );
        assert_eq!(names, again, "order of discovery must not matter");
    }

    #[test]
    fn a_name_goes_by_server_order_whoever_came_up_first() {
        let both = [offered("b", "", "search"), offered("a", "", "search")];
        let (names, collisions) = assign(both, &Owners::new(), |_| true);
        assert_eq!(names[&("a".to_owned(), "search".to_owned())], "search");
        assert_eq!(collisions.len(), 1);
        assert_eq!(collisions[0].exposed, "search");
        assert_eq!(collisions[0].loser, ("b".to_owned(), "search".to_owned()));
        assert!(collisions[0].to_string().contains("server `a`"));
        assert!(collisions[0].to_string().contains("server `b`"));
        // `b` came up first and holds `search`; `a`'s first offer still takes it.
        let previous = Owners::from([("search".to_owned(), ("b".to_owned(), "search".to_owned()))]);
        let (names, collisions) = assign(both, &previous, |server| server == "b");
        assert_eq!(names[&("a".to_owned(), "search".to_owned())], "search");
        assert_eq!(collisions[0].owner.0, "a");
    }

    #[test]
    fn a_name_added_later_does_not_take_one_held() {
        let both = [offered("b", "", "search"), offered("a", "", "search")];
        // Both were offering before; `a` added `search` with a `list_changed`.
        let previous = Owners::from([("search".to_owned(), ("b".to_owned(), "search".to_owned()))]);
        let (names, collisions) = assign(both, &previous, |_| true);
        assert_eq!(names[&("b".to_owned(), "search".to_owned())], "search");
        assert_eq!(collisions[0].owner.0, "b");
        assert_eq!(collisions[0].loser.0, "a");
    }
}
