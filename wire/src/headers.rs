//! The headers a streamable HTTP request is judged by, before any session sees it: which
//! protocol revision it speaks, the session it names, what answers it accepts, and
//! whether a request without a session carries the context of one (2026-07-28).

use http::{HeaderMap, header};
use rmcp::model::{ClientRequest, ErrorData, GetMeta, ProtocolVersion};

/// `Mcp-Session-Id`.
pub const SESSION_ID: &str = "mcp-session-id";
/// `MCP-Protocol-Version`.
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `Last-Event-ID`.
pub const LAST_EVENT_ID: &str = "last-event-id";

/// Whether a request without a session speaks 2026-07-28: its `MCP-Protocol-Version`
/// header or its `_meta` names that revision or a later one.
pub fn speaks_2026(headers: &HeaderMap, request: &ClientRequest) -> bool {
    let modern = |version: &str| version >= ProtocolVersion::V_2026_07_28.as_str();
    header_version(headers).is_some_and(modern)
        || request
            .get_meta()
            .protocol_version()
            .is_some_and(|version| modern(version.as_str()))
        || matches!(request, ClientRequest::DiscoverRequest(_))
}

/// A stateless request carries its context in `_meta`, and its `MCP-Protocol-Version`
/// header names the version its `_meta` names.
pub fn stateless_context(headers: &HeaderMap, request: &ClientRequest) -> Result<(), ErrorData> {
    let meta = request.get_meta();
    let missing = meta.missing_required_keys(&ProtocolVersion::V_2026_07_28);
    if !missing.is_empty() {
        return Err(ErrorData::invalid_params(
            format!(
                "request _meta is missing or has malformed required fields: {}",
                missing.join(", ")
            ),
            None,
        ));
    }
    match (header_version(headers), meta.protocol_version()) {
        (Some(header), Some(meta)) if header == meta.as_str() => Ok(()),
        (_, None) => Ok(()),
        (header, Some(meta)) => Err(ErrorData::header_mismatch(
            format!(
                "the MCP-Protocol-Version header ({}) does not match the request's _meta ({meta})",
                header.unwrap_or("absent")
            ),
            None,
        )),
    }
}

/// The `MCP-Protocol-Version` header, when it is text.
pub fn header_version(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(PROTOCOL_VERSION)
        .and_then(|value| value.to_str().ok())
}

/// The session a request names (`Mcp-Session-Id`).
pub fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_ID)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
}

/// The event a request resumes after (`Last-Event-ID`).
pub fn last_event_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get(LAST_EVENT_ID)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
}

/// Whether a request's `Accept` header takes `media`.
pub fn accepts(headers: &HeaderMap, media: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|accepted| accepted.split(';').next().unwrap_or("").trim())
        .any(|accepted| accepted.eq_ignore_ascii_case(media) || accepted == "*/*")
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn accept_lists_are_read_with_their_parameters() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream;q=0.5, Application/JSON"),
        );
        assert!(accepts(&headers, "application/json"));
        assert!(!accepts(&headers, "text/html"));
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert!(accepts(&headers, "text/html"));
    }

    #[test]
    fn header_names_match_rmcp_whatever_their_case() {
        let mut headers = HeaderMap::new();
        headers.insert("Mcp-Session-Id", HeaderValue::from_static("s-1"));
        headers.insert(
            "MCP-Protocol-Version",
            HeaderValue::from_static("2025-06-18"),
        );
        assert_eq!(session_id(&headers).as_deref(), Some("s-1"));
        assert_eq!(header_version(&headers), Some("2025-06-18"));
        assert_eq!(last_event_id(&headers), None);
    }
}
