//! Which of the program's tool calls may start now.
//!
//! Calls arrive in program order. Concurrency-safe calls overlap, at most
//! `max_parallel_sub_calls` at a time; an exclusive call is a barrier: it starts only when
//! every earlier call has finished, and no later call starts until it has. This is pure
//! bookkeeping; the run loop starts what [`Scheduler::start_next`] hands out.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

/// A call waiting to start.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QueuedCall {
    pub(crate) id: u64,
    pub(crate) tool: String,
    pub(crate) args: Value,
    /// Concurrency-safe (may overlap) or exclusive (a barrier).
    pub(crate) safe: bool,
}

#[derive(Debug)]
pub(crate) struct Scheduler {
    max_parallel: usize,
    queue: VecDeque<QueuedCall>,
    /// Running calls: id → concurrency-safe.
    running: HashMap<u64, bool>,
}

impl Scheduler {
    pub(crate) fn new(max_parallel: usize) -> Self {
        Self {
            max_parallel: max_parallel.max(1),
            queue: VecDeque::new(),
            running: HashMap::new(),
        }
    }

    pub(crate) fn push(&mut self, call: QueuedCall) {
        self.queue.push_back(call);
    }

    /// Calls waiting to start.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The next call that may start now, marked running; `None` if the head of the queue
    /// must wait (or nothing is queued).
    pub(crate) fn start_next(&mut self) -> Option<QueuedCall> {
        let front = self.queue.front()?;
        let barrier_running = self.running.values().any(|safe| !safe);
        let may_start = if front.safe {
            !barrier_running && self.running.len() < self.max_parallel
        } else {
            self.running.is_empty()
        };
        if !may_start {
            return None;
        }
        let call = self.queue.pop_front()?;
        self.running.insert(call.id, call.safe);
        Some(call)
    }

    /// Call `id` finished; unknown ids are ignored.
    pub(crate) fn finish(&mut self, id: u64) {
        self.running.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: u64, safe: bool) -> QueuedCall {
        QueuedCall {
            id,
            tool: format!("t{id}"),
            args: Value::Null,
            safe,
        }
    }

    fn start_all(s: &mut Scheduler) -> Vec<u64> {
        std::iter::from_fn(|| s.start_next())
            .map(|c| c.id)
            .collect()
    }

    #[test]
    fn safe_calls_overlap_up_to_the_limit() {
        let mut s = Scheduler::new(3);
        (1..=5).for_each(|id| s.push(call(id, true)));
        assert_eq!(start_all(&mut s), [1, 2, 3]);
        s.finish(2);
        assert_eq!(start_all(&mut s), [4]);
        s.finish(1);
        s.finish(3);
        assert_eq!(start_all(&mut s), [5]);
        assert_eq!(s.queued(), 0);
    }

    #[test]
    fn one_means_serial() {
        let mut s = Scheduler::new(1);
        (1..=3).for_each(|id| s.push(call(id, true)));
        assert_eq!(start_all(&mut s), [1]);
        s.finish(1);
        assert_eq!(start_all(&mut s), [2]);
    }

    #[test]
    fn exclusive_calls_are_barriers() {
        let mut s = Scheduler::new(10);
        s.push(call(1, true));
        s.push(call(2, true));
        s.push(call(3, false));
        s.push(call(4, true));
        // The exclusive call waits for both earlier calls, and holds back the later one.
        assert_eq!(start_all(&mut s), [1, 2]);
        s.finish(1);
        assert_eq!(start_all(&mut s), Vec::<u64>::new());
        s.finish(2);
        assert_eq!(start_all(&mut s), [3]);
        assert_eq!(start_all(&mut s), Vec::<u64>::new());
        s.finish(3);
        assert_eq!(start_all(&mut s), [4]);
    }

    #[test]
    fn exclusive_calls_run_one_at_a_time() {
        let mut s = Scheduler::new(10);
        s.push(call(1, false));
        s.push(call(2, false));
        assert_eq!(start_all(&mut s), [1]);
        s.finish(1);
        assert_eq!(start_all(&mut s), [2]);
    }

    #[test]
    fn zero_parallelism_still_makes_progress() {
        let mut s = Scheduler::new(0);
        s.push(call(1, true));
        assert_eq!(start_all(&mut s), [1]);
    }
}
