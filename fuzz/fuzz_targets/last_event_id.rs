//! `Last-Event-ID` as a client may send it: anything. What reads as an event of a stream
//! names its replica, session and sequence, and an id tagged with a request gives that
//! request back when tagged again.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::event_id::{LastEventId, event_id, parse_event_id, tag};

fuzz_target!(|data: &[u8]| {
    let header = String::from_utf8_lossy(data);
    let Some(read) = LastEventId::parse(&header) else {
        return;
    };
    assert_eq!(
        parse_event_id(read.stored),
        Some((read.stream, read.sequence))
    );
    assert_eq!(
        read.stream.splitn(3, ':').take(2).collect::<Vec<_>>(),
        [read.origin, read.session]
    );
    let canonical = event_id(read.stream, read.sequence);
    assert_eq!(
        LastEventId::parse(&canonical).map(|again| (again.stream, again.sequence)),
        Some((read.stream, read.sequence))
    );
    if let Some(request) = &read.request {
        let again = tag(read.stored, request);
        let reread = LastEventId::parse(&again).expect("a tagged id reads again");
        assert_eq!(reread.request.as_ref(), Some(request));
        assert_eq!(reread.stored, read.stored);
    }
});
