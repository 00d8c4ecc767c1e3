//! One client session, one type: what the gateway knows of a session, and what runs for
//! it, is kept once, here, and every part of the gateway reaches it through the same
//! [`Session`].
//!
//! The session core (`crate::server::core`) opens a session, serves its requests and
//! ends it: it alone sets what the client says of itself at `initialize` and the log level
//! it asks for, and it alone uses what runs for the session (its calls in flight, the
//! requests sent to its client, its calls [`parked`] for input). Everything else reads the
//! session: the registry ([`registry`]) holds it until it ends, so that a transport finds
//! it and the console lists it; the pipeline sees it behind a shared reference, for its
//! profile, its log and its own per-session state; the relay reaches its client and log
//! level through the session's [`Reach`]; and the record that other replicas read of a
//! streamable HTTP session ([`SessionRecord`]) is written from it ([`Session::record`]).
//! What policies count per session (the reminder's chain, the rate limiter's window) is
//! kept under its id in the shared state (`crate::state`), so replicas count together.
//! What one client may hold at once, its sessions' parked calls among them, is bounded
//! by [`limits`].
//!
//! Everything here handles what clients send, so nothing here may panic on it: no
//! `unwrap`, `expect` or indexing (the lints below deny them; tests may).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod limits;
pub mod parked;
pub mod registry;

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::SystemTime;

use rmcp::model::{ClientConfig, Implementation, RequestId, ServerJsonRpcMessage};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::limits::{Owner, Quotas};
use self::parked::Parked;
use crate::config::Mode;
use crate::config::listen::ClientLimits;
use crate::observe::session_log::SessionLog;
use crate::registry::profile::Profile;
use crate::relay::ClientRequests;
use crate::relay::approvals::unix_ms;
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

/// One downstream session (one "agent" in the spec): the requests of a client that
/// initialized, the stateless requests (2026-07-28) that one client sends on one
/// transport, or a session the console or the command line opens for itself.
pub struct Session {
    /// The transport's session id when it has one (a streamable HTTP session's is the
    /// same on every replica), else one of the gateway's.
    pub id: String,
    pub profile: Arc<Profile>,
    pub log: Option<SessionLog>,
    transport: Transport,
    /// Who the session belongs to (only requests of the same identity reach it), and the
    /// quotas its parked calls and tasks count against.
    owner: Owner,
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
    /// What runs for it, the session core's to use.
    pub(crate) running: Running,
}

/// What runs for a session: the session core's to use.
pub(crate) struct Running {
    /// Messages to the client outside any request's stream.
    pub outbox: mpsc::Sender<ServerJsonRpcMessage>,
    /// The requests sent to the client, whose answers come back to the session.
    pub requests: Arc<ClientRequests>,
    /// The calls in flight that the client may cancel by id, each with its cancellation.
    calls: Mutex<HashMap<RequestId, CancellationToken>>,
    /// Its calls waiting for input their client was asked for (2026-07-28).
    pub parked: Parked,
    /// What the transport keeps with the session.
    attachment: Box<dyn Any + Send + Sync>,
    /// How many of its requests are being served now.
    pub serving: Arc<AtomicUsize>,
    /// Cancelled when the session ends: every call and request of it with it.
    pub closed: CancellationToken,
}

impl Running {
    /// The calls in flight that the client may cancel by id.
    pub fn calls(&self) -> MutexGuard<'_, HashMap<RequestId, CancellationToken>> {
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn attached<T: Any>(&self) -> Option<&T> {
        self.attachment.downcast_ref()
    }
}

/// What a transport says of a session it opens.
pub struct Opening<'a> {
    /// The profile (`None`: the default).
    pub profile: Option<&'a str>,
    pub transport: Transport,
    /// The transport's session id, when it has one.
    pub id: Option<&'a str>,
    /// Where messages to the client outside requests go.
    pub outbox: mpsc::Sender<ServerJsonRpcMessage>,
    pub owner: Owner,
    /// What the transport keeps with the session ([`Session::attached`]).
    pub attachment: Box<dyn Any + Send + Sync>,
}

impl Opening<'_> {
    /// A session the gateway opens for itself (the console's, the command line's): no
    /// credentials, no client to send anything to outside its calls.
    pub fn own(profile: Option<&str>, transport: Transport) -> Opening<'_> {
        let (outbox, _) = mpsc::channel(1);
        Opening {
            profile,
            transport,
            id: None,
            outbox,
            owner: Owner {
                identity: None,
                quotas: Quotas::new(ClientLimits::default()),
            },
            attachment: Box::new(()),
        }
    }
}

impl Session {
    /// A new session as `opening` describes it, with `profile` and `log`, under `id`.
    pub fn new(
        id: String,
        profile: Arc<Profile>,
        log: Option<SessionLog>,
        opening: Opening,
    ) -> Self {
        let closed = CancellationToken::new();
        Self {
            id,
            profile,
            log,
            transport: opening.transport,
            owner: opening.owner,
            client: OnceLock::new(),
            reach: Arc::new(Reach::new(closed.clone())),
            local: Mutex::new(http::Extensions::new()),
            since_ms: unix_ms(SystemTime::now()),
            running: Running {
                outbox: opening.outbox,
                requests: Arc::default(),
                calls: Mutex::default(),
                parked: Parked::default(),
                attachment: opening.attachment,
                serving: Arc::default(),
                closed,
            },
        }
    }

    /// The same session seen under another profile (the one in force now, or with
    /// `run_code` offered), for the pipeline: the same id, owner, client and reach; no
    /// log, state of its own, and nothing running for it.
    pub fn with_profile(&self, profile: Arc<Profile>) -> Self {
        let (outbox, _) = mpsc::channel(1);
        let opening = Opening {
            profile: None,
            transport: self.transport,
            id: None,
            outbox,
            owner: self.owner.clone(),
            attachment: Box::new(()),
        };
        let mut seen = Self::new(self.id.clone(), profile, None, opening);
        seen.client = self.client.clone();
        seen.reach = self.reach.clone();
        seen.since_ms = self.since_ms;
        seen
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// Who opened it (see `listener_guard::Credentials::identity`).
    pub fn owner(&self) -> Option<&str> {
        self.owner.identity.as_deref()
    }

    /// Who it belongs to, with the quotas it counts against.
    pub fn owner_and_quotas(&self) -> &Owner {
        &self.owner
    }

    /// What the transport keeps with the session, when it is a `T`.
    pub fn attached<T: Any>(&self) -> Option<&T> {
        self.running.attached()
    }

    /// Whether a request of the session is being served now.
    pub fn is_serving(&self) -> bool {
        self.running.serving.load(Ordering::Acquire) > 0
    }

    /// Stops what runs for the session: its calls are cancelled, its requests to the
    /// client and its parked calls forgotten, and the relay no longer reaches it.
    pub fn stop(&self) {
        self.running.closed.cancel();
        self.reach.end();
        self.running.requests.end();
        self.running.parked.cancel_all();
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
            owner: self.owner.identity.clone(),
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

impl Drop for Session {
    /// A session the registry no longer holds (another took its id) stops what runs for
    /// it when its last request lets go of it.
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
#[allow(
    deprecated,
    reason = "logging/setLevel is what clients on 2025 protocols use"
)]
mod tests {
    use rmcp::model::{ClientCapabilities, LoggingLevel};
    use tokio::sync::mpsc;

    use super::*;
    use crate::config::Config;
    use crate::registry::profile::Profiles;
    use crate::relay::ClientLink;
    use crate::relay::listeners::Listeners;

    fn session(identity: Option<&str>) -> Session {
        let config = Config::from_toml("").expect("the empty configuration");
        let profile = Profiles::new(&config)
            .get(None)
            .expect("the default profile");
        let mut opening = Opening::own(None, Transport::StreamableHttp);
        opening.owner.identity = identity.map(str::to_owned);
        Session::new("s1".into(), profile, None, opening)
    }

    #[test]
    fn the_shared_record_is_written_from_the_session() {
        let session = session(Some("token:aaaa"));
        assert_eq!(
            session.record(),
            SessionRecord {
                owner: Some("token:aaaa".into()),
                handshake: None,
                log_level: None,
            },
            "nothing said yet"
        );

        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("client", "2"),
        );
        assert!(session.set_client(Arc::new(client.clone())));
        let (messages, _) = mpsc::channel(1);
        let link = ClientLink::new(
            messages,
            session.running.requests.clone(),
            Arc::new(client.clone()),
            session.running.closed.clone(),
        );
        let listeners = Listeners::default();
        listeners.set_level(
            &session.id.as_str().into(),
            session.reach(),
            link,
            LoggingLevel::Warning,
        );

        let record = session.record();
        assert_eq!(record.owner.as_deref(), Some("token:aaaa"));
        assert_eq!(record.log_level.as_deref(), Some("warning"));
        let handshake: ClientConfig =
            serde_json::from_str(&record.handshake.expect("the handshake")).expect("JSON");
        assert_eq!(
            handshake, client,
            "what the client said, as the session keeps it"
        );
    }

    #[test]
    fn a_session_under_another_profile_is_the_same_session_with_nothing_running() {
        let session = session(Some("token:aaaa"));
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("client", "2"),
        );
        session.set_client(Arc::new(client));
        let profile = Arc::new(session.profile.with_mode(Mode::Both));
        let seen = session.with_profile(profile);
        assert_eq!(seen.id, session.id);
        assert_eq!(seen.mode(), Mode::Both);
        assert_eq!(seen.record(), session.record());
        assert!(Arc::ptr_eq(seen.reach(), session.reach()));
        drop(seen);
        assert!(
            !session.running.closed.is_cancelled(),
            "letting go of the view stops nothing of the session"
        );
    }
}
