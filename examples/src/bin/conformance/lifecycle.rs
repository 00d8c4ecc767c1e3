//! The two lifecycles this server speaks, and what tells them apart on a request.
//!
//! Up to 2025-11-25 a client opens a session with `initialize` and the session remembers
//! what was negotiated (the version, the client's capabilities, the log level it set with
//! `logging/setLevel`). From 2026-07-28 there is no session: every request carries its
//! protocol version, client capabilities and wanted log level in `_meta`, and rmcp serves
//! each on its own. The suite runs one requirement set per lifecycle; the server serves
//! both at once, as a real server in the transition would.

use rmcp::RoleServer;
use rmcp::model::{LoggingLevel, ProtocolVersion};
use rmcp::service::RequestContext;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// A session opened with `initialize` (2025-11-25 and before).
    Handshake,
    /// Self-contained requests (2026-07-28 and later).
    PerRequest,
}

impl Lifecycle {
    pub fn of(context: &RequestContext<RoleServer>) -> Self {
        // ISO dates compare as strings in time order.
        let per_request = context
            .meta
            .protocol_version()
            .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        if per_request {
            Self::PerRequest
        } else {
            Self::Handshake
        }
    }

    /// The least severe log level the client wants for this request: the session's level
    /// (`session_level`) on a handshake session; on a per-request lifecycle the request's
    /// own `_meta` level, and no logging at all when it names none.
    pub fn log_threshold(
        self,
        context: &RequestContext<RoleServer>,
        session_level: LoggingLevel,
    ) -> Option<LoggingLevel> {
        match self {
            Self::Handshake => Some(session_level),
            Self::PerRequest => context.meta.log_level(),
        }
    }
}
