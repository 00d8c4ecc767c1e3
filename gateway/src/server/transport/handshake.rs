//! A transport filter for the handshake, because rmcp's `serve_server` ends a session on the
//! first message before `initialize` that is not a request: a stray
//! `notifications/cancelled`, an early `notifications/initialized` or an answer to nothing
//! would close a stdio gateway or a legacy SSE session before it started.
//!
//! [`Handshake`] wraps the stdio and legacy SSE transports. Until the lifecycle has begun it
//! drops notifications, responses and errors (with a debug log line) and hands every request
//! to rmcp, which answers `ping` and `server/discover`, refuses other requests with an error
//! and lives on, and begins the lifecycle at `initialize` or at the first request carrying the
//! 2026-07-28 per-request metadata. From then on every message passes untouched. Streamable
//! HTTP needs no filter: rmcp's session manager opens a session only for an `initialize`,
//! so the session's service never sees anything before it.

use std::borrow::Cow;

use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetMeta, ProtocolVersion, ServerJsonRpcMessage,
};
use rmcp::transport::Transport;

/// A server transport that holds back what must not reach rmcp before the handshake.
pub struct Handshake<T> {
    inner: T,
    /// Versions the service accepts in a request's `_meta`, to recognise a request that
    /// begins the lifecycle without `initialize` the way rmcp does.
    supported: Cow<'static, [ProtocolVersion]>,
    started: bool,
}

impl<T> Handshake<T> {
    pub fn new(inner: T, supported: Cow<'static, [ProtocolVersion]>) -> Self {
        Self {
            inner,
            supported,
            started: false,
        }
    }

    /// Whether `request` begins the lifecycle, by rmcp's rule: `initialize`, or a request
    /// other than `ping` and `server/discover` whose `_meta` names a supported version and
    /// carries everything that version requires.
    fn begins_lifecycle(&self, request: &ClientRequest) -> bool {
        match request {
            ClientRequest::InitializeRequest(_) => true,
            ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_) => false,
            request => {
                let meta = request.get_meta();
                meta.missing_required_keys(&ProtocolVersion::V_2026_07_28)
                    .is_empty()
                    && meta
                        .protocol_version()
                        .is_some_and(|version| self.supported.contains(&version))
            }
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Handshake<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let message = self.inner.receive().await?;
            if self.started {
                return Some(message);
            }
            match message {
                ClientJsonRpcMessage::Request(request) => {
                    self.started = self.begins_lifecycle(&request.request);
                    return Some(ClientJsonRpcMessage::Request(request));
                }
                other => tracing::debug!(
                    message = %serde_json::to_string(&other).unwrap_or_default(),
                    "dropped a message sent before initialize"
                ),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    /// Hands out the given messages, then ends; remembers what was sent.
    struct Script {
        incoming: std::vec::IntoIter<ClientJsonRpcMessage>,
        sent: Arc<Mutex<Vec<ServerJsonRpcMessage>>>,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("never")]
    struct Never(Infallible);

    impl Transport<RoleServer> for Script {
        type Error = Never;

        fn send(
            &mut self,
            item: ServerJsonRpcMessage,
        ) -> impl Future<Output = Result<(), Never>> + Send + 'static {
            self.sent.lock().unwrap().push(item);
            std::future::ready(Ok(()))
        }

        async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
            self.incoming.next()
        }

        async fn close(&mut self) -> Result<(), Never> {
            Ok(())
        }
    }

    fn message(value: serde_json::Value) -> ClientJsonRpcMessage {
        serde_json::from_value(value).unwrap()
    }

    /// The methods (or `response`) that come out of the filter for `script`.
    async fn passed(script: Vec<serde_json::Value>) -> Vec<String> {
        let mut transport = Handshake::new(
            Script {
                incoming: script
                    .into_iter()
                    .map(message)
                    .collect::<Vec<_>>()
                    .into_iter(),
                sent: Arc::default(),
            },
            Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
        );
        let mut out = Vec::new();
        while let Some(message) = transport.receive().await {
            let value = serde_json::to_value(&message).unwrap();
            out.push(value["method"].as_str().unwrap_or("response").to_owned());
        }
        out
    }

    fn initialize() -> serde_json::Value {
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}})
    }

    fn cancelled() -> serde_json::Value {
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": 1}})
    }

    #[tokio::test]
    async fn before_initialize_only_requests_pass() {
        let script = vec![
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            serde_json::json!({"jsonrpc": "2.0", "id": 7, "result": {}}),
            serde_json::json!({"jsonrpc": "2.0", "id": 8, "error": {"code": 1, "message": "x"}}),
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            cancelled(),
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            cancelled(),
            initialize(),
            cancelled(),
            serde_json::json!({"jsonrpc": "2.0", "id": 9, "result": {}}),
        ];
        assert_eq!(
            passed(script).await,
            [
                "ping",
                "tools/list",
                "initialize",
                "notifications/cancelled",
                "response"
            ]
        );
    }

    #[tokio::test]
    async fn a_request_with_per_request_metadata_begins_the_lifecycle() {
        let meta = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let unsupported = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2099-01-01",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let script = vec![
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                               "params": {"_meta": unsupported}}),
            cancelled(),
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                               "params": {"_meta": meta}}),
            cancelled(),
        ];
        assert_eq!(
            passed(script).await,
            ["tools/list", "tools/list", "notifications/cancelled"]
        );
    }
}
