//! What one client may hold at once (`[listen.limits]`), because nothing one client sends
//! may exhaust the gateway: calls parked while their client is asked for input, open event
//! streams, and the requests of legacy SSE sessions.
//!
//! Limits per session are counted by the session itself; limits per identity (the
//! credentials' token or subject; clients without credentials share one) are counted
//! here, in [`Quotas`], which every transport of one listener shares. A [`Permit`] holds
//! one unit of an identity's quota until it is dropped. Each refusal is a [`LimitError`]
//! with a stable code (docs/error-codes.md).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::ErrorData;
use rmcp::model::ErrorCode;

use crate::config::listen::ClientLimits;

/// The JSON-RPC error code of every refusal by a limit; `data.code` names the limit.
pub const LIMIT_ERROR: ErrorCode = ErrorCode(-32029);

/// What an identity holds, counted against its quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Holding {
    /// A call parked while its client is asked for input.
    Parked,
    /// An open event stream.
    Stream,
    /// A legacy SSE request running (its `POST` was answered; its answer comes on the
    /// stream).
    Request,
    /// A task of the gateway's own running (2026-07-28).
    Task,
}

/// Why a client was refused: a limit it reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error(
        "this session has {limit} calls waiting for input already ([listen.limits] max_parked_per_session); answer or abandon them first"
    )]
    ParkedPerSession { limit: usize },
    #[error(
        "these credentials have {limit} calls waiting for input already ([listen.limits] max_parked_per_identity); answer or abandon them first"
    )]
    ParkedPerIdentity { limit: usize },
    #[error(
        "the call waited too long for its input ({why}) and was cancelled; send the request again without requestState"
    )]
    InputExpired { why: &'static str },
    #[error("a batch of {length} messages; at most {limit} per POST ([listen.limits] max_batch)")]
    BatchTooLong { length: usize, limit: usize },
    #[error(
        "this SSE session has {limit} requests running ([listen.limits] max_in_flight_per_session); wait for their answers"
    )]
    InFlight { limit: usize },
    #[error(
        "these credentials have {limit} SSE requests running already ([listen.limits] max_in_flight_per_identity); wait for their answers"
    )]
    InFlightPerIdentity { limit: usize },
    #[error(
        "these credentials hold {limit} open streams already ([listen.limits] max_streams_per_identity); close one first"
    )]
    Streams { limit: usize },
    #[error(
        "these credentials have {limit} tasks running already ([listen.limits] max_tasks_per_identity)"
    )]
    Tasks { limit: usize },
    #[error(
        "these credentials' running tasks fill what the gateway keeps of their tasks ([tasks] max_kept_per_identity = {max_tasks}, max_kept_bytes_per_identity = {max_bytes}); wait for one to settle"
    )]
    TasksKept { max_tasks: usize, max_bytes: usize },
    #[error(
        "events of this stream after Last-Event-ID were dropped to keep the stored events within bounds ([cluster] max_event_bytes, max_events_per_stream); what they held cannot be replayed"
    )]
    EventsDropped,
    #[error(
        "at most {limit} resources of `{server}` can be subscribed to at once, across every client; unsubscribe from one first"
    )]
    ResourceListens { server: String, limit: usize },
}

impl LimitError {
    /// A stable code, for clients, logs and docs/error-codes.md.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ParkedPerSession { .. } => "PARKED_SESSION_LIMIT",
            Self::ParkedPerIdentity { .. } => "PARKED_IDENTITY_LIMIT",
            Self::InputExpired { .. } => "INPUT_EXPIRED",
            Self::BatchTooLong { .. } => "SSE_BATCH_TOO_LONG",
            Self::InFlight { .. } => "SSE_IN_FLIGHT_LIMIT",
            Self::InFlightPerIdentity { .. } => "SSE_IDENTITY_IN_FLIGHT_LIMIT",
            Self::Streams { .. } => "STREAM_LIMIT",
            Self::Tasks { .. } => "TASK_LIMIT",
            Self::TasksKept { .. } => "TASKS_KEPT_LIMIT",
            Self::EventsDropped => "EVENTS_DROPPED",
            Self::ResourceListens { .. } => "RESOURCE_LISTEN_LIMIT",
        }
    }

    /// The refusal as a JSON-RPC error: [`LIMIT_ERROR`], the message led by the code, and
    /// the code in `data.code`.
    pub fn to_error(&self) -> ErrorData {
        ErrorData::new(
            LIMIT_ERROR,
            self.text(),
            Some(serde_json::json!({ "code": self.code() })),
        )
    }

    /// The refusal as text: `CODE: why`.
    pub fn text(&self) -> String {
        format!("{}: {self}", self.code())
    }
}

/// The quotas of every identity on one listener.
pub struct Quotas {
    limits: ClientLimits,
    held: Mutex<HashMap<(Holding, Option<String>), usize>>,
}

impl Quotas {
    pub fn new(limits: ClientLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            held: Mutex::default(),
        })
    }

    /// The limits these quotas enforce.
    pub fn limits(&self) -> &ClientLimits {
        &self.limits
    }

    /// One more `what` for `identity`, held until the permit is dropped; refused when the
    /// identity holds its quota already.
    pub fn acquire(
        self: &Arc<Self>,
        what: Holding,
        identity: Option<&str>,
    ) -> Result<Permit, LimitError> {
        let limit = match what {
            Holding::Parked => self.limits.max_parked_per_identity.get(),
            Holding::Stream => self.limits.max_streams_per_identity.get(),
            Holding::Request => self.limits.max_in_flight_per_identity.get(),
            Holding::Task => self.limits.max_tasks_per_identity.get(),
        };
        let key = (what, identity.map(str::to_owned));
        let mut held = self.lock();
        let count = held.entry(key.clone()).or_default();
        if *count >= limit {
            return Err(match what {
                Holding::Parked => LimitError::ParkedPerIdentity { limit },
                Holding::Stream => LimitError::Streams { limit },
                Holding::Request => LimitError::InFlightPerIdentity { limit },
                Holding::Task => LimitError::Tasks { limit },
            });
        }
        *count += 1;
        Ok(Permit {
            quotas: self.clone(),
            key,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(Holding, Option<String>), usize>> {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One unit of an identity's quota, given back when dropped.
pub struct Permit {
    quotas: Arc<Quotas>,
    key: (Holding, Option<String>),
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut held = self.quotas.lock();
        if let Some(count) = held.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

/// Who a session belongs to, and the quotas its identity is counted against.
#[derive(Clone)]
pub struct Owner {
    /// The credentials' identity (`None`: no credentials).
    pub identity: Option<String>,
    pub quotas: Arc<Quotas>,
}

impl Owner {
    /// One more `what` for this owner.
    pub fn acquire(&self, what: Holding) -> Result<Permit, LimitError> {
        self.quotas.acquire(what, self.identity.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use super::*;

    #[test]
    fn an_identity_holds_its_quota_and_no_more_until_a_permit_is_dropped() {
        let quotas = Quotas::new(ClientLimits {
            max_streams_per_identity: NonZeroUsize::new(2).unwrap(),
            ..ClientLimits::default()
        });
        let first = quotas.acquire(Holding::Stream, Some("a")).unwrap();
        let _second = quotas.acquire(Holding::Stream, Some("a")).unwrap();
        let refused = quotas.acquire(Holding::Stream, Some("a")).err().unwrap();
        assert_eq!(refused.code(), "STREAM_LIMIT");
        assert!(
            quotas.acquire(Holding::Stream, Some("b")).is_ok(),
            "another identity"
        );
        assert!(
            quotas.acquire(Holding::Parked, Some("a")).is_ok(),
            "another kind"
        );
        drop(first);
        assert!(quotas.acquire(Holding::Stream, Some("a")).is_ok());
    }
}
