//! What an upstream sends, sorted before rmcp decodes it, for the kinds whose messages
//! come one at a time on one stream (a stdio child's lines, a legacy SSE server's
//! `message` events): the answer to a call or request of the connection's [`Lane`], and a
//! call's progress, go straight to its caller; a request of a server of 2026-07-28 during
//! the lane's calls goes to the lane to relay, as does the server's cancellation of such a
//! request; everything else is rmcp's.
//!
//! A message that is not JSON-RPC is skipped, as rmcp and the other SDKs do (replying to
//! garbage can start an error storm).

use std::sync::Arc;

use rmcp::model::{JsonRpcMessage, ServerJsonRpcMessage};

use super::asked;
use super::lane::{Lane, Outlet};

/// The sorter of one connection's incoming messages; the connection's lane is closed
/// when it is dropped or told the stream ended.
pub struct ServerMessages<W> {
    lane: Arc<Lane<W>>,
}

impl<W> ServerMessages<W> {
    pub fn new(lane: Arc<Lane<W>>) -> Self {
        Self { lane }
    }

    /// The upstream's output ended (or failed): no call waits for an answer any more.
    pub fn ended(&self) {
        self.lane.close();
    }
}

impl<W: Outlet> ServerMessages<W> {
    /// `message` when it is rmcp's to handle; `None` when the lane took it or it is not
    /// JSON-RPC.
    pub fn sort(&self, message: &[u8]) -> Option<ServerJsonRpcMessage> {
        if self.lane.deliver(message) {
            return None;
        }
        match serde_json::from_slice(message) {
            Ok(JsonRpcMessage::Request(request)) => {
                self.lane.ask_client(request).map(JsonRpcMessage::Request)
            }
            // Not for rmcp, which would take it for the end of a subscription of its own.
            Ok(message) if asked::withdrawn(&message).is_some_and(|id| self.lane.withdraw(id)) => {
                None
            }
            Ok(message) => Some(message),
            Err(error) => {
                tracing::debug!("skipping an upstream message that is not JSON-RPC: {error}");
                None
            }
        }
    }
}

/// The service loop ended (the gateway closed the connection, say) without the output
/// ending first.
impl<W> Drop for ServerMessages<W> {
    fn drop(&mut self) {
        self.lane.close();
    }
}
