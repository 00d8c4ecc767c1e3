//! The requests in flight on one upstream, and the client call each one serves.
//!
//! Every request the gateway sends an upstream on a client's behalf is entered here for as
//! long as it is in flight, under the id and progress token the gateway gave it upstream.
//! What the upstream sends during the call finds its client here: progress by token; a
//! request (sampling, elicitation, roots, ping) by the request whose response stream
//! carried it, which streamable HTTP upstreams tell ([`InboundStreamOrigin`]); otherwise
//! (stdio and SSE carry no such link) by the one client session that has calls in flight
//! on this upstream. When several sessions do, nothing says whose call it is, and the
//! request is refused rather than guessed; the tools in flight are then remembered as
//! asking their client, and their calls take turns between sessions from then on (see
//! [`super::turns`]), so the next such request has one session to go to.

#![allow(
    deprecated,
    reason = "log levels are what clients of both revisions still name"
)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::model::{
    InputResponses, LoggingLevel, ProgressNotification, ProgressNotificationParam, ProgressToken,
    RequestId, RequestMetaObject, ServerNotification,
};
use rmcp::service::InboundStreamOrigin;
use tokio::sync::{Notify, mpsc};

use super::link::ClientLink;
use super::turns::Turns;
use crate::auth::exchange::SubjectToken;

/// The `_meta` key of a request's progress token.
pub(super) const PROGRESS_TOKEN: &str = "progressToken";

/// The client side of one call: where the upstream's requests and notifications go.
#[derive(Clone)]
pub struct Caller {
    /// The way to the client, for the span of its request.
    pub link: ClientLink,
    /// The token the client chose when it asked for progress.
    pub progress_token: Option<ProgressToken>,
    /// The `_meta` of the client's request, without its progress token: passed on to the
    /// upstream as the client sent it.
    pub meta: Option<RequestMetaObject>,
    /// The client session, to tell callers apart and for its log level.
    pub session: Arc<str>,
    /// For a client on protocol 2026-07-28, the level of log messages its request asked
    /// for; it gets none without one.
    pub log_level: Option<LoggingLevel>,
    /// Answers the client gave with its request before being asked (protocol 2026-07-28
    /// `inputResponses`): the upstream gets them with the call.
    pub given_input: Option<InputResponses>,
    /// Who the client's credentials name (`token:…`, `subject:…`, `client:…`), if anyone: whose
    /// sign-in a per-user server's call is made with.
    pub identity: Option<Arc<str>>,
    /// The identity provider's access token the client presented, if it did: what a
    /// token-exchange server trades for its own.
    pub subject_token: Option<SubjectToken>,
}

/// The keys of a request's `_meta` that describe the client's own connection (protocol
/// 2026-07-28): never passed on, since the gateway's connection to an upstream has its own.
const CONNECTION_KEYS: [&str; 4] = [
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/logLevel",
];

impl Caller {
    /// The caller of a request whose `_meta` is `meta`, reached through `link`, in
    /// `session`.
    pub fn new(link: ClientLink, mut meta: RequestMetaObject, session: &str) -> Caller {
        let progress_token = meta.get_progress_token();
        let log_level = meta.log_level();
        meta.remove(PROGRESS_TOKEN);
        for key in CONNECTION_KEYS {
            meta.remove(key);
        }
        Caller {
            link,
            progress_token,
            meta: (!meta.is_empty()).then_some(meta),
            session: session.into(),
            log_level,
            given_input: None,
            identity: None,
            subject_token: None,
        }
    }

    /// The same caller, acting as `identity`, having presented `subject_token`.
    pub fn with_identity(
        mut self,
        identity: Option<&str>,
        subject_token: Option<SubjectToken>,
    ) -> Caller {
        self.identity = identity.map(Arc::from);
        self.subject_token = subject_token;
        self
    }

    /// Sends the client `progress` from upstream under the client's own token, when it
    /// asked for progress.
    pub async fn notify_progress(&self, mut progress: ProgressNotificationParam) {
        let Some(token) = self.link.progress_token(self.progress_token.as_ref()) else {
            return;
        };
        progress.progress_token = token;
        let notification =
            ServerNotification::ProgressNotification(ProgressNotification::new(progress));
        if !self.link.notify(notification).await {
            tracing::debug!(session = %self.session, "progress not delivered: the client left");
        }
    }

    /// The same caller for a nested call (run_code's tool calls), which has no progress
    /// or `_meta` of its own.
    pub fn nested(&self) -> Caller {
        Caller {
            progress_token: None,
            meta: None,
            given_input: None,
            ..self.clone()
        }
    }
}

/// Upstream request id → caller, for the requests in flight on one upstream, and the
/// turns its calls take.
#[derive(Clone, Default)]
pub struct CallRoutes {
    calls: Arc<Mutex<Calls>>,
    turns: Arc<Turns>,
    /// Woken whenever a request is entered.
    entered: Arc<Notify>,
    /// The session whose change of roots this upstream was last told of.
    roots_told: Arc<Mutex<Option<RootsTold>>>,
}

/// A session's change of roots, and when the upstream was told of it.
struct RootsTold {
    session: Arc<str>,
    at: Instant,
}

/// How long after the gateway tells an upstream that a session's roots changed its
/// `roots/list` is taken as asking for that session's.
const ROOTS_ASKED_WITHIN: Duration = Duration::from_secs(5);

/// How long an upstream's request that names a call waits for that call to be entered.
/// rmcp hands a request to its transport before the task that sent it can enter it, so
/// an upstream that asks at once (an elicitation as a tool starts, say) can be quicker.
const ENTRY_WAIT: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Calls {
    by_request: HashMap<RequestId, Route>,
    by_progress: HashMap<ProgressToken, RequestId>,
}

/// One request in flight: whom it serves, the tool it calls, if it is a tool call, and
/// where its progress waits for the task that awaits its answer, when that task forwards
/// it (see [`CallRoutes::enter_in_order`]).
struct Route {
    caller: Caller,
    tool: Option<String>,
    progress: Option<mpsc::Sender<ProgressNotificationParam>>,
}

/// Progress notifications of one call held for its task at most; more are dropped until it
/// catches up (an upstream flooding progress must not grow the gateway's memory).
pub const MAX_QUEUED_PROGRESS: usize = 64;

/// Why an upstream's request could not be related to a client call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unrelated {
    /// No call is in flight on this upstream.
    NoCall,
    /// Calls of several sessions are in flight and the transport does not say which one
    /// the request belongs to.
    Ambiguous,
}

impl std::fmt::Display for Unrelated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unrelated::NoCall => "no client call is in flight on this server",
            Unrelated::Ambiguous => {
                "calls of several clients are in flight on this server and nothing tells \
                 which one this request belongs to"
            }
        })
    }
}

impl CallRoutes {
    /// Remembers that this upstream is being told that `session`'s roots changed.
    pub fn roots_told(&self, session: Arc<str>) {
        let told = RootsTold {
            session,
            at: Instant::now(),
        };
        *self.roots_told.lock().unwrap_or_else(|p| p.into_inner()) = Some(told);
    }

    /// The session whose roots a `roots/list` from this upstream asks for when it answers
    /// being told they changed (within [`ROOTS_ASKED_WITHIN`]): whichever calls are in
    /// flight then, the roots are that session's, and no tool learns it asks its client.
    /// Taken: a later `roots/list` is attributed as any other request.
    pub fn roots_asked_for(&self) -> Option<Arc<str>> {
        self.roots_told
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .filter(|told| told.at.elapsed() < ROOTS_ASKED_WITHIN)
            .map(|told| told.session)
    }

    /// The turns this upstream's calls take between sessions.
    pub fn turns(&self) -> &Arc<Turns> {
        &self.turns
    }

    /// Enters the upstream request `id` (with the progress token the gateway gave it) as
    /// serving `caller` (calling `tool`, for a tool call), until the returned guard is
    /// dropped.
    pub fn enter(
        &self,
        id: RequestId,
        token: ProgressToken,
        caller: Caller,
        tool: Option<&str>,
    ) -> CallGuard {
        self.insert(id, token, caller, tool, None)
    }

    /// [`Self::enter`], with the request's progress queued for the returned receiver
    /// instead of forwarded as it comes: by [`Self::queue_progress`], which the upstream's
    /// transport calls in the order of its messages, so the task that awaits the answer
    /// can forward all progress before it (see [`answer_after_progress`]).
    pub fn enter_in_order(
        &self,
        id: RequestId,
        token: ProgressToken,
        caller: Caller,
        tool: Option<&str>,
    ) -> (CallGuard, mpsc::Receiver<ProgressNotificationParam>) {
        let (sender, receiver) = mpsc::channel(MAX_QUEUED_PROGRESS);
        (self.insert(id, token, caller, tool, Some(sender)), receiver)
    }

    fn insert(
        &self,
        id: RequestId,
        token: ProgressToken,
        caller: Caller,
        tool: Option<&str>,
        progress: Option<mpsc::Sender<ProgressNotificationParam>>,
    ) -> CallGuard {
        let mut calls = self.lock();
        self.entered.notify_waiters();
        calls.by_progress.insert(token.clone(), id.clone());
        let tool = tool.map(str::to_owned);
        let route = Route {
            caller,
            tool,
            progress,
        };
        calls.by_request.insert(id.clone(), route);
        CallGuard {
            routes: self.clone(),
            id,
            token,
        }
    }

    /// Queues `progress` for the task of the request entered in order under its token;
    /// false when no such request is in flight (the progress then goes the usual way,
    /// [`Self::progress_caller`]).
    pub fn queue_progress(&self, progress: &ProgressNotificationParam) -> bool {
        let calls = self.lock();
        let queue = calls
            .by_progress
            .get(&progress.progress_token)
            .and_then(|id| calls.by_request.get(id))
            .and_then(|route| route.progress.as_ref());
        let Some(queue) = queue else {
            return false;
        };
        if queue.try_send(progress.clone()).is_err() {
            tracing::debug!("dropping progress of a request that is behind on it");
        }
        true
    }

    /// The caller that wants the progress reported under the gateway's `token`.
    pub fn progress_caller(&self, token: &ProgressToken) -> Option<Caller> {
        let calls = self.lock();
        let id = calls.by_progress.get(token)?;
        calls
            .by_request
            .get(id)
            .map(|route| &route.caller)
            .filter(|caller| caller.progress_token.is_some())
            .cloned()
    }

    /// The caller the upstream request `id` (in flight) serves.
    pub fn caller_of_call(&self, id: &RequestId) -> Option<Caller> {
        let calls = self.lock();
        calls.by_request.get(id).map(|route| route.caller.clone())
    }

    /// The caller an upstream message belongs to: the request whose response stream
    /// carried it, else the one session with calls in flight.
    pub fn caller_of(&self, origin: Option<&InboundStreamOrigin>) -> Result<Caller, Unrelated> {
        self.attribute(origin).map(|(caller, _)| caller)
    }

    /// [`Self::caller_of_request`], once the call the message came for (by the stream it
    /// came on) has been entered, or [`ENTRY_WAIT`] has passed.
    pub async fn caller_of_entered_request(
        &self,
        server: &str,
        origin: Option<&InboundStreamOrigin>,
    ) -> Result<Caller, Unrelated> {
        let deadline = tokio::time::Instant::now() + ENTRY_WAIT;
        loop {
            let entered = self.entered.notified();
            tokio::pin!(entered);
            // Registered before the check, so an entry made in between is not missed.
            entered.as_mut().enable();
            let waiting = matches!(origin, Some(InboundStreamOrigin::OutboundRequest(id))
                if !self.lock().by_request.contains_key(id));
            if !waiting || tokio::time::timeout_at(deadline, entered).await.is_err() {
                return self.caller_of_request(server, origin);
            }
        }
    }

    /// The caller an upstream's request belongs to, as [`Self::caller_of`]. When nothing
    /// on the wire said so, the tools in flight (of the caller's session, or of every
    /// session when that is ambiguous) are remembered as asking their client, so their
    /// calls take turns from now on.
    pub fn caller_of_request(
        &self,
        server: &str,
        origin: Option<&InboundStreamOrigin>,
    ) -> Result<Caller, Unrelated> {
        let attributed = self.attribute(origin);
        let session = match &attributed {
            Ok((_, Attributed::ByStream)) | Err(Unrelated::NoCall) => return strip(attributed),
            Ok((caller, Attributed::BySession)) => Some(caller.session.clone()),
            Err(Unrelated::Ambiguous) => None,
        };
        let calls = self.lock();
        let in_flight = calls.by_request.values().filter(|route| {
            session
                .as_ref()
                .is_none_or(|session| route.caller.session == *session)
        });
        for tool in self
            .turns
            .learn(in_flight.filter_map(|route| route.tool.as_deref()))
        {
            tracing::info!(
                server,
                tool,
                "the tool asks its client during calls; its calls now take turns between sessions"
            );
        }
        strip(attributed)
    }

    fn attribute(
        &self,
        origin: Option<&InboundStreamOrigin>,
    ) -> Result<(Caller, Attributed), Unrelated> {
        let calls = self.lock();
        if let Some(InboundStreamOrigin::OutboundRequest(id)) = origin
            && let Some(route) = calls.by_request.get(id)
        {
            return Ok((route.caller.clone(), Attributed::ByStream));
        }
        let mut callers = calls.by_request.values().map(|route| &route.caller);
        let first = callers.next().ok_or(Unrelated::NoCall)?;
        if callers.all(|other| other.session == first.session) {
            Ok((first.clone(), Attributed::BySession))
        } else {
            Err(Unrelated::Ambiguous)
        }
    }

    fn lock(&self) -> MutexGuard<'_, Calls> {
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// How a message was related to its call.
enum Attributed {
    /// It came on the response stream of the call's request.
    ByStream,
    /// Only one session had calls in flight.
    BySession,
}

fn strip(attributed: Result<(Caller, Attributed), Unrelated>) -> Result<Caller, Unrelated> {
    attributed.map(|(caller, _)| caller)
}

/// Waits for `answer`, handing each progress notification queued before it to `forward`
/// first (and awaiting it), so the last progress is never overtaken by the answer
/// (clients drop progress for a request that has been answered).
pub async fn answer_after_progress<T, F>(
    answer: impl Future<Output = T>,
    queue: &mut mpsc::Receiver<ProgressNotificationParam>,
    mut forward: impl FnMut(ProgressNotificationParam) -> F,
) -> T
where
    F: Future<Output = ()>,
{
    let mut answer = std::pin::pin!(answer);
    loop {
        tokio::select! {
            biased;
            Some(progress) = queue.recv() => forward(progress).await,
            answer = &mut answer => {
                // Progress read before the answer is in the queue by now.
                while let Ok(progress) = queue.try_recv() {
                    forward(progress).await;
                }
                return answer;
            }
        }
    }
}

/// Removes a request's route when the request ends.
pub struct CallGuard {
    routes: CallRoutes,
    id: RequestId,
    token: ProgressToken,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let mut calls = self.routes.lock();
        calls.by_request.remove(&self.id);
        calls.by_progress.remove(&self.token);
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, NumberOrString};
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn caller(session: &str) -> Caller {
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("test", "1"),
        );
        let (messages, _) = mpsc::channel(1);
        let link = ClientLink::new(
            messages,
            Arc::default(),
            Arc::new(client),
            CancellationToken::new(),
        );
        Caller::new(link, RequestMetaObject::new(), session)
    }

    #[tokio::test]
    async fn a_request_that_comes_before_its_call_is_entered_waits_for_it() {
        let routes = CallRoutes::default();
        let id = RequestId::Number(7);
        let origin = InboundStreamOrigin::OutboundRequest(id.clone());
        let asked = {
            let routes = routes.clone();
            let origin = origin.clone();
            tokio::spawn(async move {
                routes
                    .caller_of_entered_request("up", Some(&origin))
                    .await
                    .map(|caller| caller.session)
            })
        };
        // The request is already waiting when the call that sent it is entered.
        tokio::task::yield_now().await;
        let token = ProgressToken(NumberOrString::Number(7));
        let _entered = routes.enter(id, token, caller("s1"), Some("tool"));
        let session = asked.await.unwrap().ok();
        assert_eq!(session.as_deref(), Some("s1"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_for_a_call_never_entered_is_unrelated_after_the_wait() {
        let routes = CallRoutes::default();
        let origin = InboundStreamOrigin::OutboundRequest(RequestId::Number(9));
        let answer = routes.caller_of_entered_request("up", Some(&origin)).await;
        assert!(matches!(answer, Err(Unrelated::NoCall)));
    }
}
