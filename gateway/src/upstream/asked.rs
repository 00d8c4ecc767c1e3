//! The requests a server of 2026-07-28 sent its client during a lane's calls, while the
//! lane has them relayed ([`crate::upstream::client::StreamRequests`]), so that the
//! server can withdraw them.
//!
//! rmcp cancels a request it relays itself when the server sends `notifications/cancelled`
//! for it; the lane's it never sees, and a server of 2026-07-28 cancelling anything is to
//! rmcp the end of a `subscriptions/listen`. So the lane enters each request it relays
//! under the server's request id (over HTTP, with the call whose stream it came on: each
//! request there may number its questions from the start), with the token its relaying
//! watches ([`rmcp::service::RequestContext::ct`]); a cancellation the lane reads for one
//! of them cancels that token, and the client is told in turn. The entry goes when the
//! relaying ends, answered or cancelled.
//!
//! A request also ends with what it was asked for: once its call ends (the server
//! answered it, or it was cancelled or failed), the server has nobody left to read the
//! answer, so the lane withdraws the requests still open then ([`Asked::withdraw_call`];
//! over stdio, where nothing says which call a request is for, once the lane has no
//! calls in flight: [`Asked::withdraw_all`]), and every one when the connection ends. The
//! client is told each time, as when the server withdraws a request itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{JsonRpcMessage, RequestId, ServerJsonRpcMessage, ServerNotification};
use tokio_util::sync::CancellationToken;

/// The requests being relayed on one connection.
#[derive(Default)]
pub struct Asked {
    entries: Mutex<HashMap<Key, Entry>>,
    /// Tells an entry from a later one under the same key.
    serial: AtomicU64,
}

/// A relayed request: the call whose stream it came on (none over stdio), and its id.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    stream: Option<RequestId>,
    id: RequestId,
}

struct Entry {
    serial: u64,
    cancel: CancellationToken,
}

impl Asked {
    /// Enters the request `id`, which came on the stream of the call `stream` (`None`
    /// where the transport does not say); it stays until the returned [`Asking`] drops.
    pub fn enter(self: &Arc<Self>, stream: Option<RequestId>, id: RequestId) -> Asking {
        let key = Key { stream, id };
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        let cancel = CancellationToken::new();
        let entry = Entry {
            serial,
            cancel: cancel.clone(),
        };
        self.lock().insert(key.clone(), entry);
        Asking {
            asked: Arc::clone(self),
            key,
            serial,
            cancel,
        }
    }

    /// Cancels the relaying of the request `id` the server withdrew, read on the stream
    /// of the call `stream` (`None`: where the transport does not say, or not on a call's
    /// stream). A request of that call first; else the one request of that id in flight,
    /// if only one is. False when none is cancelled: the cancellation is not the lane's.
    pub fn withdraw(&self, stream: Option<&RequestId>, id: &RequestId) -> bool {
        let entries = self.lock();
        let key = Key {
            stream: stream.cloned(),
            id: id.clone(),
        };
        let entry = entries.get(&key).or_else(|| {
            let mut of_that_id = entries.iter().filter(|(key, _)| key.id == *id);
            match (of_that_id.next(), of_that_id.next()) {
                (Some((_, entry)), None) => Some(entry),
                _ => None,
            }
        });
        match entry {
            Some(entry) => {
                entry.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Withdraws the requests that came on the stream of the call `stream`, which ended.
    pub fn withdraw_call(&self, stream: &RequestId) {
        for (key, entry) in self.lock().iter() {
            if key.stream.as_ref() == Some(stream) {
                entry.cancel.cancel();
            }
        }
    }

    /// Withdraws every request being relayed: the calls they came during, or the
    /// connection, ended.
    pub fn withdraw_all(&self) {
        for entry in self.lock().values() {
            entry.cancel.cancel();
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A request being relayed: its token, and its entry until dropped.
pub struct Asking {
    asked: Arc<Asked>,
    key: Key,
    serial: u64,
    cancel: CancellationToken,
}

impl Asking {
    /// Cancelled when the server withdraws the request.
    pub fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        let mut entries = self.asked.lock();
        if entries
            .get(&self.key)
            .is_some_and(|entry| entry.serial == self.serial)
        {
            entries.remove(&self.key);
        }
    }
}

/// The request `message` withdraws, when it is `notifications/cancelled` naming one.
pub fn withdrawn(message: &ServerJsonRpcMessage) -> Option<&RequestId> {
    match message {
        JsonRpcMessage::Notification(notification) => match &notification.notification {
            ServerNotification::CancelledNotification(cancelled) => {
                cancelled.params.request_id.as_ref()
            }
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::NumberOrString;

    use super::*;

    fn id(name: &str) -> RequestId {
        NumberOrString::String(name.into())
    }

    #[test]
    fn a_withdrawn_request_is_cancelled_and_forgotten_once_relayed() {
        let asked = Arc::new(Asked::default());
        let asking = asked.enter(None, id("ask-1"));
        let other = asked.enter(None, id("ask-2"));
        assert!(asked.withdraw(None, &id("ask-1")));
        assert!(asking.cancellation().is_cancelled());
        assert!(!other.cancellation().is_cancelled());
        assert!(!asked.withdraw(None, &id("ask-3")), "not the lane's");
        drop(asking);
        assert!(!asked.withdraw(None, &id("ask-1")), "forgotten");
        drop(other);
        assert!(asked.lock().is_empty());
    }

    #[test]
    fn a_calls_stream_withdraws_its_own_request_of_an_id_others_share() {
        let asked = Arc::new(Asked::default());
        let first = asked.enter(Some(id("call-1")), id("ask-1"));
        let second = asked.enter(Some(id("call-2")), id("ask-1"));
        // Off any call's stream, an id two calls share names neither.
        assert!(!asked.withdraw(None, &id("ask-1")));
        assert!(asked.withdraw(Some(&id("call-2")), &id("ask-1")));
        assert!(!first.cancellation().is_cancelled());
        assert!(second.cancellation().is_cancelled());
        drop(second);
        // Once it is the only one, it is found from anywhere.
        assert!(asked.withdraw(Some(&id("call-3")), &id("ask-1")));
        assert!(first.cancellation().is_cancelled());
    }

    #[test]
    fn a_calls_end_withdraws_its_own_requests_only() {
        let asked = Arc::new(Asked::default());
        let first = asked.enter(Some(id("call-1")), id("ask-1"));
        let second = asked.enter(Some(id("call-1")), id("ask-2"));
        let other = asked.enter(Some(id("call-2")), id("ask-1"));
        asked.withdraw_call(&id("call-1"));
        assert!(first.cancellation().is_cancelled());
        assert!(second.cancellation().is_cancelled());
        assert!(!other.cancellation().is_cancelled());
        asked.withdraw_all();
        assert!(other.cancellation().is_cancelled());
        drop((first, second, other));
        assert!(asked.lock().is_empty(), "nothing left once relaying ends");
    }

    #[test]
    fn a_later_request_under_the_same_key_outlives_the_earlier_ones_entry() {
        let asked = Arc::new(Asked::default());
        let earlier = asked.enter(None, id("ask-1"));
        let later = asked.enter(None, id("ask-1"));
        drop(earlier);
        assert!(asked.withdraw(None, &id("ask-1")));
        assert!(later.cancellation().is_cancelled());
    }
}
