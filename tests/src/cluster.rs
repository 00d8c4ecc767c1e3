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
