//! The ids of the events of resumable streams (streamable HTTP), and the `Last-Event-ID`
//! a client resumes with, which is one of them, or anything at all.
//!
//! An event id is `<stream>/<sequence>`, so the stream is found again from the id alone.
//! A stream's name is `<replica>:<session>:<part>`: the replica that writes it, the
//! session it belongs to (only that session's client may resume it), and `common` for the
//! session's standalone stream or the hex of the JSON of the request it answers. An event
//! of a request's stream carries that request's id too, as `#<hex of the id's JSON>`
//! after the stored id ([`tag`]), so that a resumption knows which request to answer
//! when the replica serving it died.

use rmcp::model::RequestId;

/// The last part of a session's standalone stream name.
const STANDALONE: &str = "common";

/// The id of event `sequence` of `stream`.
pub fn event_id(stream: &str, sequence: u64) -> String {
    format!("{stream}/{sequence}")
}

/// The stream and sequence number of an event id.
pub fn parse_event_id(id: &str) -> Option<(&str, u64)> {
    let (stream, sequence) = id.rsplit_once('/')?;
    Some((stream, sequence.parse().ok()?))
}

/// The name of the stream of the answer to `request` in `session`, written by `replica`.
pub fn request_stream(replica: &str, session: &str, request: &RequestId) -> String {
    let key = hex(&serde_json::to_string(request).unwrap_or_default());
    format!("{replica}:{session}:{key}")
}

/// The name of `session`'s standalone stream, written by `replica`.
pub fn standalone_stream(replica: &str, session: &str) -> String {
    format!("{replica}:{session}:{STANDALONE}")
}

/// `event_id` tagged with the request its stream answers.
pub fn tag(event_id: &str, request: &RequestId) -> String {
    let json = serde_json::to_string(request).unwrap_or_default();
    format!("{event_id}#{}", hex(&json))
}

/// A `Last-Event-ID` read: the event it names, and where that event's stream came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastEventId<'a> {
    /// The id as stored (without the request's tag).
    pub stored: &'a str,
    /// The stream, `<origin>:<session>:<part>`.
    pub stream: &'a str,
    pub sequence: u64,
    /// The replica that wrote the stream.
    pub origin: &'a str,
    /// The session the stream belongs to.
    pub session: &'a str,
    /// The request the stream answers, when the id was tagged with a readable one.
    pub request: Option<RequestId>,
}

impl<'a> LastEventId<'a> {
    /// Reads what a client sent as `Last-Event-ID`; `None` when it names no event of any
    /// stream this gateway writes: the three parts of a stream's name are made of ASCII
    /// letters, digits and `-` only, so an id the gateway wrote reads one way only.
    pub fn parse(header: &'a str) -> Option<Self> {
        let (stored, request) = untag(header);
        let (stream, sequence) = parse_event_id(stored)?;
        let name_part = |part: &&str| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
        };
        let mut parts = stream.split(':');
        let (Some(origin), Some(session), Some(_), None) = (
            parts.next().filter(name_part),
            parts.next().filter(name_part),
            parts.next().filter(name_part),
            parts.next(),
        ) else {
            return None;
        };
        Some(Self {
            stored,
            stream,
            sequence,
            origin,
            session,
            request,
        })
    }
}

fn hex(text: &str) -> String {
    text.bytes().map(|byte| format!("{byte:02x}")).collect()
}

/// The stored event id and the request of a (possibly tagged) event id.
fn untag(event_id: &str) -> (&str, Option<RequestId>) {
    let Some((stored, hex)) = event_id.rsplit_once('#') else {
        return (event_id, None);
    };
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    let request = bytes.and_then(|bytes| serde_json::from_slice(&bytes).ok());
    (stored, request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_id_carries_its_request_and_gives_it_back() {
        for request in [
            RequestId::Number(7),
            RequestId::String("a#b/\"c\"\nü".into()),
        ] {
            let tagged = tag("replica:stream/3", &request);
            assert!(tagged.is_ascii() && !tagged.contains('\n'), "{tagged}");
            assert_eq!(untag(&tagged), ("replica:stream/3", Some(request)));
        }
        assert_eq!(untag("replica:stream/3"), ("replica:stream/3", None));
        assert_eq!(untag("replica:stream/3#zz"), ("replica:stream/3", None));
    }

    #[test]
    fn a_last_event_id_names_its_replica_session_and_request() {
        let request = RequestId::String("r/1:x".into());
        let stream = request_stream("rep", "sess", &request);
        let id = tag(&event_id(&stream, 4), &request);
        let read = LastEventId::parse(&id).unwrap();
        assert_eq!(
            (read.origin, read.session, read.sequence, read.stream),
            ("rep", "sess", 4, stream.as_str())
        );
        assert_eq!(read.request, Some(request));
        let standalone = event_id(&standalone_stream("rep", "sess"), 0);
        assert_eq!(LastEventId::parse(&standalone).unwrap().request, None);
        // What the fuzzer found (fuzz/seeds/last_event_id/ambiguous_stream.txt): a `#`
        // or `/` inside a stream's name made an id read as another stream once tagged.
        assert_eq!(
            LastEventId::parse("0123abcd:0123456789abcdabcdef:18/4#37cdef:18/4#37"),
            None
        );
        for garbage in [
            "",
            "/",
            "a:b/1",
            "a:b:c/x",
            "a:b:c/-1",
            "#",
            "a:b:c:d/1",
            "a::c/1",
            "a:b:c d/1",
        ] {
            assert_eq!(LastEventId::parse(garbage), None, "{garbage}");
        }
        let bad_tag = LastEventId::parse("a:b:c/1#ff").unwrap();
        assert_eq!((bad_tag.stored, bad_tag.request), ("a:b:c/1", None));
    }
}
