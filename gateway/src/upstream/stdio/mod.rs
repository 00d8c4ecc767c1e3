//! A stdio upstream: a child process the gateway starts, confines and keeps, spoken to
//! over its pipes ([`child`], [`lines`]), with the connection's tool calls written on the
//! [`Lane`](super::lane::Lane) beside rmcp's client.

pub(super) mod child;
mod lines;

pub use child::Violation;

use super::call_lane::CallLane;
use super::kind::{ConnectError, Kind, Opened, Opening};
use crate::config::Endpoint;

/// The kind of a `command` server.
pub(super) struct Stdio<'a> {
    pub endpoint: &'a Endpoint,
    pub command: &'a str,
}

impl Kind for Stdio<'_> {
    async fn open(&self, opening: Opening<'_>) -> Result<Opened, ConnectError> {
        let confine = child::Confine {
            rules: opening.config.sandbox.rules(),
            context: &opening.config.sandbox_context,
            status: opening.sandbox,
        };
        let (transport, lane, group) = child::spawn(
            opening.name,
            self.endpoint,
            confine,
            child::MAX_UPSTREAM_MESSAGE,
            opening.violation.clone(),
        )
        .map_err(|source| ConnectError::Spawn {
            command: self.command.to_owned(),
            source,
        })?;
        Ok(Opened {
            service: opening.serve(transport).await?,
            lane: CallLane::Stdio(lane),
            group: Some(group),
        })
    }
}
