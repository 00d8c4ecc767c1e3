//! A legacy SSE upstream (protocol 2024-11-05): an event stream the gateway reads, and an
//! endpoint it posts to ([`client`]). Every request goes through rmcp's client: the
//! kind has no lane.

mod client;

use super::kind::{ConnectError, Kind, Opened, Opening, header_map};

/// The kind of a server at a `url` with `transport = "sse"`.
pub(super) struct Sse<'a> {
    pub url: &'a str,
    pub headers: &'a std::collections::BTreeMap<String, String>,
}

impl Kind for Sse<'_> {
    async fn open(&self, opening: Opening<'_>) -> Result<Opened, ConnectError> {
        let headers: http::HeaderMap = header_map(self.headers)?.into_iter().collect();
        let transport = client::connect(self.url, headers)
            .await
            .map_err(|e| ConnectError::Transport(e.to_string()))?;
        Ok(Opened {
            service: opening.serve(transport).await?,
            lane: None,
            group: None,
        })
    }
}
