//! A client of the streamable HTTP transport at the level of requests and events, for
//! tests that need what an SDK client hides: when its `GET` opens, a request in the
//! middle of a stream, a replica chosen per request.

use std::net::SocketAddr;
use std::time::Duration;

use crate::http_request;

/// An `initialize` request (id 1) of a client named `raw`.
pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
/// The `initialized` notification.
pub const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// POSTs one JSON-RPC message to `/mcp` on `address`.
pub fn post(
    address: SocketAddr,
    session: Option<&str>,
    token: Option<&str>,
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    if let Some(session) = session {
        headers.push(("Mcp-Session-Id", session));
    }
    if let Some(bearer) = &bearer {
        headers.push(("Authorization", bearer));
    }
    http_request(address, "POST", "/mcp", &headers, body.as_bytes())
}

pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Opens a session on `address` (initialize + initialized); its id.
pub fn open_session(address: SocketAddr, token: Option<&str>) -> String {
    let (status, headers, body) = post(address, None, token, INITIALIZE);
    assert_eq!(status, 200, "{body}");
    let session = header(&headers, "mcp-session-id")
        .expect("a session id")
        .to_owned();
    let (status, _, body) = post(address, Some(&session), token, INITIALIZED);
    assert_eq!(status, 202, "{body}");
    session
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<String>,
    pub data: String,
}

/// The events in an SSE body (`text/event-stream`), in order.
pub fn sse_events(body: &str) -> Vec<SseEvent> {
    body.replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|block| {
            let mut event = SseEvent {
                id: None,
                data: String::new(),
            };
            let mut seen = false;
            for line in block.lines() {
                if let Some(id) = line.strip_prefix("id:") {
                    event.id = Some(id.trim().to_owned());
                    seen = true;
                } else if let Some(data) = line.strip_prefix("data:") {
                    event.data.push_str(data.trim_start());
                    seen = true;
                }
            }
            seen.then_some(event)
        })
        .collect()
}

/// An SSE answer (`POST /mcp`, or the `GET` stream) read as it arrives (HTTP/1.1, chunked), so a test
/// can act in the middle of a stream.
pub struct SseResponse {
    reader: std::io::BufReader<std::net::TcpStream>,
    pending: String,
}

impl SseResponse {
    /// Sends `body` to `/mcp` on `address` in session `session`; fails unless 200.
    pub fn post(address: SocketAddr, session: &str, body: &str) -> SseResponse {
        Self::open(
            address,
            &format!(
                "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n\
                 Mcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ),
        )
    }

    /// Opens session `session`'s standalone stream (`GET /mcp`) on `address`; fails
    /// unless 200.
    pub fn get(address: SocketAddr, session: &str) -> SseResponse {
        Self::open(
            address,
            &format!(
                "GET /mcp HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\
                 MCP-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: {session}\r\n\r\n"
            ),
        )
    }

    /// Sends `request` and reads the status line and headers.
    fn open(address: SocketAddr, request: &str) -> SseResponse {
        use std::io::{BufRead, Write};
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut reader = std::io::BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.contains(" 200 "), "{status}");
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim().is_empty() {
                break;
            }
        }
        SseResponse {
            reader,
            pending: String::new(),
        }
    }

    /// Waits at most `timeout` for each read from now on (30 s by default).
    pub fn read_timeout(self, timeout: Duration) -> SseResponse {
        self.reader
            .get_ref()
            .set_read_timeout(Some(timeout))
            .unwrap();
        self
    }

    /// The next event, or `None` when the stream ended (or a read timed out).
    pub fn next_event(&mut self) -> Option<SseEvent> {
        use std::io::{BufRead, Read};
        loop {
            let normalized = self.pending.replace("\r\n", "\n");
            if let Some((block, rest)) = normalized.split_once("\n\n") {
                let events = sse_events(&format!("{block}\n\n"));
                self.pending = rest.to_owned();
                match events.into_iter().next() {
                    Some(event) => return Some(event),
                    None => continue,
                }
            }
            let mut size = String::new();
            if self.reader.read_line(&mut size).ok()? == 0 {
                return None;
            }
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            if size == 0 {
                return None;
            }
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk).ok()?;
            self.pending
                .push_str(&String::from_utf8_lossy(&chunk[..size]));
        }
    }
}

/// The routing headers a 2026-07-28 client sends with `body` (a JSON-RPC request):
/// `Mcp-Method`, and `Mcp-Name` for the methods that name something.
pub fn routing_headers(body: &str) -> Vec<(&'static str, String)> {
    let body: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let method = body["method"].as_str().unwrap_or_default();
    let mut headers = vec![("Mcp-Method", method.to_owned())];
    let named = match method {
        "tools/call" | "prompts/get" => body["params"]["name"].as_str(),
        "resources/read" => body["params"]["uri"].as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel" => body["params"]["taskId"].as_str(),
        _ => None,
    };
    if let Some(name) = named {
        headers.push(("Mcp-Name", name.to_owned()));
    }
    headers
}

/// The answer (the last event of a stream) to a request of 2026-07-28 of `method` with
/// `params`, sent to `address` on its own with the routing headers, `token` as its bearer,
/// and `capabilities` as the client's.
pub fn stateless_request(
    address: SocketAddr,
    token: Option<&str>,
    capabilities: &serde_json::Value,
    method: &str,
    mut params: serde_json::Value,
) -> serde_json::Value {
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let body = body.to_string();
    let bearer = token.map(|token| format!("Bearer {token}"));
    let routing = routing_headers(&body);
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
    ];
    if let Some(bearer) = &bearer {
        headers.push(("Authorization", bearer.as_str()));
    }
    headers.extend(routing.iter().map(|(name, value)| (*name, value.as_str())));
    let (_, _, text) = http_request(address, "POST", "/mcp", &headers, body.as_bytes());
    let text = match sse_events(&text).last() {
        Some(event) if !text.trim_start().starts_with('{') => event.data.clone(),
        _ => text,
    };
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

/// A client of 2026-07-28 that sends each request on its own (with the routing headers,
/// and `token` as its bearer), for tests of tasks.
pub struct TaskClient {
    address: SocketAddr,
    token: Option<&'static str>,
}

impl TaskClient {
    pub fn new(address: SocketAddr, token: Option<&'static str>) -> TaskClient {
        TaskClient { address, token }
    }

    /// The answer to `method` with `params`, the tasks extension declared (and
    /// elicitation) unless `plain`.
    pub fn request_as(
        &self,
        method: &str,
        params: serde_json::Value,
        plain: bool,
    ) -> serde_json::Value {
        let capabilities = if plain {
            serde_json::json!({})
        } else {
            serde_json::json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
        };
        stateless_request(self.address, self.token, &capabilities, method, params)
    }

    /// [`Self::request_as`], the tasks extension declared.
    pub fn request(&self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.request_as(method, params, false)
    }

    /// Task `id` once it reached `status` or settled (polled, for at most 30 s).
    pub fn poll(&self, id: &str, status: &str) -> serde_json::Value {
        let mut last = serde_json::Value::Null;
        let reached = crate::eventually(Duration::from_secs(30), || {
            last = self.request("tasks/get", serde_json::json!({"taskId": id}));
            let now = last["result"]["status"].as_str().unwrap_or_default();
            now == status || ["completed", "failed", "cancelled"].contains(&now)
        });
        assert!(reached, "task {id} never reached {status}: {last}");
        last["result"].clone()
    }
}
