//! The relay: what an upstream sends during a call reaches the client that made the call.
//!
//! The gateway is a client of each upstream and a server to each client. Upstreams send
//! their own traffic back during calls: progress, log messages, and requests
//! (`sampling/createMessage`, `elicitation/create`, `roots/list`, `ping`) that only the
//! calling client can answer. This module relates that traffic to the client call it
//! belongs to and carries it there and back:
//! - [`calls`]: per upstream, the requests in flight and the client [`Caller`] each serves;
//! - [`link`]: the way to the client behind one request, on every transport: what the
//!   gateway sends it rides the request's stream, and the client's answers come back;
//! - [`inputs`]: for a client on protocol 2026-07-28 or later, which takes no requests,
//!   what the call needs from it, asked for in the call's result instead;
//! - [`turns`]: per upstream, the turns taken between sessions by calls of tools that ask
//!   their client, where nothing on the wire tells whose call a request belongs to;
//! - [`requests`]: relaying an upstream's request to its caller, under the gate's
//!   `[gate] sampling` and `elicitation` settings, and the answer back;
//! - [`progress`]: progress a client reports about a relayed request, back to the
//!   upstream that asked;
//! - [`listeners`]: the client sessions the relay can reach (each joins when its
//!   client has initialized; the one registry of sessions is `crate::session::registry`)
//!   through each one's [`listeners::Reach`], the way to its client and its log level,
//!   which decides where an upstream's log message goes and what level upstreams are told;
//! - [`approvals`]: where a question waits for a person in the operator console when the
//!   client cannot be asked (`ask_fallback = "console"`), for the gate's asks as for the
//!   relay's.
//!
//! ```toml
//! [gate]
//! sampling = "allow"      # allow | deny | ask (the client's person approves each request)
//! elicitation = "allow"
//! ```

pub mod approvals;
pub mod calls;
pub mod inputs;
pub mod link;
pub mod listeners;
pub mod progress;
pub mod requests;
pub mod turns;

use std::sync::{Arc, RwLock};

pub use calls::{CallGuard, CallRoutes, Caller};
pub use link::{ClientLink, ClientRequests};
pub use listeners::Listeners;

use crate::auth::per_user::SignIns;
use crate::config::GateSettings;
use crate::relay::approvals::ConsoleAsks;

/// A list an upstream said changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
}

/// What the relays of every upstream share: the client sessions, the gate's settings and
/// the console's questions.
pub struct Downstream {
    pub listeners: Listeners,
    pub relayed_progress: progress::RelayedProgress,
    gate: RwLock<GateSettings>,
    /// Where approvals wait when the client cannot be asked (`ask_fallback = "console"`);
    /// the gateway's tool calls ask there too.
    pub console_asks: Arc<ConsoleAsks>,
    /// The lists upstreams said changed, once the gateway has read them again: a gateway
    /// that stands in for one server passes each on, even when nothing it shows differs.
    pub announced: tokio::sync::broadcast::Sender<(Arc<str>, ListKind)>,
    /// The per-user sign-ins in progress, which ask the calling client to open a URL and
    /// come back on the listener's callback.
    pub sign_ins: Arc<SignIns>,
}

impl Default for Downstream {
    fn default() -> Self {
        Self::new(GateSettings::default())
    }
}

impl Downstream {
    pub fn new(gate: GateSettings) -> Self {
        Self {
            listeners: Listeners::default(),
            relayed_progress: progress::RelayedProgress::default(),
            gate: RwLock::new(gate),
            console_asks: Arc::default(),
            announced: tokio::sync::broadcast::channel(16).0,
            sign_ins: Arc::default(),
        }
    }

    /// The gate's settings in force.
    pub fn gate(&self) -> GateSettings {
        self.gate
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Takes a reloaded configuration's gate settings.
    pub fn set_gate(&self, gate: GateSettings) {
        *self
            .gate
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = gate;
    }
}
