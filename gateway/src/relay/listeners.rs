//! The client sessions the relay can reach (the listeners of upstream messages), and where
//! an upstream's `notifications/message` goes. What the relay reaches of one session, the
//! way to its client and the log level it set, is the session's own [`Reach`]
//! (`crate::session::Session::reach`): the session holds it, and the listeners list it
//! while the session is open, so that neither is a copy of the other.
//!
//! A session joins when its client has initialized, and is reached no more once it ends. Each session
//! sets its own level with `logging/setLevel`. Upstreams are shared, so each
//! is told the lowest level any session wants (the most verbose); the gateway then filters
//! per session. A message that arrives while one session has calls in flight on that
//! upstream goes to that session (unless its level turns it away); any other message goes
//! to every session whose level admits it. Either way `logger` names the server
//! (`<server>` or `<server>/<logger>`), and the gateway's own log keeps a copy.

#![allow(deprecated, reason = "logging is what clients on 2025 protocols use")]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use tokio_util::sync::CancellationToken;

use super::calls::Caller;
use super::link::ClientLink;

/// Lower is more verbose; a message passes a level when its rank is at least the level's.
pub fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// What the relay reaches of one client session: the way to its client outside any
/// request, once it has one, and the log level its client set, until the session ends.
pub struct Reach {
    /// Set once: when the client has initialized, or when it set a level before that;
    /// dropped when the session ends, so nothing of the relay keeps its client's stream.
    link: Mutex<Option<ClientLink>>,
    /// `None` until the client sends `logging/setLevel`.
    level: Mutex<Option<LoggingLevel>>,
    /// Cancelled when the session ends.
    ended: CancellationToken,
}

impl Reach {
    /// The reach of a session that ends when `ended` is cancelled.
    pub fn new(ended: CancellationToken) -> Self {
        Self {
            link: Mutex::new(None),
            level: Mutex::new(None),
            ended,
        }
    }

    /// The way to the client outside any request, while it is open.
    pub fn link(&self) -> Option<ClientLink> {
        self.lock_link()
            .as_ref()
            .filter(|link| !link.is_closed() && !self.has_ended())
            .cloned()
    }

    /// The session ended: its client is no longer reached.
    pub fn end(&self) {
        self.lock_link().take();
    }

    /// Reaches the client through `link` from now on, unless it already has a way.
    fn reach_through(&self, link: ClientLink) {
        if !self.has_ended() {
            self.lock_link().get_or_insert(link);
        }
    }

    fn lock_link(&self) -> MutexGuard<'_, Option<ClientLink>> {
        self.link.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The level the client set, if it set one, while the session lasts.
    pub fn level(&self) -> Option<LoggingLevel> {
        if self.has_ended() {
            return None;
        }
        *self.level.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn has_ended(&self) -> bool {
        self.ended.is_cancelled()
    }
}

/// The client sessions the relay can reach, by id.
#[derive(Default)]
pub struct Listeners {
    sessions: Mutex<HashMap<Arc<str>, Arc<Reach>>>,
}

impl Listeners {
    /// Adds a session whose client has initialized, reached through `link` from now on
    /// (in place of one that had its id before).
    pub fn join(&self, session: Arc<str>, reach: &Arc<Reach>, link: ClientLink) {
        reach.reach_through(link);
        self.list(session, reach);
    }

    /// Sets the level of `session`, whose client `link` reaches, listing it if it was not
    /// yet; returns the new lowest level over all sessions.
    pub fn set_level(
        &self,
        session: &Arc<str>,
        reach: &Arc<Reach>,
        link: ClientLink,
        level: LoggingLevel,
    ) -> LoggingLevel {
        reach.reach_through(link);
        *reach.level.lock().unwrap_or_else(|p| p.into_inner()) = Some(level);
        self.list(session.clone(), reach);
        self.lowest().unwrap_or(level)
    }

    /// Lists `reach` under `session`, forgetting the sessions that ended.
    fn list(&self, session: Arc<str>, reach: &Arc<Reach>) {
        let mut sessions = self.lock();
        sessions.retain(|_, listed| !listed.has_ended());
        sessions.insert(session, reach.clone());
    }

    /// The way to `session`'s client, while it is open.
    pub fn link(&self, session: &str) -> Option<ClientLink> {
        self.lock().get(session).and_then(|reach| reach.link())
    }

    /// The one open session whose client `can` do something, when there is exactly one.
    pub fn sole(&self, can: impl Fn(&ClientLink) -> bool) -> Option<(Arc<str>, ClientLink)> {
        let sessions = self.lock();
        let mut able = sessions
            .iter()
            .filter_map(|(id, reach)| Some((id, reach.link()?)))
            .filter(|(_, link)| can(link));
        match (able.next(), able.next()) {
            (Some((id, link)), None) => Some((id.clone(), link)),
            _ => None,
        }
    }

    /// The level `session` set, if it set one.
    pub fn level(&self, session: &str) -> Option<LoggingLevel> {
        self.lock().get(session).and_then(|reach| reach.level())
    }

    /// The lowest level any session wants, if any set one.
    pub fn lowest(&self) -> Option<LoggingLevel> {
        lowest(&self.lock())
    }

    /// The links `message` goes to: the calling session's during a call, else every
    /// session whose level admits it.
    pub fn recipients(
        &self,
        message: &LoggingMessageNotificationParam,
        caller: Option<&Caller>,
    ) -> Vec<ClientLink> {
        let admits = |level: Option<LoggingLevel>| {
            level.is_none_or(|level| rank(message.level) >= rank(level))
        };
        let sessions = self.lock();
        if let Some(caller) = caller {
            // A client on 2026-07-28 names its level in each request, or wants none.
            let level = if caller.link.is_stateless() {
                let Some(level) = caller.log_level else {
                    return Vec::new();
                };
                Some(level)
            } else {
                sessions
                    .get(&caller.session)
                    .and_then(|reach| reach.level())
            };
            return if admits(level) {
                vec![caller.link.clone()]
            } else {
                Vec::new()
            };
        }
        sessions
            .values()
            .filter_map(|reach| Some((reach.level()?, reach.link()?)))
            .filter(|(level, _)| admits(Some(*level)))
            .map(|(_, link)| link)
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Arc<Reach>>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn lowest(sessions: &HashMap<Arc<str>, Arc<Reach>>) -> Option<LoggingLevel> {
    sessions
        .values()
        .filter_map(|reach| reach.level())
        .min_by_key(|level| rank(*level))
}

/// `message` as clients see it: `logger` names the server it came from.
pub fn tagged(
    server: &str,
    mut message: LoggingMessageNotificationParam,
) -> LoggingMessageNotificationParam {
    message.logger = Some(match message.logger.take() {
        Some(logger) => format!("{server}/{logger}"),
        None => server.to_owned(),
    });
    message
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
    use tokio::sync::mpsc;

    use super::*;
    use crate::relay::ClientRequests;

    /// A session's reach, ended with the token, and a link to its client (whose messages
    /// nobody reads, and which stays open as long as the test).
    fn session() -> (Arc<Reach>, ClientLink, CancellationToken) {
        let ended = CancellationToken::new();
        let (messages, read) = mpsc::channel(1);
        std::mem::forget(read);
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("test", "1"),
        );
        let link = ClientLink::new(
            messages,
            Arc::new(ClientRequests::default()),
            Arc::new(client),
            ended.clone(),
        );
        (Arc::new(Reach::new(ended.clone())), link, ended)
    }

    fn message(level: LoggingLevel) -> LoggingMessageNotificationParam {
        LoggingMessageNotificationParam::new(level, "x".into())
    }

    #[test]
    fn the_level_a_session_sets_is_its_own_and_the_relay_sees_it() {
        let listeners = Listeners::default();
        let (quiet, quiet_link, _quiet_ended) = session();
        let (chatty, chatty_link, _chatty_ended) = session();
        listeners.join("quiet".into(), &quiet, quiet_link);
        assert_eq!(listeners.lowest(), None, "no level set yet");
        let lowest = listeners.set_level(
            &"quiet".into(),
            &quiet,
            quiet.link().unwrap(),
            LoggingLevel::Error,
        );
        assert_eq!(lowest, LoggingLevel::Error);
        // A level set before the client initialized lists the session, reached by the link
        // the level came with.
        let lowest =
            listeners.set_level(&"chatty".into(), &chatty, chatty_link, LoggingLevel::Debug);
        assert_eq!(lowest, LoggingLevel::Debug);
        assert_eq!(
            quiet.level(),
            Some(LoggingLevel::Error),
            "the session's own field"
        );
        assert_eq!(listeners.level("quiet"), Some(LoggingLevel::Error));
        assert_eq!(listeners.level("chatty"), Some(LoggingLevel::Debug));
        assert!(listeners.link("chatty").is_some());
        assert_eq!(
            listeners
                .recipients(&message(LoggingLevel::Info), None)
                .len(),
            1
        );
        assert_eq!(
            listeners
                .recipients(&message(LoggingLevel::Error), None)
                .len(),
            2
        );
    }

    #[test]
    fn a_session_that_ended_is_reached_no_more_and_wants_no_level() {
        let listeners = Listeners::default();
        let (staying, staying_link, _staying_ended) = session();
        let (leaving, leaving_link, leaving_ended) = session();
        listeners.set_level(
            &"staying".into(),
            &staying,
            staying_link,
            LoggingLevel::Warning,
        );
        listeners.set_level(
            &"leaving".into(),
            &leaving,
            leaving_link,
            LoggingLevel::Debug,
        );
        assert_eq!(listeners.lowest(), Some(LoggingLevel::Debug));

        leaving_ended.cancel();
        assert_eq!(listeners.lowest(), Some(LoggingLevel::Warning));
        assert_eq!(listeners.level("leaving"), None);
        assert!(listeners.link("leaving").is_none());
        assert!(
            listeners
                .sole(|_| true)
                .is_some_and(|(id, _)| &*id == "staying")
        );
        assert_eq!(
            listeners
                .recipients(&message(LoggingLevel::Error), None)
                .len(),
            1
        );
    }

    #[test]
    fn a_session_that_takes_an_ended_ones_id_is_the_one_reached() {
        let listeners = Listeners::default();
        let (first, first_link, first_ended) = session();
        let (second, second_link, _second_ended) = session();
        listeners.join("restored".into(), &first, first_link);
        listeners.join("restored".into(), &second, second_link);
        first_ended.cancel();
        assert!(
            listeners.link("restored").is_some(),
            "the second session's link"
        );
    }

    #[test]
    fn ranks_follow_severity() {
        let ordered = [
            LoggingLevel::Debug,
            LoggingLevel::Info,
            LoggingLevel::Notice,
            LoggingLevel::Warning,
            LoggingLevel::Error,
            LoggingLevel::Critical,
            LoggingLevel::Alert,
            LoggingLevel::Emergency,
        ];
        assert!(ordered.windows(2).all(|w| rank(w[0]) < rank(w[1])));
    }

    #[test]
    fn logger_names_the_server() {
        let message = LoggingMessageNotificationParam::new(LoggingLevel::Info, "x".into());
        assert_eq!(tagged("kv", message.clone()).logger.as_deref(), Some("kv"));
        let mut named = message;
        named.logger = Some("db".into());
        assert_eq!(tagged("kv", named).logger.as_deref(), Some("kv/db"));
    }
}
