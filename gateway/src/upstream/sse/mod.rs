//! A legacy SSE upstream (protocol 2024-11-05): an event stream the gateway reads, and an
//! endpoint it posts to ([`client`]). rmcp's client opens the session (`initialize`) and
//! answers what the server asks of its client; the connection's calls and requests (tool
//! calls, the lists the gateway reads, a client's `prompts/get` ...) take the
//! [`Lane`](super::lane::Lane), posted in order with rmcp's messages, and get their
//! answers as the server wrote them.

mod client;

pub use client::Posts;

use super::call_lane::CallLane;
use super::kind::{ConnectError, Kind, Opened, Opening, header_map};

/// The kind of a server at a `url` with `transport = "sse"`.
pub(super) struct Sse<'a> {
    pub url: &'a str,
    pub headers: &'a std::collections::BTreeMap<String, String>,
}

impl Kind for Sse<'_> {
    async fn open(&self, opening: Opening<'_>) -> Result<Opened, ConnectError> {
        let headers: http::HeaderMap = header_map(self.headers)?.into_iter().collect();
        let (transport, lane) = client::connect(self.url, headers)
            .await
            .map_err(|e| ConnectError::Transport(e.to_string()))?;
        Ok(Opened {
            service: opening.serve(transport).await?,
            lane: CallLane::Sse(lane),
            group: None,
        })
    }
}
