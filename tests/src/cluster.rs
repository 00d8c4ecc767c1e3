//! Several gateway replicas sharing one Redis behind HAProxy, all real processes on
//! loopback ports: Debian's `redis-server` and `haproxy` (scripts/install-cluster-deps),
//! and the built gateway binary.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{Gateway, Workspace, eventually, free_address, http_get};

/// A `redis-server` on a fixed loopback port (so it can be stopped and started again at
/// the same address); killed when dropped.
pub struct Redis {
    child: Option<Child>,
    pub address: SocketAddr,
}

impl Redis {
    pub fn start() -> Redis {
        let mut redis = Redis {
            child: None,
            address: free_address(),
        };
        redis.resume();
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://{}/0", self.address)
    }

    /// Starts the server again after [`Redis::stop`] (empty: it persists nothing).
    pub fn resume(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.address.port().to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is missing: run scripts/install-cluster-deps");
        self.child = Some(child);
        assert!(
            eventually(Duration::from_secs(20), || {
                std::net::TcpStream::connect(self.address).is_ok()
            }),
            "redis-server did not listen on {}",
            self.address
        );
    }

    /// Kills the server.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `haproxy` balancing `backends` round robin (no stickiness), checking `/readyz`;
/// killed when dropped.
pub struct Haproxy {
    child: Child,
    pub address: SocketAddr,
}

impl Haproxy {
    pub fn start(dir: &Path, backends: &[SocketAddr]) -> Haproxy {
        let address = free_address();
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, backend)| format!("    server g{i} {backend} check\n"))
            .collect();
        let config = format!(
            "global\n    maxconn 1024\n\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 60s\n    \
             timeout server 60s\n    timeout tunnel 1h\n    option http-server-close\n    \
             retries 2\n    option redispatch\n    option http-buffer-request\n    \
             retry-on conn-failure 503\n\
             frontend mcp\n    bind {address}\n    default_backend gateways\n\
             backend gateways\n    balance roundrobin\n    option httpchk GET /readyz\n    \
             http-check expect status 200\n    \
             default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions\n\
             {servers}"
        );
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir.join("haproxy.log")).unwrap(),
            ))
            .spawn()
            .expect("haproxy is missing: run scripts/install-cluster-deps");
        assert!(
            eventually(Duration::from_secs(20), || {
                std::net::TcpStream::connect(address).is_ok()
            }),
            "haproxy did not listen on {address}"
        );
        Haproxy { child, address }
    }

    /// Arguments for `tests/python/client.py` to reach the replicas through HAProxy.
    pub fn client_args(&self, path: &str) -> Vec<String> {
        vec![
            "--transport".into(),
            "http".into(),
            "--url".into(),
            format!("http://{}{path}", self.address),
        ]
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `count` replicas of the gateway serving `config` (which should name the shared Redis
/// in `[cluster]`), each with its own workspace; waits until every one is ready.
pub fn replicas(config: &str, count: usize) -> Vec<(Workspace, Gateway)> {
    let replicas: Vec<_> = (0..count)
        .map(|_| {
            let workspace = Workspace::new(config);
            let gateway = workspace.serve_http(&[]);
            (workspace, gateway)
        })
        .collect();
    for (_, gateway) in &replicas {
        assert!(
            eventually(Duration::from_secs(20), || ready(gateway)),
            "replica {} never became ready: {}",
            gateway.address,
            gateway.log_text()
        );
    }
    replicas
}

/// Whether `/readyz` says 200.
pub fn ready(gateway: &Gateway) -> bool {
    http_get(gateway.address, "/readyz").0 == 200
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
