//! Turns between client sessions on one upstream, for the tools that ask their client
//! something during a call.
//!
//! Over stdio and legacy SSE nothing on the wire says which call an upstream's request
//! (sampling, elicitation, roots) belongs to: the relay can only tell when every call in
//! flight on that upstream comes from one session. So a tool seen asking its client in a
//! call that nothing on the wire identified is remembered, and from then on its calls take
//! turns: one starts only when no other session has calls in flight on that upstream, and
//! other sessions' calls wait until it is over (a session waiting for its turn goes before
//! later calls of other sessions, so it is not starved). Calls of one session never wait
//! for each other, and tools never seen asking run side by side as before. A wait is part
//! of the call: the tool's timeout and the client's cancellation end it.
//!
//! The first time a tool asks while several sessions have calls in flight, its request
//! cannot be attributed and the upstream gets an error; the tool is remembered then too, so
//! it happens once per tool and upstream connection.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// The turn-taking state of one upstream.
#[derive(Default)]
pub struct Turns {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Default)]
struct State {
    /// Tools (the upstream's names) seen asking their client.
    asking: HashSet<String>,
    /// Calls started, per session.
    running: HashMap<Arc<str>, usize>,
    /// The session whose calls of asking tools are running, and how many.
    turn: Option<(Arc<str>, usize)>,
    /// Sessions waiting for a turn, and how many of their calls wait.
    waiting: HashMap<Arc<str>, usize>,
}

impl State {
    fn may_start(&self, session: &Arc<str>, asking: bool) -> bool {
        let mine = |other: &Arc<str>| other == session;
        let free = self.turn.as_ref().is_none_or(|(holder, _)| mine(holder));
        if asking {
            free && self.running.keys().all(mine)
        } else {
            // A session already running calls is not held back by another's wait: one of
            // its calls may be waiting for this one (a client that calls while answering).
            free && (self.waiting.keys().all(mine) || self.running.contains_key(session))
        }
    }
}

impl Turns {
    /// Remembers that `tools` ask their client; returns those that were new.
    pub fn learn<'a>(&self, tools: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut state = self.lock();
        tools
            .into_iter()
            .filter(|tool| state.asking.insert((*tool).to_owned()))
            .map(str::to_owned)
            .collect()
    }

    /// Whether `tool` is known to ask its client.
    pub fn asks(&self, tool: &str) -> bool {
        self.lock().asking.contains(tool)
    }

    /// Waits until a call of `tool` from `session` may start, and starts it: the call
    /// counts as running until the returned [`Turn`] is dropped.
    pub async fn start(self: &Arc<Self>, tool: &str, session: &Arc<str>) -> Turn {
        let mut queued: Option<Queued<'_>> = None;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                let asking = state.asking.contains(tool);
                if state.may_start(session, asking) {
                    if let Some(queued) = queued.as_mut() {
                        queued.armed = false;
                        unqueue(&mut state, session);
                    }
                    *state.running.entry(session.clone()).or_default() += 1;
                    if asking {
                        state.turn.get_or_insert_with(|| (session.clone(), 0)).1 += 1;
                    }
                    drop(state);
                    return Turn {
                        turns: self.clone(),
                        session: session.clone(),
                        asking,
                    };
                }
                if asking && queued.is_none() {
                    *state.waiting.entry(session.clone()).or_default() += 1;
                    queued = Some(Queued {
                        turns: self,
                        session,
                        armed: true,
                    });
                }
            }
            notified.await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn unqueue(state: &mut State, session: &Arc<str>) {
    if let Some(count) = state.waiting.get_mut(session) {
        *count -= 1;
        if *count == 0 {
            state.waiting.remove(session);
        }
    }
}

/// Takes a waiting call out of the queue when its wait is abandoned (the call was
/// cancelled or timed out while waiting for its turn).
struct Queued<'a> {
    turns: &'a Turns,
    session: &'a Arc<str>,
    /// False once the call started (and left the queue itself).
    armed: bool,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        if self.armed {
            unqueue(&mut self.turns.lock(), self.session);
            self.turns.changed.notify_waiters();
        }
    }
}

/// A started call; dropping it ends the call's part in the turn-taking.
pub struct Turn {
    turns: Arc<Turns>,
    session: Arc<str>,
    asking: bool,
}

impl Drop for Turn {
    fn drop(&mut self) {
        {
            let mut state = self.turns.lock();
            if let Some(count) = state.running.get_mut(&self.session) {
                *count -= 1;
                if *count == 0 {
                    state.running.remove(&self.session);
                }
            }
            if self.asking
                && let Some((_, count)) = state.turn.as_mut()
            {
                *count -= 1;
                if *count == 0 {
                    state.turn = None;
                }
            }
        }
        self.turns.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    fn session(name: &str) -> Arc<str> {
        name.into()
    }

    /// The call, when it may start now. A call that may start does so in its first poll;
    /// one that must wait is dropped after it, as a call whose wait is abandoned.
    fn started(turns: &Arc<Turns>, tool: &str, who: &Arc<str>) -> Option<Turn> {
        turns.start(tool, who).now_or_never()
    }

    #[test]
    fn unknown_tools_run_side_by_side() {
        let turns = Arc::new(Turns::default());
        let a = started(&turns, "t", &session("a"));
        let b = started(&turns, "t", &session("b"));
        assert!(a.is_some() && b.is_some());
    }

    #[test]
    fn an_asking_tool_waits_for_other_sessions_and_holds_them_off() {
        let turns = Arc::new(Turns::default());
        assert_eq!(turns.learn(["sample"]), vec!["sample".to_owned()]);
        assert!(turns.learn(["sample"]).is_empty(), "learned once");
        let (a, b) = (session("a"), session("b"));
        let other = started(&turns, "plain", &b).unwrap();
        assert!(
            started(&turns, "sample", &a).is_none(),
            "b has a call in flight"
        );
        drop(other);
        let turn = started(&turns, "sample", &a).unwrap();
        assert!(
            started(&turns, "plain", &a).is_some(),
            "a's own calls go on"
        );
        assert!(started(&turns, "plain", &b).is_none(), "a has the turn");
        assert!(started(&turns, "sample", &b).is_none());
        drop(turn);
        assert!(started(&turns, "sample", &b).is_some());
    }

    #[test]
    fn a_waiting_session_goes_before_later_calls_and_an_abandoned_wait_is_forgotten() {
        let turns = Arc::new(Turns::default());
        turns.learn(["sample"]);
        let (a, b, c) = (session("a"), session("b"), session("c"));
        let running = started(&turns, "plain", &b).unwrap();
        // Polled once, the call of `a` queues for its turn, and waits.
        let mut waiting = Box::pin(turns.start("sample", &a));
        assert!(
            (&mut waiting).now_or_never().is_none(),
            "b has a call in flight"
        );
        assert!(started(&turns, "plain", &c).is_none(), "a is waiting");
        assert!(
            started(&turns, "plain", &b).is_some(),
            "b's own calls go on"
        );
        // Dropped unfinished: the call was cancelled while waiting.
        drop(waiting);
        assert!(started(&turns, "plain", &c).is_some(), "a gave up waiting");
        drop(running);
    }
}
