//! An HTTP request's head and body from fuzzer bytes: header lines `name: value` up to a
//! blank line, then the body. Lines that are no valid header are left out, as an HTTP
//! server would refuse them before any handler saw them.

use http::{HeaderMap, HeaderName, HeaderValue};

pub fn request(data: &[u8]) -> (HeaderMap, &[u8]) {
    let (head, body) = match data.windows(2).position(|pair| pair == b"\n\n") {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (data, &[][..]),
    };
    let mut headers = HeaderMap::new();
    for line in head.split(|byte| *byte == b'\n') {
        let Some(colon) = line.iter().position(|byte| *byte == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.trim_ascii()),
            HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    (headers, body)
}
