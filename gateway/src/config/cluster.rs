//! `[cluster]`: where the state every replica must see alike lives (`crate::state`), and
//! for how long it is kept.
//!
//! ```toml
//! [cluster]
//! redis_url = "redis://127.0.0.1:6379/0"   # or rediss:// (TLS); ${VAR} is expanded
//! session_ttl_secs = 3600     # an unused session ends after this long, everywhere
//! event_ttl_secs = 300        # how long a stream's events stay replayable
//! max_events_per_stream = 1000
//! max_event_bytes = 33554432 # all streams' events together (per replica, in Redis)
//! key_prefix = "mcp-gateway"  # keys are <prefix>:<kind>:<id>
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[cluster]`: where shared state lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// `redis://` or `rediss://` URL of the Redis every replica shares; `${VAR}` is
    /// expanded. Default: none (state stays in this process).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_url: Option<String>,
    /// How long a session may go unused before it ends on every replica. Default 3600.
    pub session_ttl_secs: u64,
    /// How long the events of a stream stay replayable with `Last-Event-ID`. Default 300.
    pub event_ttl_secs: u64,
    /// The most events kept per stream (older ones are dropped first). Default 1000.
    pub max_events_per_stream: usize,
    /// The most bytes the events of every stream together may take (in Redis: those this
    /// replica wrote); the oldest are dropped first, whatever their stream, and a resume
    /// from before a dropped event is told so. Default 32 MiB.
    pub max_event_bytes: usize,
    /// Prefix of every Redis key, so several gateways can share one Redis. Default
    /// `mcp-gateway`.
    pub key_prefix: String,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            redis_url: None,
            session_ttl_secs: 3600,
            event_ttl_secs: 300,
            max_events_per_stream: 1000,
            max_event_bytes: 32 * 1024 * 1024,
            key_prefix: "mcp-gateway".into(),
        }
    }
}

impl ClusterConfig {
    /// How long an unused session lives, at least a second.
    pub fn session_ttl(&self) -> Duration {
        Duration::from_secs(self.session_ttl_secs.max(1))
    }

    /// How long a stream's events stay replayable, at least a second.
    pub fn event_ttl(&self) -> Duration {
        Duration::from_secs(self.event_ttl_secs.max(1))
    }
}
