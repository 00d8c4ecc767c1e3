//! Gateway resource URIs: `mcp-gateway://<server>/<percent-encoded original URI>`.
//!
//! Every upstream resource is re-exported under a URI that names its server, so a read
//! can be routed back, while the original stays readable to a person and recoverable
//! exactly. Template variables (`{name}`) are left intact so a client can still expand
//! a federated template; the values it fills in are decoded back on read.
//!
//! A server with `rewrite_uris = false` keeps its own URIs: [`expose`] leaves them as they
//! are, and a read finds its owner by exact URI or by [`matches_template`].

use std::collections::HashSet;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde_json::Value;

use crate::tool_result::Block;

pub const SCHEME: &str = "mcp-gateway://";

/// Everything but RFC 3986 unreserved characters is encoded.
const ENCODED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The gateway URI of `original` on `server`.
pub fn to_gateway(server: &str, original: &str) -> String {
    format!(
        "{SCHEME}{server}/{}",
        utf8_percent_encode(original, ENCODED)
    )
}

/// The gateway form of a URI template: literal parts encoded, `{…}` expressions kept.
pub fn template_to_gateway(server: &str, template: &str) -> String {
    let mut out = format!("{SCHEME}{server}/");
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|i| open + i) else {
            break;
        };
        out.extend(utf8_percent_encode(&rest[..open], ENCODED));
        out.push_str(&rest[open..=close]);
        rest = &rest[close + 1..];
    }
    out.extend(utf8_percent_encode(rest, ENCODED));
    out
}

/// The URI clients see for `original` on `server`: the gateway form when `rewrite` is on,
/// else `original` itself.
pub fn expose(server: &str, rewrite: bool, original: &str) -> String {
    if rewrite {
        to_gateway(server, original)
    } else {
        original.to_owned()
    }
}

/// Whether `uri` is an expansion of the RFC 6570 `template`: literal parts must match
/// exactly; a simple `{var}` stands for one or more characters other than `/`, `?` and
/// `#`, a reserved `{+var}` or fragment `{#var}` for any characters, and the other
/// operators (`{/var}`, `{?var}`, …) for anything up to the next literal. URIs longer
/// than [`MAX_TEMPLATED_URI`] match no template (the match is quadratic in the length).
pub fn matches_template(template: &str, uri: &str) -> bool {
    if uri.len() > MAX_TEMPLATED_URI {
        return false;
    }
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|i| open + i) else {
            break;
        };
        parts.push(Part::Literal(&rest[..open]));
        let expression = &rest[open + 1..close];
        parts.push(match expression.chars().next() {
            Some('+' | '#' | '/' | '?' | '&' | ';' | '.') => Part::Any,
            _ => Part::Segment,
        });
        rest = &rest[close + 1..];
    }
    parts.push(Part::Literal(rest));
    Matcher {
        parts: &parts,
        uri,
        failed: HashSet::new(),
    }
    .matches(0, 0)
}

/// The longest URI matched against templates.
pub const MAX_TEMPLATED_URI: usize = 2048;

#[derive(Clone, Copy)]
enum Part<'a> {
    Literal(&'a str),
    /// A simple variable: at least one character, none of `/?#`.
    Segment,
    /// A variable that may hold any characters, or none.
    Any,
}

/// Matches template parts against a URI, remembering (part, position) pairs that failed
/// so no pair is tried twice.
struct Matcher<'a> {
    parts: &'a [Part<'a>],
    uri: &'a str,
    failed: HashSet<(usize, usize)>,
}

impl Matcher<'_> {
    fn matches(&mut self, part: usize, at: usize) -> bool {
        if self.failed.contains(&(part, at)) {
            return false;
        }
        let rest = &self.uri[at..];
        let matched = match self.parts.get(part) {
            None => rest.is_empty(),
            Some(Part::Literal(literal)) => {
                rest.starts_with(literal) && self.matches(part + 1, at + literal.len())
            }
            Some(Part::Segment) => {
                let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
                (1..=end)
                    .filter(|&taken| rest.is_char_boundary(taken))
                    .any(|taken| self.matches(part + 1, at + taken))
            }
            Some(Part::Any) => (0..=rest.len())
                .filter(|&taken| rest.is_char_boundary(taken))
                .any(|taken| self.matches(part + 1, at + taken)),
        };
        if !matched {
            self.failed.insert((part, at));
        }
        matched
    }
}

/// Splits a gateway URI into `(server, original URI)`; `None` if it is not one.
pub fn from_gateway(uri: &str) -> Option<(&str, String)> {
    let rest = uri.strip_prefix(SCHEME)?;
    let (server, encoded) = rest.split_once('/')?;
    let original = percent_decode_str(encoded).decode_utf8().ok()?.into_owned();
    (!server.is_empty()).then_some((server, original))
}

/// Rewrites the URIs of the contents of a resource read from `server` to their gateway
/// form; nothing else of them changes.
pub fn rewrite_contents(server: &str, contents: &mut [Value]) {
    for content in contents {
        if let Some(Value::String(uri)) = content.get_mut("uri") {
            *uri = to_gateway(server, uri);
        }
    }
}

/// Rewrites resource links and embedded resources in a tool result from `server`, so a
/// client can read what the tool pointed at through the gateway. Nothing else of a block
/// changes.
pub fn rewrite_links(server: &str, content: &mut [Block]) {
    for block in content {
        let uri = match block.kind() {
            "resource_link" => block.get_mut("uri"),
            "resource" => block
                .get_mut("resource")
                .and_then(|resource| resource.get_mut("uri")),
            _ => None,
        };
        if let Some(Value::String(uri)) = uri {
            *uri = to_gateway(server, uri);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip() {
        let uri = to_gateway(
            "everything",
            "demo://resource/static/document/architecture.md",
        );
        assert_eq!(
            uri,
            "mcp-gateway://everything/demo%3A%2F%2Fresource%2Fstatic%2Fdocument%2Farchitecture.md"
        );
        assert_eq!(
            from_gateway(&uri),
            Some((
                "everything",
                "demo://resource/static/document/architecture.md".into()
            ))
        );
        assert_eq!(from_gateway("file:///x"), None);
    }

    #[test]
    fn templates_match_their_expansions() {
        let template = "test://template/{id}/data";
        assert!(matches_template(template, "test://template/123/data"));
        assert!(!matches_template(template, "test://template//data"));
        assert!(!matches_template(template, "test://template/1/2/data"));
        assert!(!matches_template(template, "test://template/123/other"));
        assert!(matches_template("file://{+path}", "file:///etc/hosts"));
        assert!(matches_template("demo://x{?q,page}", "demo://x?q=1&page=2"));
        assert!(matches_template("plain://static", "plain://static"));
        assert!(!matches_template("plain://static", "plain://static/more"));
        assert!(matches_template("ü://{id}", "ü://ä"));
    }

    #[test]
    fn templates_keep_their_variables() {
        let template = template_to_gateway("e", "demo://resource/dynamic/text/{resourceId}");
        assert_eq!(
            template,
            "mcp-gateway://e/demo%3A%2F%2Fresource%2Fdynamic%2Ftext%2F{resourceId}"
        );
        let expanded = template.replace("{resourceId}", "42");
        assert_eq!(
            from_gateway(&expanded),
            Some(("e", "demo://resource/dynamic/text/42".into()))
        );
    }
}
