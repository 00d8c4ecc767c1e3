//! Local `$ref`s: parsing (`#`, `#/$defs/Node`, `#/definitions/a~1b`, percent-encoding),
//! resolution against the document, and the two facts the converter needs about a document
//! before it starts: how often each target is referenced (a target used twice becomes a
//! named type instead of being inlined twice) and a key that identifies a target by its
//! source (so identical definitions in different tools share one name).
//!
//! Every walk here is iterative and bounded by a node budget: a schema is untrusted input.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::jsdoc::compact_json;

/// A parsed local reference: the JSON pointer tokens (empty for the document root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pointer {
    pub(crate) tokens: Vec<String>,
}

impl Pointer {
    /// Parses a local reference; `None` for remote references and `#anchor` forms.
    pub(crate) fn parse(reference: &str) -> Option<Pointer> {
        let fragment = reference.strip_prefix('#')?;
        let decoded;
        let fragment = if fragment.contains('%') {
            decoded = percent_decode(fragment);
            decoded.as_str()
        } else {
            fragment
        };
        if fragment.is_empty() {
            return Some(Pointer { tokens: Vec::new() });
        }
        let path = fragment.strip_prefix('/')?;
        let tokens = path
            .split('/')
            .map(|t| {
                if t.contains('~') {
                    t.replace("~1", "/").replace("~0", "~")
                } else {
                    t.to_owned()
                }
            })
            .collect();
        Some(Pointer { tokens })
    }

    /// The canonical spelling, used as a map key: `#/a~1b/c`.
    pub(crate) fn key(&self) -> String {
        let mut key = String::from("#");
        for token in &self.tokens {
            key.push('/');
            if token.contains(['~', '/']) {
                key.push_str(&token.replace('~', "~0").replace('/', "~1"));
            } else {
                key.push_str(token);
            }
        }
        key
    }

    pub(crate) fn is_root(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The value this pointer designates in `root`.
    pub(crate) fn resolve<'a>(&self, root: &'a Value) -> Option<&'a Value> {
        let mut at = root;
        for token in &self.tokens {
            at = match at {
                Value::Object(map) => map.get(token)?,
                Value::Array(items) => items.get(token.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(at)
    }

    /// The token a type name is best derived from: the last one that is neither a schema
    /// keyword nor an index into a keyword's list (`#/$defs/Node/properties/kids/items` →
    /// `kids`, `#/anyOf/0` → none, `#/$defs/0` → `0`).
    pub(crate) fn name_hint(&self) -> Option<&str> {
        const LISTS: &[&str] = &["allOf", "anyOf", "items", "oneOf", "prefixItems"];
        const KEYWORDS: &[&str] = &[
            "$defs",
            "additionalProperties",
            "allOf",
            "anyOf",
            "definitions",
            "items",
            "oneOf",
            "patternProperties",
            "prefixItems",
            "properties",
        ];
        let tokens = &self.tokens;
        (0..tokens.len())
            .rev()
            .map(|i| (i, tokens[i].as_str()))
            .find_map(|(i, token)| {
                let parent = i.checked_sub(1).map(|p| tokens[p].as_str());
                let is_index =
                    token.parse::<usize>().is_ok() && parent.is_some_and(|p| LISTS.contains(&p));
                let is_keyword = KEYWORDS.contains(&token)
                    && !parent
                        .is_some_and(|p| p == "properties" || p == "$defs" || p == "definitions");
                (!token.is_empty() && !is_index && !is_keyword).then_some(token)
            })
    }
}

/// Decodes `%XX` escapes (invalid ones are kept as written; invalid UTF-8 is replaced).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `$ref` strings found under a value, in document order.
struct Found<'a> {
    refs: Vec<&'a str>,
    /// Nodes visited.
    visited: usize,
    /// Whether the walk stopped at the budget before seeing everything.
    truncated: bool,
}

/// Walks `value` visiting at most `budget` nodes.
fn refs_under(value: &Value, budget: usize) -> Found<'_> {
    let mut found = Found {
        refs: Vec::new(),
        visited: 0,
        truncated: false,
    };
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        if found.visited == budget {
            found.truncated = true;
            break;
        }
        found.visited += 1;
        match node {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    found.refs.push(r.as_str());
                }
                stack.extend(map.values().rev());
            }
            Value::Array(items) => stack.extend(items.iter().rev()),
            _ => {}
        }
    }
    found
}

/// How many `$ref`s in the document point at each target (by canonical key), counting
/// within the first `budget` nodes.
pub(crate) fn count_refs(root: &Value, budget: usize) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for reference in refs_under(root, budget).refs {
        if let Some(pointer) = Pointer::parse(reference) {
            *counts.entry(pointer.key()).or_insert(0) += 1;
        }
    }
    counts
}

/// A key that is equal for two targets exactly when their source is: the target's JSON and
/// that of every target reachable from it through `$ref`s. `None` when the closure is larger
/// than `budget` nodes (the caller then does not share the target).
pub(crate) fn source_key(root: &Value, target: &Pointer, budget: usize) -> Option<String> {
    let mut closure: BTreeMap<String, &Value> = BTreeMap::new();
    let mut pending = vec![target.clone()];
    let mut left = budget;
    while let Some(pointer) = pending.pop() {
        let key = pointer.key();
        if closure.contains_key(&key) {
            continue;
        }
        let Some(value) = pointer.resolve(root) else {
            continue;
        };
        closure.insert(key, value);
        let found = refs_under(value, left);
        if found.truncated {
            return None;
        }
        left -= found.visited;
        pending.extend(found.refs.into_iter().filter_map(Pointer::parse));
    }
    let mut key = target.key();
    for (pointer, value) in closure {
        key.push('\0');
        key.push_str(&pointer);
        key.push('\0');
        key.push_str(&compact_json(value));
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_escapes_and_percent_encoding() {
        let p = Pointer::parse("#/$defs/a~1b~0c").unwrap();
        assert_eq!(p.tokens, ["$defs", "a/b~c"]);
        assert_eq!(p.key(), "#/$defs/a~1b~0c");
        let q = Pointer::parse("#/%24defs/a%7E1b~0c").unwrap();
        assert_eq!(q, p);
        assert!(Pointer::parse("#").unwrap().is_root());
        assert!(Pointer::parse("other.json#/x").is_none());
        assert!(Pointer::parse("#anchor").is_none());
        assert_eq!(Pointer::parse("#/a%zz").unwrap().tokens, ["a%zz"]);
    }

    #[test]
    fn resolves_objects_and_array_indices() {
        let doc = json!({"$defs": {"a/b": {"type": "string"}}, "items": [{"const": 1}]});
        let p = Pointer::parse("#/$defs/a~1b").unwrap();
        assert_eq!(p.resolve(&doc), Some(&json!({"type": "string"})));
        let q = Pointer::parse("#/items/0/const").unwrap();
        assert_eq!(q.resolve(&doc), Some(&json!(1)));
        assert!(Pointer::parse("#/items/x").unwrap().resolve(&doc).is_none());
        assert!(Pointer::parse("#/nope").unwrap().resolve(&doc).is_none());
    }

    #[test]
    fn name_hints_skip_keywords_and_indices() {
        let hint = |r: &str| Pointer::parse(r).unwrap().name_hint().map(str::to_owned);
        assert_eq!(hint("#/$defs/Node").as_deref(), Some("Node"));
        assert_eq!(
            hint("#/$defs/Node/properties/kids/items").as_deref(),
            Some("kids")
        );
        assert_eq!(hint("#/anyOf/0"), None);
        assert_eq!(hint("#/$defs/0").as_deref(), Some("0"));
        assert_eq!(hint("#/properties/items").as_deref(), Some("items"));
        assert_eq!(hint("#"), None);
    }

    #[test]
    fn counts_every_spelling_of_a_target_together() {
        let doc = json!({
            "properties": {"a": {"$ref": "#/$defs/N"}, "b": {"$ref": "#/%24defs/N"}},
            "$defs": {"N": {"properties": {"up": {"$ref": "#"}}}}
        });
        let counts = count_refs(&doc, 1000);
        assert_eq!(counts.get("#/$defs/N"), Some(&2));
        assert_eq!(counts.get("#"), Some(&1));
    }

    #[test]
    fn source_keys_match_identical_closures_only() {
        let a = json!({"$defs": {"N": {"properties": {"k": {"$ref": "#/$defs/K"}}}, "K": {"type": "string"}}});
        let b = json!({"x": 1, "$defs": {"N": {"properties": {"k": {"$ref": "#/$defs/K"}}}, "K": {"type": "string"}}});
        let c = json!({"$defs": {"N": {"properties": {"k": {"$ref": "#/$defs/K"}}}, "K": {"type": "number"}}});
        let n = Pointer::parse("#/$defs/N").unwrap();
        let ka = source_key(&a, &n, 1000).unwrap();
        assert_eq!(Some(ka.clone()), source_key(&b, &n, 1000));
        assert_ne!(Some(ka), source_key(&c, &n, 1000));
        let recursive = json!({"$defs": {"N": {"items": {"$ref": "#/$defs/N"}}}});
        assert!(source_key(&recursive, &n, 1000).is_some());
        assert!(source_key(&a, &n, 1).is_none());
    }
}
