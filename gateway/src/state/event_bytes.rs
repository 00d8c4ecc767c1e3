//! The bound on what the events of every stream together may take (`max_event_bytes`),
//! kept alike by both stores: each event kept is charged its size, with what keeping it
//! costs, in one queue across streams, oldest first; past the bound the oldest are let
//! go. An event larger than the bound by itself is not kept at all: it would push out
//! every other. The memory store keeps it for its process, Redis's writer for the events
//! its replica wrote; each marks a stream whose event was let go, so that a replay from
//! before it is told events are missing.

use std::collections::VecDeque;

/// What keeping one event costs beyond its entry and its stream's name: its place in its
/// stream and in the queue of every event.
const EVENT_OVERHEAD: usize = 64;

/// The events kept, in the order they were kept, across streams named by `S`.
pub(super) struct EventBytes<S> {
    max: usize,
    kept: VecDeque<Kept<S>>,
    /// What the events in `kept` are charged, together.
    used: usize,
}

struct Kept<S> {
    stream: S,
    sequence: u64,
    bytes: usize,
}

/// Nothing may be kept: a bound is set with [`EventBytes::new`].
impl<S> Default for EventBytes<S> {
    fn default() -> Self {
        Self::new(0)
    }
}

impl<S> EventBytes<S> {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            kept: VecDeque::new(),
            used: 0,
        }
    }

    /// What an event of `entry` bytes in a stream named in `name` bytes is charged;
    /// `None` when it alone is past the bound, and so is not kept.
    pub fn charge(&self, name: usize, entry: usize) -> Option<usize> {
        let bytes = name + entry + EVENT_OVERHEAD;
        (bytes <= self.max).then_some(bytes)
    }

    /// Charges event `sequence` of `stream`, kept, `bytes` (see [`Self::charge`]), and
    /// lets go of the oldest events until those kept are within the bound: each is
    /// yielded for its store to remove.
    pub fn keep(
        &mut self,
        stream: S,
        sequence: u64,
        bytes: usize,
    ) -> impl Iterator<Item = (S, u64)> + '_ {
        self.kept.push_back(Kept {
            stream,
            sequence,
            bytes,
        });
        self.used += bytes;
        std::iter::from_fn(move || {
            if self.used <= self.max {
                return None;
            }
            let oldest = self.kept.pop_front()?;
            self.used -= oldest.bytes;
            Some((oldest.stream, oldest.sequence))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_events_of_any_stream_go_first_and_one_too_large_alone_is_not_kept() {
        let mut bytes = EventBytes::new(3 * (1 + 10 + EVENT_OVERHEAD));
        let each = bytes.charge(1, 10).unwrap();
        assert!(bytes.keep("a", 1, each).next().is_none());
        assert!(bytes.keep("b", 1, each).next().is_none());
        assert!(bytes.keep("a", 2, each).next().is_none());
        assert_eq!(bytes.keep("b", 2, each).collect::<Vec<_>>(), [("a", 1)]);
        let larger = bytes.charge(1, 10 + 2 * each).unwrap();
        assert_eq!(
            bytes.keep("c", 1, larger).collect::<Vec<_>>(),
            [("b", 1), ("a", 2), ("b", 2)]
        );
        assert_eq!(bytes.charge(1, 11 + 2 * each), None);
    }
}
