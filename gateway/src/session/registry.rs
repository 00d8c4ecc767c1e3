//! The one registry of the sessions this process serves: the client sessions of the
//! session core (stdio, legacy SSE, streamable HTTP, and those serving stateless 2026-07-28
//! requests), the console's own sessions and the command line's.
//!
//! The session core enters and ends its sessions here; transports find a session here,
//! through the one owner check ([`Sessions::find`]); the console lists them from here.
//! A client session of the core is held until it ends; a console or command-line session
//! is held weakly and forgotten once its holder lets go. A streamable HTTP session whose
//! client left without ending it ends once no request found it for `[cluster]
//! session_ttl_secs` ([`Sessions::end_idle`]), as its shared record does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{Session, Transport};

/// Calls a session has made (kept in the session's own state; the activity observer
/// counts them).
#[derive(Debug, Clone, Copy, Default)]
pub struct CallCount(pub u64);

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

/// Why a session id finds no session for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionRefusal {
    /// No session of that id is open here.
    Unknown,
    /// The session belongs to other credentials.
    NotYours,
}

/// Whose stateless requests (2026-07-28) a session serves: the client's identity and
/// the profile.
pub type StatelessKey = (Option<String>, Option<String>);

/// How the registry holds a session.
enum Held {
    /// A session of the core: held until it ends.
    UntilEnded(Arc<Session>),
    /// The console's or the command line's: listed while its holder keeps it.
    WhileUsed(Weak<Session>),
}

struct Entry {
    held: Held,
    /// When a request last found it.
    last_used: Instant,
}

impl Entry {
    /// The session, when the core holds it until it ends.
    fn until_ended(&self) -> Option<&Arc<Session>> {
        match &self.held {
            Held::UntilEnded(session) => Some(session),
            Held::WhileUsed(_) => None,
        }
    }

    /// The session, while it lives.
    fn session(&self) -> Option<Arc<Session>> {
        match &self.held {
            Held::UntilEnded(session) => Some(session.clone()),
            Held::WhileUsed(session) => session.upgrade(),
        }
    }
}

/// The sessions of this process (one registry, the gateway's).
#[derive(Default)]
pub struct Sessions {
    entries: Mutex<HashMap<Arc<str>, Entry>>,
    /// The sessions serving stateless requests, by identity and profile.
    stateless: Mutex<HashMap<StatelessKey, Arc<Session>>>,
}

impl Sessions {
    /// Enters a session of the core, held until it ends (in place of any that had its id).
    pub fn enter(&self, session: &Arc<Session>) {
        self.insert(session, Held::UntilEnded(session.clone()));
    }

    /// Lists a session the gateway opened for itself (the console's, the command
    /// line's) while `session` lives.
    pub fn list_while_used(&self, session: &Arc<Session>) {
        self.insert(session, Held::WhileUsed(Arc::downgrade(session)));
    }

    fn insert(&self, session: &Session, held: Held) {
        let entry = Entry {
            held,
            last_used: Instant::now(),
        };
        self.lock().insert(session.id.as_str().into(), entry);
    }

    /// The session of the core `id` names, for a request of `identity`.
    pub fn find(&self, id: &str, identity: Option<&str>) -> Result<Arc<Session>, SessionRefusal> {
        let mut entries = self.lock();
        let entry = entries.get_mut(id).ok_or(SessionRefusal::Unknown)?;
        let session = entry.until_ended().ok_or(SessionRefusal::Unknown)?.clone();
        check_owner(session.owner(), identity)?;
        entry.last_used = Instant::now();
        Ok(session)
    }

    /// The session serving the stateless requests of `key`, opened with `open` when
    /// there is none; `None` when `open` cannot. One serves each identity and profile, so
    /// a gateway whose clients sign in with an identity provider would otherwise keep one
    /// for every user it ever saw: past `bound` of them, those serving no request are
    /// ended first (those whose only work is calls parked for input too, which are
    /// cancelled: their clients are told `requestState` names nothing). A session serving
    /// a request (a call, a `subscriptions/listen` stream) stays; an ended one is opened
    /// again, under the same id, by its client's next request.
    pub fn stateless(
        &self,
        key: StatelessKey,
        bound: usize,
        open: impl FnOnce() -> Option<Arc<Session>>,
    ) -> Option<Arc<Session>> {
        let mut stateless = self.stateless_lock();
        if let Some(session) = stateless.get(&key) {
            if let Some(entry) = self.lock().get_mut(session.id.as_str()) {
                entry.last_used = Instant::now();
            }
            return Some(session.clone());
        }
        let mut idle = Vec::new();
        if stateless.len() >= bound {
            stateless.retain(|_, session| {
                let serving = session.is_serving();
                if !serving {
                    idle.push(session.clone());
                }
                serving
            });
        }
        let session = open();
        if let Some(session) = &session {
            stateless.insert(key, session.clone());
        }
        drop(stateless);
        for session in idle {
            self.end_session(&session);
        }
        session
    }

    /// Ends session `id`, whoever opened it (its owner ended it, or it ended on another
    /// replica).
    pub fn end(&self, id: &str) {
        let session = self
            .lock()
            .get(id)
            .and_then(|entry| entry.until_ended().cloned());
        if let Some(session) = session {
            self.end_session(&session);
        }
    }

    /// Ends the sessions of `transport` that no request found for `idle` and that serve
    /// none now: their clients left without ending them. Returns how many ended.
    pub fn end_idle(&self, transport: Transport, idle: Duration) -> usize {
        let Some(before) = Instant::now().checked_sub(idle) else {
            return 0;
        };
        let idle: Vec<Arc<Session>> = self
            .lock()
            .values()
            .filter(|entry| entry.last_used < before)
            .filter_map(|entry| entry.until_ended())
            .filter(|session| session.transport() == transport && !session.is_serving())
            .cloned()
            .collect();
        for session in &idle {
            self.end_session(session);
        }
        idle.len()
    }

    /// Ends `session`: what runs for it stops, and it leaves the registry, unless another
    /// session has taken its id since (two requests that restored one session at once).
    pub fn end_session(&self, session: &Session) {
        session.stop();
        let ours = |held: &Arc<Session>| std::ptr::eq(Arc::as_ptr(held), session);
        {
            let mut entries = self.lock();
            let id = session.id.as_str();
            if entries
                .get(id)
                .and_then(Entry::until_ended)
                .is_some_and(ours)
            {
                entries.remove(id);
            }
        }
        self.stateless_lock().retain(|_, held| !ours(held));
    }

    /// The sessions still open, oldest first; forgets the ended ones.
    pub fn list(&self) -> Vec<SessionSummary> {
        let mut entries = self.lock();
        entries.retain(|_, entry| entry.session().is_some());
        let mut list: Vec<SessionSummary> = entries
            .iter()
            .filter_map(|(id, entry)| {
                let session = entry.session()?;
                let client = session.client().map(|client| &client.client_info);
                Some(SessionSummary {
                    id: id.to_string(),
                    transport: session.transport(),
                    client_name: client.map(|client| client.name.clone()),
                    client_version: client.map(|client| client.version.clone()),
                    profile: session.profile.name.clone(),
                    calls: session.with_state(|count: &mut CallCount| count.0),
                    since_ms: session.since_ms(),
                })
            })
            .collect();
        list.sort_by_key(|s| s.since_ms);
        list
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn stateless_lock(&self) -> MutexGuard<'_, HashMap<StatelessKey, Arc<Session>>> {
        self.stateless.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The one owner check: a session opened by `owner` serves requests of `caller` only
/// when they are the same identity (both `None`: no credentials were needed).
pub fn check_owner(owner: Option<&str>, caller: Option<&str>) -> Result<(), SessionRefusal> {
    if owner == caller {
        Ok(())
    } else {
        Err(SessionRefusal::NotYours)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::config::Config;
    use crate::registry::profile::Profiles;
    use crate::session::Opening;

    fn session(id: &str, transport: Transport, identity: Option<&str>) -> Arc<Session> {
        let config = Config::from_toml("").expect("the empty configuration");
        let profile = Profiles::new(&config)
            .get(None)
            .expect("the default profile");
        let mut opening = Opening::own(None, transport);
        opening.owner.identity = identity.map(str::to_owned);
        Arc::new(Session::new(id.into(), profile, None, opening))
    }

    #[test]
    fn a_session_of_the_core_is_found_for_its_owner_and_held_until_it_ends() {
        let sessions = Sessions::default();
        let held = session("s1", Transport::Stdio, Some("token:aaaa"));
        sessions.enter(&held);
        let weak = Arc::downgrade(&held);
        drop(held);

        let found = sessions.find("s1", Some("token:aaaa")).expect("held");
        assert_eq!(found.owner(), Some("token:aaaa"));
        assert_eq!(
            sessions.find("s1", Some("token:bbbb")).err(),
            Some(SessionRefusal::NotYours)
        );
        assert_eq!(
            sessions.find("s1", None).err(),
            Some(SessionRefusal::NotYours)
        );
        assert_eq!(sessions.list().len(), 1);
        drop(found);

        sessions.end("s1");
        assert!(
            weak.upgrade().is_none(),
            "ended, the registry lets go of it"
        );
        assert_eq!(
            sessions.find("s1", Some("token:aaaa")).err(),
            Some(SessionRefusal::Unknown)
        );
        assert!(sessions.list().is_empty());
    }

    #[test]
    fn a_session_the_gateway_opened_for_itself_is_listed_while_used_and_never_found() {
        let sessions = Sessions::default();
        let console = session("c1", Transport::Console, None);
        console.name_client("mcp-gateway console", "1");
        sessions.list_while_used(&console);

        let listed = sessions.list();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].transport, Transport::Console);
        assert_eq!(
            listed[0].client_name.as_deref(),
            Some("mcp-gateway console")
        );
        assert_eq!(
            sessions.find("c1", None).err(),
            Some(SessionRefusal::Unknown)
        );

        drop(console);
        assert!(
            sessions.list().is_empty(),
            "forgotten once its holder let go"
        );
    }

    #[test]
    fn only_the_idle_sessions_of_the_transport_end_as_abandoned() {
        let sessions = Sessions::default();
        let idle = session("idle", Transport::StreamableHttp, None);
        let serving = session("serving", Transport::StreamableHttp, None);
        let stdio = session("stdio", Transport::Stdio, None);
        for held in [&idle, &serving, &stdio] {
            sessions.enter(held);
        }
        serving.running.serving.fetch_add(1, Ordering::AcqRel);
        std::thread::sleep(Duration::from_millis(5));

        let ended = sessions.end_idle(Transport::StreamableHttp, Duration::from_millis(1));
        assert_eq!(ended, 1);
        assert!(
            idle.running.closed.is_cancelled(),
            "what ran for it stopped"
        );
        assert!(sessions.find("idle", None).is_err());
        assert!(sessions.find("serving", None).is_ok());
        assert!(sessions.find("stdio", None).is_ok());
    }
}
