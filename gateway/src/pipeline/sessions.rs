//! The sessions open now, for the operator console's Sessions page: how each client
//! connected, who it says it is, its profile, how many calls it made and since when.
//!
//! The directory holds sessions weakly: a session ends when its transport drops it, and
//! the directory forgets it at the next listing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::SystemTime;

use serde::Serialize;

use super::Session;
use crate::approvals::unix_ms;

/// Calls a session has made (kept in the session's own state; the activity observer
/// counts them).
#[derive(Debug, Clone, Copy, Default)]
pub struct CallCount(pub u64);

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

/// One open session as the console shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SessionSummary {
    pub id: String,
    pub transport: Transport,
    pub client_name: Option<String>,
    pub client_version: Option<String>,
    pub profile: String,
    pub calls: u64,
    /// Unix milliseconds when the session began.
    pub since_ms: u64,
}

struct Entry {
    session: Weak<Session>,
    transport: Transport,
    client: Option<(String, String)>,
    since_ms: u64,
}

/// The open sessions. Share it with `Arc`.
#[derive(Default)]
pub struct SessionDirectory {
    entries: Mutex<BTreeMap<String, Entry>>,
}

impl SessionDirectory {
    /// Adds a new session.
    pub fn register(&self, session: &Arc<Session>, transport: Transport) {
        self.lock().insert(
            session.id.clone(),
            Entry {
                session: Arc::downgrade(session),
                transport,
                client: None,
                since_ms: unix_ms(SystemTime::now()),
            },
        );
    }

    /// Records the client's name and version from its `initialize`.
    pub fn set_client(&self, id: &str, name: &str, version: &str) {
        if let Some(entry) = self.lock().get_mut(id) {
            entry.client = Some((name.to_owned(), version.to_owned()));
        }
    }

    /// The sessions still open, oldest first; forgets the ended ones.
    pub fn list(&self) -> Vec<SessionSummary> {
        let mut entries = self.lock();
        entries.retain(|_, entry| entry.session.strong_count() > 0);
        let mut list: Vec<SessionSummary> = entries
            .iter()
            .filter_map(|(id, entry)| {
                let session = entry.session.upgrade()?;
                Some(SessionSummary {
                    id: id.clone(),
                    transport: entry.transport,
                    client_name: entry.client.as_ref().map(|c| c.0.clone()),
                    client_version: entry.client.as_ref().map(|c| c.1.clone()),
                    profile: session.profile.name.clone(),
                    calls: session.with_state(|count: &mut CallCount| count.0),
                    since_ms: entry.since_ms,
                })
            })
            .collect();
        list.sort_by_key(|s| s.since_ms);
        list
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}
