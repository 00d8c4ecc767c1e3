//! Stopping without losing an answer: on SIGTERM/SIGINT the gateway stops taking new
//! sessions and calls, and every request it already took is answered, and the answer
//! delivered to its client, before the sessions close.
//!
//! A request counts as *undelivered* from the moment a transport reads it until the
//! transport has handed its answer to the client: written to stdout (stdio), queued on
//! the session's event stream, which writes what is queued before it ends (legacy SSE),
//! or the whole `POST` response body written (streamable HTTP). Each transport holds a
//! [`Delivery`] for that span. [`Drain::run`] waits for none to be left, for up to the
//! grace period; then it cancels the calls still running (the upstreams get
//! `notifications/cancelled`, the clients an `ABORTED` result saying why) and gives those
//! answers [`CANCELLED_DELIVERY`] to go out too. Only then are the sessions closed.
//!
//! Calls made by a `run_code` program are part of the run that makes them: they are
//! never refused as new calls, and the run's own request covers their delivery.
//!
//! A client that got its answer usually has more to say before it lets go: an SDK may
//! list the tools to check the result against the tool's output schema, then ends its
//! session (`DELETE`, or closing its SSE stream), while its standalone stream stays
//! open. So once every answer is out, [`Drain::linger`] keeps the sessions and the
//! listener as they were during the drain (new sessions and calls refused, everything
//! else served) until their clients have closed the sessions, for up to [`LINGER`].
//!
//! Sessions still open after that are ended by the gateway ([`Drain::farewell`]): their
//! streams end, and for [`FAREWELL`] the listener still answers, telling each request
//! that names a session, such as an SDK's stream reconnecting, that its session is over
//! (404, which tells a client to start a new session), rather than leaving it to find
//! the port closed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

/// How long the answers of calls cancelled at the end of the grace period may take to
/// reach their clients before the sessions close anyway.
pub const CANCELLED_DELIVERY: Duration = Duration::from_secs(2);

/// How long the sessions stay open after the drain for their clients to close them.
pub const LINGER: Duration = Duration::from_secs(5);

/// How long the listener answers, after the gateway ended the sessions left open, that
/// they are over: longer than an SDK waits before it reconnects a stream that ended (the
/// official Python SDK's one second).
pub const FAREWELL: Duration = Duration::from_secs(2);

/// What a load balancer is told to wait before trying again, in seconds, when a new
/// session is refused during a drain.
pub const RETRY_AFTER_SECS: u64 = 5;

/// Why a new call is refused during a drain (UPSTREAM_UNAVAILABLE).
pub const REFUSED: &str = "the gateway is stopping and takes no new calls; retry on another \
                           instance or after it has restarted";

/// Why a call still running at the end of the grace period was cancelled (ABORTED).
pub const CUT: &str = "the gateway is stopping: the shutdown grace period ended before the call \
                       finished, so it was cancelled";

/// One request not yet answered to its client; dropping it says the answer went out (or
/// never can: the client left).
pub type Delivery = TaskTrackerToken;

/// One client session that its client closes (streamable HTTP after `initialize`, legacy
/// SSE); dropping it says the session ended.
pub type OpenSession = TaskTrackerToken;

/// The drain of one gateway process.
#[derive(Default)]
pub struct Drain {
    /// Set once, when the drain starts: new sessions and new client calls are refused.
    draining: AtomicBool,
    /// Every request read by a transport and not yet answered to its client.
    deliveries: TaskTracker,
    /// Parent of every call's cancellation; cancelled when the grace period ends.
    calls: CancellationToken,
    /// Every client session not yet closed.
    sessions: TaskTracker,
    /// Cancelled when the gateway ends the sessions left open after the linger.
    over: CancellationToken,
}

impl Drain {
    /// Whether the gateway is stopping (readiness is then reported as not ready).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Whether the grace period is over and the calls still running were cancelled.
    pub fn grace_over(&self) -> bool {
        self.calls.is_cancelled()
    }

    /// Counts one request as undelivered until the returned token is dropped.
    pub fn delivery(&self) -> Delivery {
        self.deliveries.token()
    }

    /// Counts one client session as open until the returned token is dropped.
    pub fn open_session(&self) -> OpenSession {
        self.sessions.token()
    }

    /// After the drain: waits for the clients to close their sessions, for up to
    /// [`LINGER`]; whether they all did.
    pub async fn linger(&self) -> bool {
        self.sessions.close();
        let closed = tokio::time::timeout(LINGER, self.sessions.wait())
            .await
            .is_ok();
        if !closed {
            tracing::info!(
                open = self.sessions.len(),
                "sessions still open {LINGER:?} after the drain; ending them"
            );
        }
        closed
    }

    /// After a linger that left sessions open: ends them (their streams end), then waits
    /// [`FAREWELL`], while requests that name a session are told it is over.
    ///
    /// A fixed wait rather than one for an event: the clients told here are those that
    /// come back within it (an SDK reconnecting the stream that just ended), and nothing
    /// the gateway can see says that the last of them has come; a client that never comes
    /// back must not hold the shutdown.
    pub async fn farewell(&self) {
        self.over.cancel();
        tokio::time::sleep(FAREWELL).await;
    }

    /// Whether the gateway ended the sessions left open after the linger.
    pub fn sessions_over(&self) -> bool {
        self.over.is_cancelled()
    }

    /// Cancelled when the gateway ends the sessions left open after the linger.
    pub fn sessions_over_token(&self) -> CancellationToken {
        self.over.clone()
    }

    /// A cancellation token for one call, cancelled when the grace period ends.
    pub fn call_token(&self) -> CancellationToken {
        self.calls.child_token()
    }

    /// Refuses new work from now on; what is in flight carries on.
    pub fn begin(&self) {
        self.draining.store(true, Ordering::Release);
        self.deliveries.close();
    }

    /// Begins the drain, waits for every request taken to be answered and delivered for
    /// up to `grace`, then cancels the calls still running and waits (up to
    /// [`CANCELLED_DELIVERY`]) for their answers to go out as well.
    pub async fn run(&self, grace: Duration) {
        self.begin();
        if tokio::time::timeout(grace, self.deliveries.wait())
            .await
            .is_ok()
        {
            return;
        }
        tracing::warn!(
            undelivered = self.deliveries.len(),
            "grace period over; cancelling the calls still in flight"
        );
        self.calls.cancel();
        if tokio::time::timeout(CANCELLED_DELIVERY, self.deliveries.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                undelivered = self.deliveries.len(),
                "answers still undelivered {CANCELLED_DELIVERY:?} after the cancellation; closing anyway"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    // Paused time: the clock moves only when the test advances it.
    #[tokio::test(start_paused = true)]
    async fn a_drain_waits_for_deliveries_and_cancels_calls_only_after_the_grace() {
        let drain = Drain::default();
        let delivered_late = drain.delivery();
        let call = drain.call_token();
        let mut run = Box::pin(drain.run(Duration::from_secs(1)));
        assert!((&mut run).now_or_never().is_none());
        assert!(drain.is_draining());
        // A request read during the drain (refused, but answered) is waited for too.
        let refused = drain.delivery();
        drop(refused);
        tokio::time::advance(Duration::from_millis(999)).await;
        assert!(
            (&mut run).now_or_never().is_none(),
            "the drain ended with a request undelivered"
        );
        assert!(
            !call.is_cancelled(),
            "cancelled before the grace period ended"
        );
        // Past the grace period, within the time the cancelled answers get.
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!((&mut run).now_or_never().is_none());
        assert!(call.is_cancelled() && drain.grace_over());
        drop(delivered_late);
        assert!(
            run.now_or_never().is_some(),
            "the drain went on after the last answer went out"
        );
    }

    #[tokio::test]
    async fn a_drain_with_nothing_in_flight_ends_at_once() {
        let drain = Drain::default();
        let call = drain.call_token();
        assert!(
            drain.run(Duration::from_secs(60)).now_or_never().is_some(),
            "the drain waited with nothing in flight"
        );
        assert!(!call.is_cancelled());
    }
}
