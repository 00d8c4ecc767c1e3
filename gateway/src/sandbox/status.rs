//! What is known of a stdio server's confinement while it runs: the rules of its last
//! start, and what its stderr said the sandbox refused it (logged once per start, kept
//! for `/healthz` and for the reason the server ended).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::Confinement;
use super::refusals::Explained;

/// What is known of one server's confinement while it runs: the rules of its last start,
/// the refusals its stderr reported, and when its stderr last closed.
#[derive(Debug, Clone, Default)]
pub struct Status(Arc<StatusInner>);

#[derive(Debug, Default)]
struct StatusInner {
    applied: Mutex<Option<Confinement>>,
    refusals: Mutex<Refusals>,
    /// How many times it was started.
    starts: AtomicU64,
    /// How many of its stderr streams have closed (one per start).
    stderr_closed: watch::Sender<u64>,
}

/// The refusals seen, newest last, each once per start.
#[derive(Debug, Default)]
struct Refusals {
    recent: VecDeque<Refusal>,
    /// How many have been recorded.
    seen: u64,
    /// The start whose refusals are being logged, and how many of them were.
    logging: (u64, usize),
}

#[derive(Debug)]
struct Refusal {
    /// Its number among those recorded.
    number: u64,
    /// The start it happened in (how many starts there had been).
    start: u64,
    text: String,
}

/// How many refusals `/healthz` keeps per server.
const RECENT_REFUSALS: usize = 8;

/// How many refusals are logged per start: a server that walks a tree it may not read
/// must not flood the log.
const LOGGED_PER_START: usize = 20;

impl Status {
    /// The confinement of the last start (with its recent refusals), `None` before one.
    pub fn snapshot(&self) -> Option<Confinement> {
        let mut confinement = lock(&self.0.applied).clone()?;
        confinement.refused = lock(&self.0.refusals)
            .recent
            .iter()
            .map(|refusal| refusal.text.clone())
            .collect();
        Some(confinement)
    }

    /// A start under `confinement`.
    pub fn started(&self, confinement: Confinement) {
        *lock(&self.0.applied) = Some(confinement);
        self.0.starts.fetch_add(1, Ordering::Relaxed);
    }

    /// Records (and logs, once per start) what the sandbox refused `server`.
    pub fn refused(&self, server: &str, explained: &Explained) {
        let text = explained.to_string();
        let mut refusals = lock(&self.0.refusals);
        let start = self.0.starts.load(Ordering::Relaxed);
        if refusals
            .recent
            .iter()
            .any(|seen| seen.start == start && seen.text == text)
        {
            return;
        }
        if refusals.logging.0 != start {
            refusals.logging = (start, 0);
        }
        refusals.logging.1 += 1;
        match refusals.logging.1 {
            logged if logged <= LOGGED_PER_START => {
                tracing::warn!(target: "sandbox", server, "the sandbox refused {text}");
            }
            logged if logged == LOGGED_PER_START + 1 => {
                tracing::warn!(target: "sandbox", server, "the sandbox refused more; the rest of this start's refusals are not logged (/healthz keeps the last {RECENT_REFUSALS})");
            }
            _ => {}
        }
        refusals.seen += 1;
        let number = refusals.seen;
        refusals.recent.push_back(Refusal {
            number,
            start,
            text,
        });
        if refusals.recent.len() > RECENT_REFUSALS {
            refusals.recent.pop_front();
        }
    }

    /// A mark to ask [`Self::refusals_since`] about later.
    pub fn mark(&self) -> u64 {
        lock(&self.0.refusals).seen
    }

    /// A stderr stream of the server closed (it exited).
    pub fn stderr_closed(&self) {
        self.0.stderr_closed.send_modify(|closed| *closed += 1);
    }

    /// The refusals reported since `mark`, once the stderr of every start so far has
    /// closed (what a server writes as it dies arrives after its stdout closed), waiting
    /// at most `bound`.
    pub async fn refusals_since(&self, mark: u64, bound: Duration) -> Vec<String> {
        let starts = self.0.starts.load(Ordering::Relaxed);
        let mut closed = self.0.stderr_closed.subscribe();
        let _ = tokio::time::timeout(bound, closed.wait_for(|closed| *closed >= starts)).await;
        lock(&self.0.refusals)
            .recent
            .iter()
            .filter(|refusal| refusal.number > mark)
            .map(|refusal| refusal.text.clone())
            .collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::super::refusals::{Explained, RefusedAccess};
    use super::*;

    fn refusal(path: &str) -> Explained {
        Explained {
            refused: RefusedAccess::Reach(path.into()),
            setting: None,
            remedy: "read = [..]".into(),
        }
    }

    #[tokio::test]
    async fn a_refusal_counts_once_per_start_and_the_last_ones_are_kept() {
        let status = Status::default();
        status.started(Confinement::off());
        let mark = status.mark();
        for _ in 0..3 {
            status.refused("s", &refusal("/a"));
        }
        status.refused("s", &refusal("/b"));
        status.stderr_closed();
        let since = status.refusals_since(mark, Duration::from_millis(10)).await;
        assert_eq!(since.len(), 2, "{since:?}");
        assert!(
            since[0].contains("/a") && since[1].contains("/b"),
            "{since:?}"
        );
        // The next start sees the same refusal anew; the snapshot keeps the last eight.
        status.started(Confinement::off());
        let mark = status.mark();
        for n in 0..30 {
            status.refused("s", &refusal(&format!("/n{n}")));
        }
        status.stderr_closed();
        let since = status.refusals_since(mark, Duration::from_secs(5)).await;
        assert_eq!(since.len(), RECENT_REFUSALS);
        assert!(since.last().unwrap().contains("/n29"), "{since:?}");
        assert_eq!(status.snapshot().unwrap().refused.len(), RECENT_REFUSALS);
    }
}
