//! Calls from a client that keeps its connections, HAProxy against the gateway (and
//! against the hyper relay, the floor of a Rust hop).
//!
//! rmcp's client, which every other forwarding row uses, opens a new connection for each
//! call, and accepting, reading the end of and closing a connection costs a hop about as
//! much as the call itself: it hides how much more than HAProxy the gateway does per
//! request. Most clients keep their connections (the Python and TypeScript SDKs do), so
//! these rows send the same `tools/call` with `wrk` on kept connections, through HAProxy
//! and through the gateway in alternating rounds, each on a session it opened first; at
//! concurrency 1 kv is called directly in the same rounds too, for what each hop adds to
//! a call's median time.

use std::net::SocketAddr;
use std::path::Path;

use super::{BenchService, HttpServer, KV, Row, rate_row, summary_row};

/// The hop measured against HAProxy: what the rows call it, where it listens (tools
/// under the gateway's names) and its process.
pub struct Measured<'a> {
    pub name: &'a str,
    pub address: SocketAddr,
    pub pid: u32,
}

/// Seconds each round of `wrk` runs.
const ROUND_SECONDS: u32 = 1;

/// Rounds per concurrency and way (fewer with `BENCH_QUICK`).
fn rounds() -> usize {
    if super::quick() { 2 } else { 10 }
}

/// The request `wrk` sends: a `tools/call` of `TOOL` with `ARGUMENTS` on session `SID`,
/// each with an id of its own. `wrk` counts answers other than 2xx (the run then fails).
const SCRIPT: &str = r#"
local id = 0
local tool, arguments, session = os.getenv("TOOL"), os.getenv("ARGUMENTS"), os.getenv("SID")
function request()
  id = id + 1
  return wrk.format("POST", nil, {
    ["content-type"] = "application/json",
    ["accept"] = "application/json, text/event-stream",
    ["mcp-session-id"] = session,
    ["mcp-protocol-version"] = "2025-06-18",
  }, '{"jsonrpc":"2.0","id":' .. id .. ',"method":"tools/call","params":{"name":"'
    .. tool .. '","arguments":' .. arguments .. '}}')
end
"#;

/// Whether `wrk` can be run (scripts/install-cluster-deps installs it).
pub fn available() -> bool {
    super::which("wrk")
}

/// kv's `get` through `hop` against the same call through `haproxy` (in front of `kv`),
/// at concurrency 1 and 32, kept connections: calls/s and both hops' CPU per call, and at
/// concurrency 1 what each hop adds to a call's median time.
pub async fn against_haproxy(
    rows: &mut Vec<Row>,
    dir: &Path,
    scenario: &str,
    kv: &HttpServer,
    haproxy: &BenchService,
    hop: Measured<'_>,
) {
    let script = dir.join("keep-alive.lua");
    std::fs::write(&script, SCRIPT).unwrap();
    let direct = Hop::open(kv.1, KV.direct, None).await;
    let baseline = Hop::open(haproxy.1, KV.direct, Some(haproxy.0.id())).await;
    let measured = Hop::open(hop.address, KV.via, Some(hop.pid)).await;
    let label = format!("{}, {scenario}, connections kept (wrk)", KV.label);
    for connections in [1, 32] {
        let (mut alone, mut base, mut ours) =
            (Tally::default(), Tally::default(), Tally::default());
        for _ in 0..rounds() {
            if connections == 1 {
                alone.add(direct.run(&script, connections).await);
            }
            base.add(baseline.run(&script, connections).await);
            ours.add(measured.run(&script, connections).await);
        }
        let row = rate_row(
            &format!("{label}, concurrency {connections} (vs HAProxy in front of kv's HTTP)"),
            ours.rate(),
            Some(base.rate()),
        );
        rows.push(Row {
            hop_cpu_us_per_call: Some(ours.cpu_per_call()),
            baseline_hop_cpu_us_per_call: Some(base.cpu_per_call()),
            hop_cpu_ratio: Some(ours.cpu_per_call() / base.cpu_per_call()),
            ..row
        });
        if connections == 1 {
            let (kv_alone, haproxy_adds, hop_adds) = (
                alone.p50_us(),
                base.p50_us() - alone.p50_us(),
                ours.p50_us() - alone.p50_us(),
            );
            rows.push(summary_row(format!(
                "{label}, concurrency 1, added p50: HAProxy {haproxy_adds:.0} µs, {} \
                 {hop_adds:.0} µs ({:.2}×), to kv's own {kv_alone:.0} µs",
                hop.name,
                hop_adds / haproxy_adds
            )));
        }
    }
}

/// Opens a session at `address`'s `/mcp` (`initialize`, then `notifications/initialized`),
/// checks that `tool` answers there without an error (`wrk` sees only statuses), and
/// gives the session's id.
async fn session(address: SocketAddr, tool: &str) -> String {
    let client = reqwest::Client::new();
    let url = format!("http://{address}/mcp");
    let post = async |body: String, session: Option<&str>| {
        let mut request = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        let response = request.send().await.unwrap();
        assert!(response.status().is_success(), "{response:?}");
        let id = response
            .headers()
            .get("mcp-session-id")
            .map(|id| id.to_str().unwrap().to_owned());
        (id, response.text().await.unwrap())
    };
    let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
    let (id, _) = post(initialize.to_owned(), None).await;
    let id = id.expect("a session id");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    post(initialized.to_owned(), Some(&id)).await;
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{}}}}}"#,
        KV.arguments
    );
    let (_, answer) = post(call, Some(&id)).await;
    assert!(
        answer.contains(r#""isError":false"#),
        "{tool} at {url}: {answer}"
    );
    id
}

/// One way to the tool: where, under which name, on which session, and which process in
/// the middle has its CPU counted (none for kv called directly).
struct Hop {
    address: SocketAddr,
    tool: &'static str,
    session: String,
    pid: Option<u32>,
}

impl Hop {
    async fn open(address: SocketAddr, tool: &'static str, pid: Option<u32>) -> Self {
        Self {
            address,
            tool,
            session: session(address, tool).await,
            pid,
        }
    }

    /// One round of `wrk` with `connections` kept connections.
    async fn run(&self, script: &Path, connections: usize) -> Round {
        let cpu = || self.pid.map_or(0.0, super::cpu_us);
        let before = cpu();
        let output = tokio::process::Command::new("wrk")
            .args([
                "--latency",
                "-t1",
                &format!("-c{connections}"),
                &format!("-d{ROUND_SECONDS}s"),
            ])
            .arg("-s")
            .arg(script)
            .arg(format!("http://{}/mcp", self.address))
            .env("TOOL", self.tool)
            .env("ARGUMENTS", KV.arguments)
            .env("SID", &self.session)
            .output()
            .await
            .unwrap();
        let spent = cpu() - before;
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && !text.contains("Non-2xx") && !text.contains("errors"),
            "wrk failed: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // "N requests in 1.00s, …"
        let (calls, rest) = text
            .split_once(" requests in ")
            .map(|(head, rest)| (head.rsplit(' ').next().unwrap(), rest))
            .expect("wrk's summary");
        let seconds = rest.split_once('s').unwrap().0;
        // "     50%  219.00us" under "Latency Distribution"
        let p50 = text
            .lines()
            .find_map(|line| line.trim().strip_prefix("50%"))
            .map(|value| microseconds(value.trim()))
            .expect("wrk's latency distribution");
        Round {
            calls: calls.parse().unwrap(),
            seconds: seconds.parse().unwrap(),
            cpu_us: spent,
            p50_us: p50,
        }
    }
}

/// `wrk`'s way of writing a duration ("219.00us", "1.64ms", "2.00s") in µs.
fn microseconds(text: &str) -> f64 {
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        other => panic!("wrk wrote a duration in {other:?}: {text}"),
    };
    number.parse::<f64>().unwrap() * scale
}

/// What one round of `wrk` measured.
struct Round {
    calls: f64,
    seconds: f64,
    /// The hop's CPU in the round.
    cpu_us: f64,
    /// The median time of a call.
    p50_us: f64,
}

/// Calls, seconds and hop CPU summed over rounds, and each round's median time.
#[derive(Default)]
struct Tally {
    calls: f64,
    seconds: f64,
    cpu_us: f64,
    p50s_us: Vec<f64>,
}

impl Tally {
    fn add(&mut self, round: Round) {
        self.calls += round.calls;
        self.seconds += round.seconds;
        self.cpu_us += round.cpu_us;
        self.p50s_us.push(round.p50_us);
    }

    fn rate(&self) -> f64 {
        self.calls / self.seconds
    }

    fn cpu_per_call(&self) -> f64 {
        self.cpu_us / self.calls
    }

    /// The median of the rounds' median times.
    fn p50_us(&self) -> f64 {
        let mut p50s = self.p50s_us.clone();
        p50s.sort_by(f64::total_cmp);
        p50s[p50s.len() / 2]
    }
}
