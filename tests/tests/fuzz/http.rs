//! The HTTP listener under hostile requests: any method, path, header and body, on fresh
//! connections, next to a live streamable HTTP session and a live SSE session whose ids
//! the requests may name.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use mcp_gateway_tests::{action_result, http_get, http_request, python_client, rss_mib};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::json;

use crate::input::frame;
use crate::stdio::kv_workspace;
use crate::{ANSWER_WITHIN, fail, run_property};

/// How one raw exchange ended.
#[derive(Debug, PartialEq)]
enum HttpOutcome {
    /// A status line came back.
    Status(u16),
    /// The server closed the connection without a status line.
    Closed,
    /// Nothing within the deadline.
    Hung,
}

/// Sends `head` and `body` on a fresh connection and reads until the end of the response
/// head (the body of a stream need not end). With `end`, the write side is shut after the
/// body, so a server waiting for more of the request sees there is none.
fn exchange(address: SocketAddr, head: &[u8], body: &[u8], end: bool) -> HttpOutcome {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
    stream.set_write_timeout(Some(ANSWER_WITHIN)).unwrap();
    // The server may answer (413, 400) before reading the whole body.
    let _ = stream.write_all(head).and_then(|()| stream.write_all(body));
    if end {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    let mut raw = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&chunk[..n]);
                if raw.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return HttpOutcome::Hung;
            }
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&raw);
    match text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
    {
        Some(status) => HttpOutcome::Status(status),
        None => HttpOutcome::Closed,
    }
}

/// An open `GET /sse` stream and the session id its `endpoint` event announced.
struct SseStream {
    stream: TcpStream,
    session: String,
    /// Everything read from the stream so far.
    seen: String,
}

impl SseStream {
    fn open(address: SocketAddr) -> SseStream {
        let mut stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "GET /sse HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .unwrap();
        let mut sse = SseStream {
            stream,
            session: String::new(),
            seen: String::new(),
        };
        while !sse
            .seen
            .find("sessionId=")
            .is_some_and(|at| sse.seen[at..].contains('\n'))
        {
            sse.read_more();
        }
        let at = sse.seen.find("sessionId=").unwrap() + "sessionId=".len();
        sse.session = sse.seen[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        sse
    }

    fn read_more(&mut self) {
        let mut chunk = [0u8; 4096];
        let n = self.stream.read(&mut chunk).expect("the SSE stream");
        assert!(n > 0, "the SSE stream closed: {}", self.seen);
        self.seen.push_str(&String::from_utf8_lossy(&chunk[..n]));
    }

    /// Reads until `text` has arrived.
    fn read_until(&mut self, text: &str) {
        while !self.seen.contains(text) {
            self.read_more();
        }
    }

    /// POSTs `message` to this session's `/message`: the status and body.
    fn post(&self, address: SocketAddr, message: &[u8]) -> (u16, String) {
        let path = format!("/message?sessionId={}", self.session);
        let (status, _, body) = http_request(address, "POST", &path, &JSON_POST, message);
        (status, body)
    }

    /// The MCP handshake: `initialize`, its answer on the stream, `initialized`.
    fn initialize(&mut self, address: SocketAddr) {
        let (status, body) = self.post(address, INITIALIZE.as_bytes());
        assert_eq!(status, 202, "initialize got {status} {body}");
        self.read_until("protocolVersion");
        let (status, body) = self.post(address, INITIALIZED);
        assert_eq!(status, 202, "{body}");
    }
}

/// A live session of each HTTP transport, so hostile requests can name real session ids.
struct Sessions {
    streamable: String,
    sse: String,
    /// The open `GET /sse` stream, drained by a thread so the server never blocks on it.
    _sse_stream: TcpStream,
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}"#;
const INITIALIZED: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const JSON_POST: [(&str, &str); 2] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
];

impl Sessions {
    /// Opens and initializes one session of each transport.
    fn open(address: SocketAddr) -> Sessions {
        let (status, headers, body) =
            http_request(address, "POST", "/mcp", &JSON_POST, INITIALIZE.as_bytes());
        assert_eq!(status, 200, "{body}");
        let streamable = headers
            .iter()
            .find(|(k, _)| k == "mcp-session-id")
            .map(|(_, v)| v.clone())
            .expect("an Mcp-Session-Id");
        let session = [JSON_POST[0], JSON_POST[1], ("Mcp-Session-Id", &streamable)];
        let (status, _, body) = http_request(address, "POST", "/mcp", &session, INITIALIZED);
        assert_eq!(status, 202, "{body}");

        let mut stream = SseStream::open(address);
        stream.initialize(address);

        let mut drain = stream.stream.try_clone().unwrap();
        drain.set_read_timeout(None).unwrap();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while matches!(drain.read(&mut chunk), Ok(n) if n > 0) {}
        });
        Sessions {
            streamable,
            sse: stream.session,
            _sse_stream: stream.stream,
        }
    }

    /// Whether the SSE session still takes messages (a ping is accepted with 202).
    fn sse_alive(&self, address: SocketAddr) -> Result<(), String> {
        let path = format!("/message?sessionId={}", self.sse);
        let ping = br#"{"jsonrpc":"2.0","id":"fuzz-ping","method":"ping"}"#;
        let (status, _, body) = http_request(address, "POST", &path, &JSON_POST, ping);
        if status == 202 {
            Ok(())
        } else {
            Err(format!(
                "the SSE session is gone: a ping got {status} {body}"
            ))
        }
    }
}

/// Where a hostile request goes; session ids are filled in from [`Sessions`].
#[derive(Debug, Clone)]
enum Target {
    Mcp,
    McpProfile(String),
    MessageReal,
    MessageRandom(String),
    MessageNoId,
    Other(&'static str),
    Random(String),
}

impl Target {
    fn path(&self, sessions: &Sessions) -> String {
        let escape = |s: &str| -> String {
            s.bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect()
        };
        match self {
            Target::Mcp => "/mcp".into(),
            Target::McpProfile(p) => format!("/mcp/{}", escape(p)),
            Target::MessageReal => format!("/message?sessionId={}", sessions.sse),
            Target::MessageRandom(id) => format!("/message?sessionId={}", escape(id)),
            Target::MessageNoId => "/message".into(),
            Target::Other(path) => (*path).into(),
            Target::Random(path) => format!("/{}", escape(path)),
        }
    }
}

fn target() -> BoxedStrategy<Target> {
    prop_oneof![
        4 => Just(Target::Mcp),
        1 => "\\PC{0,12}".prop_map(Target::McpProfile),
        4 => Just(Target::MessageReal),
        1 => "\\PC{0,40}".prop_map(Target::MessageRandom),
        1 => Just(Target::MessageNoId),
        1 => select(vec!["/healthz", "/metrics", "/", "/mcp/", "/message?", "/message?sessionId",
                         "/sse/x/y", "/mcp?x=1", "/%", "/../mcp", "//mcp"])
            .prop_map(Target::Other),
        1 => "\\PC{0,20}".prop_map(Target::Random),
    ]
    .boxed()
}

/// A header value: from a pool of meaningful ones, or random printable text (no CR or LF,
/// which would be our own framing error).
fn header_value(pool: &'static [&'static str]) -> BoxedStrategy<String> {
    prop_oneof![
        3 => select(pool).prop_map(str::to_owned),
        1 => "[ -~\u{80}-\u{ff}]{0,64}",
        1 => (0usize..20_000).prop_map(|n| "v".repeat(n)),
    ]
    .boxed()
}

/// Headers, by name; `{session}` in a value is replaced by the live streamable session id.
fn headers() -> BoxedStrategy<Vec<(String, String)>> {
    let named = prop_oneof![
        header_value(&[
            "application/json",
            "text/plain",
            "application/json; charset=utf-8",
            "multipart/form-data; boundary=x",
            ""
        ])
        .prop_map(|v| ("Content-Type".to_owned(), v)),
        header_value(&[
            "application/json, text/event-stream",
            "text/event-stream",
            "*/*",
            ""
        ])
        .prop_map(|v| ("Accept".to_owned(), v)),
        header_value(&["{session}", "nope", ""]).prop_map(|v| ("Mcp-Session-Id".to_owned(), v)),
        header_value(&["2025-06-18", "2024-11-05", "1999-01-01", ""])
            .prop_map(|v| ("Mcp-Protocol-Version".to_owned(), v)),
        header_value(&[
            "http://127.0.0.1",
            "http://localhost:3000",
            "http://evil.example",
            "null"
        ])
        .prop_map(|v| ("Origin".to_owned(), v)),
        header_value(&["Bearer x", "Basic eDp5", "Bearer"])
            .prop_map(|v| ("Authorization".to_owned(), v)),
        header_value(&["0", "1", "x"]).prop_map(|v| ("Last-Event-ID".to_owned(), v)),
        header_value(&["gzip", "br", "identity"]).prop_map(|v| ("Content-Encoding".to_owned(), v)),
        ("[A-Za-z][A-Za-z0-9-]{0,20}", header_value(&["x"])),
    ];
    prop_oneof![
        // Mostly a well-formed MCP POST with one or two headers changed.
        3 => vec(named.clone(), 0..3).prop_map(|mut changed| {
            let mut headers = vec![
                ("Content-Type".to_owned(), "application/json".to_owned()),
                ("Accept".to_owned(), "application/json, text/event-stream".to_owned()),
                ("Mcp-Session-Id".to_owned(), "{session}".to_owned()),
            ];
            for (name, value) in changed.drain(..) {
                headers.retain(|(n, _)| *n != name);
                headers.push((name, value));
            }
            headers
        }),
        1 => vec(named, 0..6),
    ]
    .boxed()
}

fn body() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        6 => frame(),
        // Past the default body limit (4 MiB): 413.
        1 => (4_194_300usize..4_200_000).prop_map(|n| vec![b' '; n]),
    ]
    .boxed()
}

#[derive(Debug, Clone)]
enum Hostile {
    Request {
        method: &'static str,
        target: Target,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Bytes that are not HTTP at all.
    Raw(Vec<u8>),
}

fn hostile_request() -> BoxedStrategy<Hostile> {
    prop_oneof![
        8 => (
            prop_oneof![6 => Just("POST"), 1 => select(vec!["GET", "DELETE", "PUT", "OPTIONS", "PATCH", "HEAD"])],
            target(),
            headers(),
            body(),
        )
            .prop_map(|(method, target, headers, body)| Hostile::Request { method, target, headers, body }),
        1 => vec(any::<u8>(), 0..512).prop_map(Hostile::Raw),
    ]
    .boxed()
}

/// Sends one hostile request; `Err` when the gateway failed it.
fn send_hostile(address: SocketAddr, sessions: &Sessions, request: &Hostile) -> Result<(), String> {
    match request {
        // Ended, so that it is not an idle connection (a known problem, see
        // `regression_an_idle_connection_is_closed`).
        Hostile::Raw(bytes) => match exchange(address, bytes, b"\r\n\r\n", true) {
            HttpOutcome::Hung => Err("no answer to raw bytes".into()),
            HttpOutcome::Status(status) if status >= 500 => Err(format!("raw bytes got {status}")),
            _ => Ok(()),
        },
        Hostile::Request {
            method,
            target,
            headers,
            body,
        } => {
            let path = target.path(sessions);
            // A GET that opens a stream answers with its head and then keeps going: fine.
            let mut head =
                format!("{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n")
                    .into_bytes();
            for (name, value) in headers {
                let value = value.replace("{session}", &sessions.streamable);
                head.extend(format!("{name}: ").into_bytes());
                // Header values are bytes on the wire: send Latin-1 as single bytes.
                head.extend(value.chars().map(|c| c as u32 as u8));
                head.extend(b"\r\n");
            }
            head.extend(format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes());
            match exchange(address, &head, body, false) {
                HttpOutcome::Status(status) if status < 500 => Ok(()),
                other => Err(format!("{method} {path}: {other:?}")),
            }
        }
    }
}

#[test]
fn hostile_http_requests_get_an_answer_and_the_gateway_keeps_serving() {
    let workspace = kv_workspace("");
    let gateway = workspace.serve_http(&[]);
    let sessions = Sessions::open(gateway.address);
    let mut gateway = gateway;
    run_property(32, vec(hostile_request(), 1..6), |requests| {
        for request in &requests {
            send_hostile(gateway.address, &sessions, request)
                .map_err(|e| fail(format!("{e}\ngateway log: {}", gateway.log_text())))?;
        }
        prop_assert!(
            matches!(gateway.child.try_wait(), Ok(None)),
            "the gateway exited: {}",
            gateway.log_text()
        );
        let (status, _, body) = http_get(gateway.address, "/healthz");
        prop_assert_eq!(status, 200, "{}", body);
        sessions.sse_alive(gateway.address).map_err(fail)?;
        Ok(())
    });
    // A real client still gets real work done.
    let args = gateway.client_args("http", "/mcp");
    let run = python_client(
        &args,
        &json!([
            {"action": "call_tool", "name": "mcp__kv__set", "arguments": {"key": "after", "value": "fuzz"}},
            {"action": "call_tool", "name": "mcp__kv__get", "arguments": {"key": "after"}},
        ]),
    );
    assert_eq!(
        action_result(&run, 1)["structuredContent"]["value"],
        "fuzz",
        "{run:#}"
    );
    let rss = rss_mib(gateway.pid());
    assert!(rss < 1024, "the gateway holds {rss} MiB after the run");
}

/// Found by `hostile_http_requests_get_an_answer_and_the_gateway_keeps_serving` (minimal
/// input: a connection that sends nothing). A client that connected and sent nothing, or
/// half a request head, kept its connection (a task and a file descriptor) forever:
/// `axum::serve` ran hyper without a timer, so hyper's header read timeout never fired,
/// and enough such connections exhausted the gateway's file descriptors (slowloris). Now
/// `[listen] header_timeout_ms` (here 1 s) closes them; before the fix this failed after
/// 60 s.
#[test]
fn regression_an_idle_connection_is_closed() {
    let workspace = kv_workspace("[listen]\nheader_timeout_ms = 1000\n");
    let gateway = workspace.serve_http(&[]);
    let address = gateway.address;
    let idle: [&[u8]; 2] = [b"", b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"];
    let waits: Vec<_> = idle
        .iter()
        .map(|sent| {
            let sent = sent.to_vec();
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(address).unwrap();
                stream.write_all(&sent).unwrap();
                stream.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
                let mut answer = Vec::new();
                // A 408, or the connection closed: either ends the read.
                match stream.read_to_end(&mut answer) {
                    Ok(_) => Ok(()),
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => Ok(()),
                    Err(e) => Err(format!(
                        "{:?} still open after {ANSWER_WITHIN:?} ({e})",
                        String::from_utf8_lossy(&sent)
                    )),
                }
            })
        })
        .collect();
    let failures: Vec<String> = waits
        .into_iter()
        .filter_map(|wait| wait.join().unwrap().err())
        .collect();
    assert!(failures.is_empty(), "{failures:?}");
}

/// `[listen] max_connections`: past the cap a new client is not accepted (it costs the
/// gateway no task and no descriptor) and waits in the kernel's queue; it is served as soon
/// as a connection closes.
#[test]
fn a_client_past_the_connection_cap_waits_until_a_connection_closes() {
    let workspace = kv_workspace("[listen]\nmax_connections = 2\n");
    let gateway = workspace.serve_http(&[]);
    let address = gateway.address;
    let health = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let first_answer = |stream: &mut TcpStream, within: Duration| -> Option<String> {
        stream.set_read_timeout(Some(within)).unwrap();
        let mut buffer = [0u8; 512];
        match stream.read(&mut buffer) {
            Ok(read) if read > 0 => Some(String::from_utf8_lossy(&buffer[..read]).into_owned()),
            _ => None,
        }
    };
    // Two kept-alive connections, each served once, hold both permits.
    let mut held: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut stream = TcpStream::connect(address).unwrap();
            stream.write_all(health).unwrap();
            let answer = first_answer(&mut stream, ANSWER_WITHIN);
            assert!(
                answer
                    .as_deref()
                    .is_some_and(|a| a.starts_with("HTTP/1.1 200")),
                "{answer:?}"
            );
            stream
        })
        .collect();
    let mut waiting = TcpStream::connect(address).unwrap();
    waiting.write_all(health).unwrap();
    let early = first_answer(&mut waiting, Duration::from_secs(1));
    assert_eq!(
        early, None,
        "a third connection was served past the cap of 2"
    );
    drop(held.pop());
    let answer = first_answer(&mut waiting, ANSWER_WITHIN);
    assert!(
        answer
            .as_deref()
            .is_some_and(|a| a.starts_with("HTTP/1.1 200")),
        "the waiting client was not served once a connection closed: {answer:?}"
    );
}

/// Found while fuzzing stdio (see `stdio::regression_a_notification_before_initialize_…`):
/// a legacy SSE session ended on a notification or response posted before `initialize`,
/// and its `/message` then answered 404. The session must ignore them and initialize.
#[test]
fn regression_a_notification_before_initialize_does_not_end_an_sse_session() {
    let workspace = kv_workspace("");
    let gateway = workspace.serve_http(&[]);
    let address = gateway.address;
    let early: [&[u8]; 3] = [
        INITIALIZED,
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        br#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
    ];
    for frame in early {
        let mut stream = SseStream::open(address);
        let (status, body) = stream.post(address, frame);
        assert_eq!(status, 202, "{}: {body}", String::from_utf8_lossy(frame));
        stream.initialize(address);
        let list = br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        let (status, body) = stream.post(address, list);
        assert_eq!(status, 202, "{body}");
        stream.read_until("mcp__kv__get");
    }
}
