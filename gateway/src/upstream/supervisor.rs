//! The supervisor of one upstream: connect, serve until the connection drops, back off,
//! repeat, forever until shutdown. While a connection is up it reads the lists again when
//! the upstream says they changed or their `ttlMs` ran out, and passes resource updates
//! on. Each failure is logged once (see [`LoggedFailures`]) and kept in the upstream's
//! health; the delay between attempts grows as [`Backoff`] says.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::client::UpstreamEvent;
use super::connect;
use super::kind::{CONNECT_TIMEOUT, ConnectError};
use super::offer;
use super::resource_listens::ResourceNews;
use super::{Live, Upstream, UpstreamState};
use crate::config::UpstreamProtocol;
use crate::relay::ListKind;
use crate::upstream::resource_uri;

/// How long the supervisor waits before its next attempt: [`Self::FIRST`] after a
/// connection that came up, doubled after each failure up to [`Self::MOST`].
struct Backoff(Duration);

impl Backoff {
    const FIRST: Duration = Duration::from_millis(250);
    const MOST: Duration = Duration::from_secs(30);

    fn new() -> Self {
        Self(Self::FIRST)
    }

    /// The wait before the next attempt; the one after it is twice as long.
    fn next(&mut self) -> Duration {
        let wait = self.0;
        self.0 = (self.0 * 2).min(Self::MOST);
        wait
    }
}

/// Whether a list read again is announced to clients (`list_changed`).
#[derive(Clone, Copy)]
enum Announce {
    /// The upstream said it changed.
    Always,
    /// Its `ttlMs` ran out: only when it differs from what clients had.
    IfChanged,
}

/// Resolves at `at`, or never when there is no `at`.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// How long a stdio server's stderr is given, once its connection is over, to tell what
/// it was refused before the reason it ended is logged.
const STDERR_SETTLES: Duration = Duration::from_millis(500);

/// The start-up failures of one upstream logged as errors since it last came up: one
/// seen again, at every retry of a server down for hours, is a debug line (its health
/// keeps the latest). Attempts under `auto` alternate between two ways of opening, so one
/// failure may read two ways; past [`Self::AT_MOST`] distinct ones (errors that name a new
/// port or time at every attempt) all are debug lines.
#[derive(Default)]
struct LoggedFailures(Vec<String>);

impl LoggedFailures {
    const AT_MOST: usize = 8;

    /// Logs `error`; true when it was logged as an error, not as a debug line.
    fn log(&mut self, server: &str, error: &str) -> bool {
        if self.0.iter().any(|logged| logged == error) || self.0.len() >= Self::AT_MOST {
            tracing::debug!(server = %server, "upstream still fails to start: {error}");
            return false;
        }
        tracing::error!(
            server = %server,
            "upstream failed to start: {error} (retrying; the same failure is not logged again)"
        );
        self.0.push(error.to_owned());
        true
    }
}

impl Upstream {
    /// The supervisor: connect, serve until the connection drops, back off, repeat.
    pub(super) async fn supervise(self: Arc<Self>) {
        let mut backoff = Backoff::new();
        // Under `auto`: whether the next attempt skips `server/discover`, because the last
        // one failed while starting (a server that exits, or breaks off, when asked a
        // method it does not know before `initialize`, or answers it with something that
        // is no discover result). The attempt with `initialize` follows at once; attempts
        // alternate from then on until one succeeds.
        let mut skip_discover = false;
        let mut logged_failures = LoggedFailures::default();
        loop {
            let (events_tx, mut events) = mpsc::unbounded_channel();
            let mut config = self.config.clone();
            if skip_discover {
                config.protocol = UpstreamProtocol::Session;
            }
            let sides = connect::Sides {
                events: events_tx,
                calls: self.calls.clone(),
                downstream: self.downstream.clone(),
                sandbox: self.sandbox.clone(),
            };
            let before_attempt = self.sandbox.mark();
            let attempt = tokio::select! {
                attempt = connect::connect(&self.name, &config, self.signs_in_as.as_ref(), sides) => attempt,
                () = self.shutdown.cancelled() => break,
            };
            if let Err(ConnectError::Initialize(error)) = &attempt
                && self.config.protocol == UpstreamProtocol::Auto
            {
                skip_discover = !skip_discover;
                if skip_discover {
                    tracing::debug!(server = %self.name, %error, "server/discover failed; trying initialize");
                    continue;
                }
            }
            match attempt {
                Ok(connection) => {
                    backoff = Backoff::new();
                    logged_failures = LoggedFailures::default();
                    let protocol = connection
                        .live
                        .peer
                        .peer_info()
                        .map(|info| info.protocol_version.to_string());
                    self.set_health(|h| {
                        h.state = UpstreamState::Ready;
                        h.pid = connection.live.pid;
                        h.protocol.clone_from(&protocol);
                    });
                    tracing::info!(server = %self.name, tools = connection.live.offer.tools.len(), protocol = protocol.as_deref().unwrap_or("?"), "upstream ready");
                    self.set_live(Some(connection.live.clone()));
                    // What clients subscribed to on an earlier connection (or instance)
                    // died with it: this one is subscribed again.
                    let _ = self
                        .resource_updates
                        .send(ResourceNews::Connected(self.clone()));
                    if let Some(level) = self.downstream.listeners.lowest() {
                        self.set_log_level(level).await;
                    }
                    self.attempted.send_replace(true);
                    let mut relisted = Instant::now();
                    loop {
                        let relist = self.relist_at(relisted);
                        tokio::select! {
                            () = connection.closed() => break,
                            () = connection.live.unreachable.raised.cancelled() => break,
                            () = self.shutdown.cancelled() => break,
                            () = connection.live.lane.session_renewed() => {
                                // What it held in the session it forgot is gone.
                                let renewed = ResourceNews::Connected(self.clone());
                                let _ = self.resource_updates.send(renewed);
                            }
                            () = sleep_until(relist) => {
                                relisted = Instant::now();
                                self.relist().await;
                            }
                            Some(event) = events.recv() => {
                                // A flood of list_changed is one refresh, not one per event.
                                let mut batch = vec![event];
                                while let Ok(more) = events.try_recv() {
                                    if !batch.contains(&more) {
                                        batch.push(more);
                                    }
                                }
                                for event in batch {
                                    self.on_event(event).await;
                                }
                            }
                        }
                    }
                    self.set_live(None);
                    let violation = connection.live.violation.clone();
                    let unreachable = connection.live.unreachable.clone();
                    connection.close().await;
                    if self.shutdown.is_cancelled() {
                        break;
                    }
                    let why = match (violation.get(), unreachable.reason()) {
                        (Some(violation), _) => format!("closed by the gateway: {violation}"),
                        (None, Some(reason)) => format!("unreachable ({reason})"),
                        (None, None) => "connection closed".into(),
                    };
                    let why = self.with_refusals(why, before_attempt).await;
                    tracing::warn!(server = %self.name, "upstream {why}; reconnecting");
                    self.set_health(|h| {
                        h.state = UpstreamState::Restarting;
                        h.last_error = Some(why);
                        h.pid = None;
                        h.protocol = None;
                    });
                }
                Err(error) => {
                    let state = match error {
                        ConnectError::NeedsLogin { .. } => UpstreamState::NeedsLogin,
                        _ => UpstreamState::Failed,
                    };
                    let error = crate::redact::urls(&error.to_string());
                    let error = self.with_refusals(error, before_attempt).await;
                    logged_failures.log(&self.name, &error);
                    self.set_health(|h| {
                        h.state = state;
                        h.last_error = Some(error);
                    });
                    self.attempted.send_replace(true);
                }
            }
            tokio::select! {
                () = tokio::time::sleep(backoff.next()) => {}
                () = self.shutdown.cancelled() => break,
            }
            self.set_health(|h| h.restarts += 1);
        }
        self.set_health(|h| {
            h.state = UpstreamState::Stopped;
            h.pid = None;
            h.protocol = None;
        });
        self.attempted.send_replace(true);
    }

    /// `why` the connection ended, with what the sandbox refused the server since `mark`
    /// (a server that failed for it says so on its way out).
    async fn with_refusals(&self, why: String, mark: u64) -> String {
        if self.config.command.is_none() {
            return why;
        }
        let refused = self.sandbox.refusals_since(mark, STDERR_SETTLES).await;
        match refused.as_slice() {
            [] => why,
            refused => format!("{why}; the sandbox refused {}", refused.join("; ")),
        }
    }

    async fn on_event(&self, event: UpstreamEvent) {
        match event {
            UpstreamEvent::ResourceUpdated(uri) => {
                let uri = resource_uri::expose(&self.name, self.config.rewrite_uris, &uri);
                let updated = ResourceNews::Updated {
                    server: self.name.clone(),
                    uri,
                    identity: self.identity().map(Arc::from),
                };
                let _ = self.resource_updates.send(updated);
            }
            refresh => self.refresh(&refresh, Announce::Always).await,
        }
    }

    /// When to read again the first of the live offer's lists whose `ttlMs` runs out
    /// (`None`: none does), and never sooner than [`offer::RELIST_AT_MOST_EVERY`] after
    /// the last time, `relisted`.
    fn relist_at(&self, relisted: Instant) -> Option<Instant> {
        let next = self.live()?.offer.fresh_until.next()?;
        Some(next.max(relisted + offer::RELIST_AT_MOST_EVERY))
    }

    /// Reads again the lists whose `ttlMs` ran out; clients hear of those that changed.
    async fn relist(&self) {
        let Some(live) = self.live() else { return };
        for stale in live.offer.fresh_until.stale(Instant::now()) {
            self.refresh(&stale, Announce::IfChanged).await;
        }
    }

    /// Reads the list `refresh` names again, and tells clients as `announce` says.
    async fn refresh(&self, refresh: &UpstreamEvent, announce: Announce) {
        let Some(live) = self.live() else { return };
        // The supervisor waits on this: an upstream that never answers must not hold it.
        let lister = offer::Lister {
            peer: &live.peer,
            lane: &live.lane,
            context: live.stateless.as_ref(),
        };
        let read = live.offer.refreshed(lister, refresh);
        let read = match tokio::time::timeout(CONNECT_TIMEOUT, read).await {
            Ok(read) => read.map_err(|e| e.to_string()),
            Err(_) => Err(format!("no answer within {CONNECT_TIMEOUT:?}")),
        };
        match read {
            Ok(offer) => {
                tracing::debug!(server = %self.name, ?refresh, "upstream offer refreshed");
                let kind = match refresh {
                    UpstreamEvent::PromptsChanged => ListKind::Prompts,
                    UpstreamEvent::ResourcesChanged => ListKind::Resources,
                    _ => ListKind::Tools,
                };
                let changed = match announce {
                    Announce::Always => true,
                    Announce::IfChanged => offer.differs(&live.offer, refresh),
                };
                self.set_live(Some(Arc::new(Live {
                    peer: live.peer.clone(),
                    offer,
                    pid: live.pid,
                    violation: live.violation.clone(),
                    unreachable: live.unreachable.clone(),
                    lane: live.lane.clone(),
                    stateless: live.stateless.clone(),
                    listens: live.listens.clone(),
                })));
                if changed {
                    let _ = self.downstream.announced.send((self.name.clone(), kind));
                }
            }
            Err(e) => tracing::warn!(server = %self.name, "refresh failed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::ServerConfig;
    use crate::relay::Downstream;

    #[test]
    fn the_wait_doubles_from_a_quarter_second_up_to_thirty_seconds() {
        let mut backoff = Backoff::new();
        let waits: Vec<u64> = (0..10).map(|_| backoff.next().as_millis() as u64).collect();
        assert_eq!(
            waits,
            [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
    }

    #[test]
    fn a_failure_is_logged_as_an_error_once_and_at_most_eight_kinds_are() {
        let mut logged = LoggedFailures::default();
        assert!(logged.log("s", "refused"));
        assert!(!logged.log("s", "refused"));
        for n in 1..LoggedFailures::AT_MOST {
            assert!(logged.log("s", &format!("port {n}")));
        }
        assert!(!logged.log("s", "one more kind"));
    }

    /// An upstream whose command does not exist, supervised on paused time.
    fn unstartable() -> Arc<Upstream> {
        let config = ServerConfig::stdio(
            "/nonexistent/mcp-server".into(),
            Vec::new(),
            BTreeMap::new(),
        );
        let (changed, _) = mpsc::unbounded_channel();
        let (updates, _) = mpsc::unbounded_channel();
        Upstream::start(
            "down",
            config,
            changed,
            updates,
            Arc::new(Downstream::default()),
            tokio_util::sync::CancellationToken::new(),
        )
    }

    /// Sleeps until `millis` after the test began (time is paused: it moves when every
    /// task waits).
    async fn at(start: tokio::time::Instant, millis: u64) {
        tokio::time::sleep_until(start + Duration::from_millis(millis)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_cannot_start_is_retried_with_a_growing_wait_until_stopped() {
        let start = tokio::time::Instant::now();
        let upstream = unstartable();
        upstream.first_attempt().await;
        let health = upstream.health();
        assert_eq!(health.state, UpstreamState::Failed);
        assert!(
            health
                .last_error
                .as_deref()
                .is_some_and(|e| e.contains("/nonexistent/mcp-server")),
            "{health:?}"
        );
        // Attempts at 0, 0.25, 0.75, 1.75, 3.75, 7.75, 15.75, 31.75, 61.75, 91.75 s.
        let restarts_at = [
            (200, 0),
            (300, 1),
            (700, 1),
            (800, 2),
            (1_700, 2),
            (1_800, 3),
            (31_700, 6),
            (31_800, 7),
            (61_700, 7),
            (61_800, 8),
            (91_800, 9),
        ];
        for (millis, restarts) in restarts_at {
            at(start, millis).await;
            assert_eq!(upstream.health().restarts, restarts, "at {millis} ms");
            assert_eq!(upstream.health().state, UpstreamState::Failed);
        }
        upstream.stop();
        at(start, 91_900).await;
        assert!(upstream.is_stopped());
        // No attempt after the stop.
        at(start, 200_000).await;
        assert_eq!(upstream.health().restarts, 9);
    }
}
