//! Gateway resource URIs: `mcp-gateway://<server>/<percent-encoded original URI>`.
//!
//! Every upstream resource is re-exported under a URI that names its server, so a read
//! can be routed back, while the original stays readable to a person and recoverable
//! exactly. Template variables (`{name}`) are left intact so a client can still expand
//! a federated template; the values it fills in are decoded back on read.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use rmcp::model::{ContentBlock, ResourceContents};

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

/// Splits a gateway URI into `(server, original URI)`; `None` if it is not one.
pub fn from_gateway(uri: &str) -> Option<(&str, String)> {
    let rest = uri.strip_prefix(SCHEME)?;
    let (server, encoded) = rest.split_once('/')?;
    let original = percent_decode_str(encoded).decode_utf8().ok()?.into_owned();
    (!server.is_empty()).then_some((server, original))
}

/// Rewrites the URI of resource contents from `server` to its gateway form.
pub fn rewrite_contents(server: &str, contents: &mut ResourceContents) {
    match contents {
        ResourceContents::TextResourceContents { uri, .. }
        | ResourceContents::BlobResourceContents { uri, .. } => *uri = to_gateway(server, uri),
        _ => {}
    }
}

/// Rewrites resource links and embedded resources in a tool result from `server`, so a
/// client can read what the tool pointed at through the gateway.
pub fn rewrite_links(server: &str, content: &mut [ContentBlock]) {
    for block in content {
        match block {
            ContentBlock::ResourceLink(link) => link.uri = to_gateway(server, &link.uri),
            ContentBlock::Resource(embedded) => rewrite_contents(server, &mut embedded.resource),
            _ => {}
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
