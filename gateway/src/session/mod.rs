//! One client session, one type: what the gateway knows of a session is kept once, here,
//! and every part of the gateway reads it from the same [`Session`].
//!
//! The session core (`crate::server::core`) opens a session and owns it: it sets what the
//! client says of itself at `initialize` and the log level it asks for. Everything else
//! only reads it: the registry ([`registry`]) holds it, so that a transport finds it and
//! the console lists it; the pipeline sees it behind a shared reference, for its profile,
//! its log and its own per-session state; the relay reaches its client and log level
//! through the session's [`Reach`]; and the record that other replicas read of a
//! streamable HTTP session ([`SessionRecord`]) is written from it ([`Session::record`]).
//! What policies count per session (the reminder's chain, the rate limiter's window) is
//! kept under its id in the shared state (`crate::state`), so replicas count together.

pub mod registry;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use rmcp::model::{ClientConfig, Implementation};
use serde::Serialize;

use crate::approvals::unix_ms;
use crate::config::Mode;
use crate::observe::session_log::SessionLog;
use crate::registry::profile::Profile;
use crate::relay::listeners::Reach;
use crate::state::SessionRecord;

/// How a session reached the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    Stdio,
    StreamableHttp,
    Sse,
    /// The operator console's own session ("try it").
    Console,
    /// A one-shot command (`tools`, `call`, `run`, `sdk`).
    Cli,
}

/// One downstream session (one "agent" in the spec).
pub struct Session {
    /// The transport's session id when it has one (a streamable HTTP session's is the
    /// same on every replica), else one of the gateway's.
    pub id: String,
    pub profile: Arc<Profile>,
    pub log: Option<SessionLog>,
    transport: Transport,
    /// The identity of the credentials that opened it (`None`: none were needed); only
    /// requests of the same identity reach it.
    owner: Option<String>,
    /// What the client said of itself at `initialize` (protocol version, capabilities,
    /// name and version), once it did.
    client: OnceLock<Arc<ClientConfig>>,
    /// The way to its client and the log level it set, as the relay reaches them.
    reach: Arc<Reach>,
    /// What this process keeps for the session, keyed by type (the tools `search_tools`
    /// found for it); unlike [`crate::state`], not seen by other replicas.
    local: Mutex<http::Extensions>,
    /// Unix milliseconds when it began.
    since_ms: u64,
}

impl Session {
    /// A new session of `owner` with `profile`, reached by `transport`.
    pub fn new(
        id: String,
        profile: Arc<Profile>,
        log: Option<SessionLog>,
        transport: Transport,
        owner: Option<String>,
    ) -> Self {
        Self {
            id,
            profile,
            log,
            transport,
            owner,
            client: OnceLock::new(),
            reach: Arc::default(),
            local: Mutex::new(http::Extensions::new()),
            since_ms: unix_ms(SystemTime::now()),
        }
    }

    /// The same session seen under another profile (the one in force now, or with
    /// `run_code` offered): the same id, owner, client and reach, no log, and state of
    /// its own.
    pub fn with_profile(&self, profile: Arc<Profile>) -> Self {
        Self {
            id: self.id.clone(),
            profile,
            log: None,
            transport: self.transport,
            owner: self.owner.clone(),
            client: self.client.clone(),
            reach: self.reach.clone(),
            local: Mutex::new(http::Extensions::new()),
            since_ms: self.since_ms,
        }
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// Who opened it (see `listener_guard::Credentials::identity`).
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// What the client said of itself at `initialize`, once it did.
    pub fn client(&self) -> Option<&Arc<ClientConfig>> {
        self.client.get()
    }

    /// Keeps what the client said of itself at `initialize` (the session core's, once);
    /// false when it had said it already.
    pub fn set_client(&self, client: Arc<ClientConfig>) -> bool {
        self.client.set(client).is_ok()
    }

    /// Names the client of a session the gateway opens for itself (the console's).
    pub fn name_client(&self, name: &str, version: &str) {
        let client = ClientConfig::new(Default::default(), Implementation::new(name, version));
        self.set_client(Arc::new(client));
    }

    /// The way to its client and the log level it set, as the relay reaches them.
    pub fn reach(&self) -> &Arc<Reach> {
        &self.reach
    }

    /// Unix milliseconds when it began.
    pub fn since_ms(&self) -> u64 {
        self.since_ms
    }

    /// What other replicas must know of it to take it over: its owner, what its client
    /// said at `initialize`, the log level it set.
    pub fn record(&self) -> SessionRecord {
        let level = self
            .reach
            .level()
            .and_then(|level| match serde_json::to_value(level) {
                Ok(serde_json::Value::String(level)) => Some(level),
                _ => None,
            });
        SessionRecord {
            owner: self.owner.clone(),
            handshake: self
                .client()
                .and_then(|client| serde_json::to_string(client.as_ref()).ok()),
            log_level: level,
        }
    }

    /// Runs `f` on this process's state of type `T` for the session, creating it with
    /// `Default` first.
    pub fn with_state<T, R>(&self, f: impl FnOnce(&mut T) -> R) -> R
    where
        T: Default + Clone + Send + Sync + 'static,
    {
        let mut local = self.local.lock().unwrap_or_else(|p| p.into_inner());
        f(local.get_or_insert_default::<T>())
    }

    pub fn mode(&self) -> Mode {
        self.profile.mode
    }
}
