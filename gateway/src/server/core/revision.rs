//! Which protocol revision one request speaks, decided per request, because a client may
//! speak either for a long time and the gateway serves both on every transport.
//!
//! - Up to 2025-11-25 a client opens a session with `initialize`; its requests carry no
//!   context of their own and are served at the version negotiated then
//!   ([`Revision::Session`]).
//! - From 2026-07-28 on there is no session: every request carries its own context in
//!   `_meta` (`io.modelcontextprotocol/protocolVersion`, `clientCapabilities`,
//!   `clientInfo`), and is served on its own ([`Revision::Stateless`]). Methods of the
//!   session lifecycle (`initialize`, `ping`, `logging/setLevel`, `resources/subscribe`)
//!   are gone; `server/discover` and `subscriptions/listen` take their place.
//!
//! A request names its revision by the version in its `_meta`; without one it belongs to
//! the session its client opened, or, before that, to the handshake ([`Revision::Handshake`]).
//! Results are shaped for the revision that asked ([`Revision::shape`]).

use std::sync::Arc;

use rmcp::model::{
    ClientConfig, CustomResult, ErrorCode, Implementation, InitializeRequestParams,
    ProtocolVersion, RequestMetaObject, ServerResult,
};
use rmcp::{ErrorData, model::ClientCapabilities};
use serde_json::Value;

use crate::tool_result;

/// The revision a request speaks.
#[derive(Debug, Clone)]
pub enum Revision {
    /// Before the client's `initialize`: only `initialize`, `ping` and `server/discover`.
    Handshake,
    /// A request of the session the client opened with `initialize`.
    Session(Arc<ClientConfig>),
    /// A request that carries its own context (2026-07-28 and later).
    Stateless(Arc<ClientConfig>),
}

/// Which method a request asks, as far as its revision depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// `initialize`: the handshake, whatever its `_meta` says.
    Initialize,
    /// `server/discover`: only with its own context, whatever the session.
    Discover,
    /// Any other method, known or not.
    Other,
}

/// Every version the gateway speaks, newest last.
pub fn supported() -> &'static [ProtocolVersion] {
    ProtocolVersion::KNOWN_VERSIONS
}

impl Revision {
    /// The revision of a request that asks `asked`, whose `_meta` is `meta`, in a session
    /// whose client initialized as `session` (if it did). An error when the request's
    /// context is unusable: a version the gateway does not speak, or required context
    /// missing.
    pub fn of(
        asked: Asked,
        meta: &RequestMetaObject,
        session: Option<&Arc<ClientConfig>>,
    ) -> Result<Revision, ErrorData> {
        let is_discover = asked == Asked::Discover;
        let Some(version) = meta.protocol_version() else {
            if is_discover {
                return Err(missing_context(meta));
            }
            return Ok(match session {
                Some(client) => Revision::Session(client.clone()),
                None => Revision::Handshake,
            });
        };
        if asked == Asked::Initialize {
            return Ok(Revision::Handshake);
        }
        if !supported().contains(&version) {
            return Err(ErrorData::unsupported_protocol_version(
                version,
                supported(),
            ));
        }
        if version.has_initialize() && !is_discover {
            return Ok(match session {
                Some(client) => Revision::Session(client.clone()),
                None => Revision::Handshake,
            });
        }
        if !meta
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty()
        {
            return Err(missing_context(meta));
        }
        let capabilities = meta.client_capabilities().unwrap_or_default();
        let client_info = meta
            .client_info()
            .unwrap_or_else(|| Implementation::new("unnamed client", ""));
        let mut client = InitializeRequestParams::new(capabilities, client_info);
        client.protocol_version = version;
        Ok(Revision::Stateless(Arc::new(client)))
    }

    /// What the client declared, once it has: at `initialize`, or in this request.
    pub fn client(&self) -> Option<&Arc<ClientConfig>> {
        match self {
            Revision::Handshake => None,
            Revision::Session(client) | Revision::Stateless(client) => Some(client),
        }
    }

    /// Whether the request speaks 2026-07-28 or later.
    pub fn is_stateless(&self) -> bool {
        matches!(self, Revision::Stateless(_))
    }

    /// The client's capabilities as this request knows them.
    pub fn capabilities(&self) -> ClientCapabilities {
        self.client()
            .map(|client| client.capabilities.clone())
            .unwrap_or_default()
    }

    /// `result` as this revision has it: caching hints and `resultType` from 2026-07-28
    /// on, neither (nor non-object structured output) before. A tool result is written
    /// as its JSON ([`tool_result::ToolResult::into_server_result`]), which rmcp's
    /// shaping does not see into: it is shaped as JSON.
    pub fn shape(&self, mut result: ServerResult) -> ServerResult {
        if self.is_stateless() {
            result.fill_missing_cache_hints();
        } else {
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
            strip_cache_hints(&mut result);
            if let ServerResult::CustomResult(CustomResult(Value::Object(result))) = &mut result {
                tool_result::shape_for_legacy_peer(result);
            }
        }
        result
    }

    /// `error` as this revision has it: from 2026-07-28 on, an unknown resource is an
    /// invalid parameter.
    pub fn shape_error(&self, mut error: ErrorData) -> ErrorData {
        if self.is_stateless() && error.code == ErrorCode::RESOURCE_NOT_FOUND {
            error.code = ErrorCode::INVALID_PARAMS;
        }
        error
    }
}

/// Takes `ttlMs` and `cacheScope` off a result for a client before 2026-07-28, which has
/// no such fields (an upstream's result passed on may carry them).
fn strip_cache_hints(result: &mut ServerResult) {
    let (ttl_ms, cache_scope) = match result {
        ServerResult::ListToolsResult(r) => (&mut r.ttl_ms, &mut r.cache_scope),
        ServerResult::ListPromptsResult(r) => (&mut r.ttl_ms, &mut r.cache_scope),
        ServerResult::ListResourcesResult(r) => (&mut r.ttl_ms, &mut r.cache_scope),
        ServerResult::ListResourceTemplatesResult(r) => (&mut r.ttl_ms, &mut r.cache_scope),
        ServerResult::ReadResourceResult(r) => (&mut r.ttl_ms, &mut r.cache_scope),
        _ => return,
    };
    *ttl_ms = None;
    *cache_scope = None;
}

/// The version `initialize` agrees to: the client's, when it has a handshake and the
/// gateway speaks it; else the newest version with a handshake.
pub fn negotiate(requested: &ProtocolVersion) -> ProtocolVersion {
    if requested.has_initialize() && supported().contains(requested) {
        return requested.clone();
    }
    supported()
        .iter()
        .filter(|version| version.has_initialize())
        .max_by(|a, b| a.as_str().cmp(b.as_str()))
        .cloned()
        .unwrap_or(ProtocolVersion::V_2025_11_25)
}

fn missing_context(meta: &RequestMetaObject) -> ErrorData {
    let missing = meta.missing_required_keys(&ProtocolVersion::V_2026_07_28);
    ErrorData::invalid_params(
        format!(
            "request _meta is missing or has malformed required fields: {}",
            missing.join(", ")
        ),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stateless_meta(version: &str) -> RequestMetaObject {
        let mut meta = RequestMetaObject::new();
        meta.set_protocol_version(serde_json::from_value(version.into()).unwrap());
        meta.set_client_capabilities(ClientCapabilities::default());
        meta
    }

    #[test]
    fn a_request_with_its_own_context_is_stateless_whatever_the_session() {
        let meta = stateless_meta("2026-07-28");
        let revision = Revision::of(Asked::Other, &meta, None).unwrap();
        assert!(revision.is_stateless());
    }

    #[test]
    fn a_request_without_context_belongs_to_the_session_or_the_handshake() {
        let meta = RequestMetaObject::new();
        assert!(matches!(
            Revision::of(Asked::Other, &meta, None),
            Ok(Revision::Handshake)
        ));
        let client = Arc::new(ClientConfig::default());
        assert!(matches!(
            Revision::of(Asked::Other, &meta, Some(&client)),
            Ok(Revision::Session(_))
        ));
    }

    #[test]
    fn an_unknown_version_or_missing_context_is_refused() {
        let unknown = stateless_meta("2099-01-01");
        let error = Revision::of(Asked::Other, &unknown, None).unwrap_err();
        assert_eq!(error.code, ErrorCode::UNSUPPORTED_PROTOCOL_VERSION);
        let mut partial = RequestMetaObject::new();
        partial.set_protocol_version(ProtocolVersion::V_2026_07_28);
        let error = Revision::of(Asked::Other, &partial, None).unwrap_err();
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn initialize_agrees_to_a_version_with_a_handshake() {
        assert_eq!(
            negotiate(&ProtocolVersion::V_2025_11_25),
            ProtocolVersion::V_2025_11_25
        );
        assert_eq!(
            negotiate(&ProtocolVersion::V_2026_07_28),
            ProtocolVersion::V_2025_11_25
        );
    }
}
