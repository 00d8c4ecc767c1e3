//! What the gateway costs, measured against a baseline in the same run (ratios, medians),
//! with real processes: the kv, slow and dynamic example servers, the built gateway
//! binary, and rmcp clients. Prints a markdown table and writes
//! `target/bench-report.json`.
//!
//! Run with `cargo bench -p mcp-gateway --bench gateway` (it builds the gateway and the
//! example servers in release first, and refuses a binary older than the sources). Where
//! the baseline is calls too, it runs in alternating rounds with the measured path.
//! `BENCH_QUICK=1` cuts repetitions; `BENCH_GATEWAY=PATH` measures another gateway binary
//! (an older build, say) with the same command; `BENCH_AGAINST=PATH` adds rows where
//! another gateway binary is the baseline: its idle run_code calls alternate, one by one,
//! with the measured one's, and its forwarded calls over stdio and over streamable HTTP,
//! round by round (with the CPU per call of both);
//! `BENCH_ONLY=forwarding,run_code` runs some groups (pipeline, sdkgen, forwarding, list,
//! work, run_code, memory, search, code_compute, code_memory, cluster, confinement,
//! pinning; cluster needs redis-server and haproxy from scripts/install-cluster-deps).

#[path = "gateway/confinement.rs"]
mod confinement;
#[path = "gateway/keep_alive.rs"]
mod keep_alive;
#[path = "gateway/pinning.rs"]
mod pinning;
#[path = "gateway/relays.rs"]
mod relays;
#[path = "gateway/report.rs"]
mod report;
#[path = "gateway/search.rs"]
mod search;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_gateway::config::Config;
use mcp_gateway::pipeline::{
    BoxFuture, BuiltinTool, Executor, Invocation, Origin, PipelineSettings, Target, ToolError,
};
use mcp_gateway::registry::Registry;
use mcp_gateway::registry::profile::Profiles;
use mcp_gateway::session::{Opening, Session, Transport};
use mcp_gateway::tool_result::{Block, ToolResult};
use rmcp::RoleClient;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::RunningService;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use report::Row;

type Client = RunningService<RoleClient, ()>;

fn quick() -> bool {
    std::env::var_os("BENCH_QUICK").is_some()
}

/// Whether `group` runs: all do unless `BENCH_ONLY` names some (comma-separated).
fn selected(group: &str) -> bool {
    std::env::var("BENCH_ONLY").map_or(true, |only| only.split(',').any(|g| g.trim() == group))
}

fn reps(full: usize) -> usize {
    if quick() { (full / 10).max(5) } else { full }
}

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let index = ((samples.len() - 1) as f64 * p).round() as usize;
    samples[index].as_secs_f64() * 1e6
}

/// A latency row: the measured samples against the baseline's (none: no baseline).
fn row(scenario: &str, mut samples: Vec<Duration>, mut baseline: Vec<Duration>) -> Row {
    let p50 = percentile(&mut samples, 0.5);
    let p99 = percentile(&mut samples, 0.99);
    let base = (!baseline.is_empty()).then(|| percentile(&mut baseline, 0.5));
    let base_p99 = (!baseline.is_empty()).then(|| percentile(&mut baseline, 0.99));
    Row {
        scenario: scenario.to_owned(),
        p50_us: Some(p50),
        p99_us: Some(p99),
        baseline_p50_us: base,
        latency_ratio: base.map(|base| p50 / base),
        baseline_p99_us: base_p99,
        p99_ratio: base_p99.map(|base| p99 / base),
        ..Row::default()
    }
}

/// A row whose figures are all in its text (sizes, memory, a wall time against its ideal).
fn summary_row(scenario: String) -> Row {
    Row {
        scenario,
        ..Row::default()
    }
}

/// A throughput row: calls per second against the baseline's (none: no baseline).
fn rate_row(scenario: &str, rate: f64, baseline: Option<f64>) -> Row {
    Row {
        scenario: scenario.to_owned(),
        calls_per_s: Some(rate),
        baseline_calls_per_s: baseline,
        throughput_ratio: baseline.map(|base| rate / base),
        ..Row::default()
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// A release binary of the workspace: the first call builds the gateway and the example
/// servers, and every call returns the binary cargo reported for `name` (built now, or
/// fresh), so that a figure never describes old code.
fn release_bin(name: &str) -> PathBuf {
    static BUILT: std::sync::OnceLock<std::collections::HashMap<String, PathBuf>> =
        std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let output = std::process::Command::new(env!("CARGO"))
            .args([
                "build",
                "--release",
                "--message-format=json-render-diagnostics",
            ])
            .args(["-p", "mcp-gateway", "-p", "mcp-gateway-examples"])
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("cargo build");
        assert!(
            output.status.success(),
            "building the gateway and the examples failed"
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|message| {
                let executable = message.get("executable")?.as_str()?;
                let name = message.pointer("/target/name")?.as_str()?;
                Some((name.to_owned(), PathBuf::from(executable)))
            })
            .collect()
    });
    built
        .get(name)
        .unwrap_or_else(|| panic!("cargo built no binary named {name}"))
        .clone()
}

/// The gateway measured: the fresh release build, or the binary `BENCH_GATEWAY` names (to
/// compare two builds with the same command; it is not checked for staleness).
fn gateway_bin() -> PathBuf {
    std::env::var_os("BENCH_GATEWAY")
        .map(PathBuf::from)
        .unwrap_or_else(|| release_bin("mcp-gateway"))
}

/// A second gateway binary, the baseline of rows that alternate its calls with the
/// measured one's (idle run_code calls, forwarded calls over stdio), so that both builds
/// meet the same moments of a noisy host.
fn against_bin() -> Option<PathBuf> {
    std::env::var_os("BENCH_AGAINST").map(PathBuf::from)
}

fn server(name: &str, bin: &str, env: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = {:?}\n{env}",
        release_bin(bin).to_string_lossy()
    )
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    write_config_as(dir, "config.toml", text, false)
}

/// `text` as configuration file `name` in `dir`, with session logs written under `dir`
/// (`logged`) or off.
fn write_config_as(dir: &Path, name: &str, text: &str, logged: bool) -> PathBuf {
    let path = dir.join(name);
    let sessions_dir = if logged {
        format!("{:?}", dir.join("sessions").to_string_lossy())
    } else {
        "false".to_owned()
    };
    std::fs::write(
        &path,
        format!("{text}\n[log]\nsessions_dir = {sessions_dir}\n"),
    )
    .unwrap();
    path
}

async fn stdio_client(program: &Path, args: &[&str]) -> Client {
    stdio_client_with_pid(program, args).await.0
}

/// A client of `program` over stdio, and the server's process id.
/// The gateway under test serving `config` over stdio once its upstreams are up, with
/// its pid.
async fn gateway_over_stdio(config: &Path) -> (Client, u32) {
    gateway_binary_over_stdio(&gateway_bin(), config).await
}

async fn gateway_binary_over_stdio(binary: &Path, config: &Path) -> (Client, u32) {
    let mut command = tokio::process::Command::new(binary);
    command
        .args(["serve", "--stdio", "--wait-for-upstreams", "--config"])
        .arg(config)
        .env("XDG_DATA_HOME", data_home(config));
    serve_over_stdio(command).await
}

/// The folder a gateway of `config` keeps its data in (its pins, say): beside the
/// configuration, never the user's own.
fn data_home(config: &Path) -> std::path::PathBuf {
    config.with_extension("data")
}

async fn stdio_client_with_pid(program: &Path, args: &[&str]) -> (Client, u32) {
    let mut command = tokio::process::Command::new(program);
    command.args(args);
    serve_over_stdio(command).await
}

async fn serve_over_stdio(mut command: tokio::process::Command) -> (Client, u32) {
    command.env("RUST_LOG", "error");
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let pid = transport.id().unwrap();
    (().serve(transport).await.unwrap(), pid)
}

/// CPU time `pid` has used so far, all threads, in microseconds (from schedstat, which
/// counts nanoseconds, unlike the 10 ms ticks of /proc/PID/stat).
fn cpu_us(pid: u32) -> f64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let ns: u64 = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    ns as f64 / 1e3
}

fn params(name: &str, args: Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = args.as_object().cloned();
    params
}

/// Latencies of `n` sequential calls.
async fn sequential(client: &Client, name: &str, args: Value, n: usize) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        client
            .peer()
            .call_tool(params(name, args.clone()))
            .await
            .unwrap();
        samples.push(started.elapsed());
    }
    samples
}

/// Seconds taken by `total` calls (rounded down to a multiple of `concurrency`) with
/// `concurrency` calls in flight.
async fn throughput(
    client: &Client,
    name: &str,
    args: Value,
    concurrency: usize,
    total: usize,
) -> f64 {
    let started = Instant::now();
    let per_task = total / concurrency;
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let peer = client.peer().clone();
            let args = args.clone();
            let name = name.to_owned();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    peer.call_tool(params(&name, args.clone())).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed().as_secs_f64()
}

fn free_address() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// An rmcp client of the streamable HTTP server at `http://{address}{path}`.
async fn http_client(address: std::net::SocketAddr, path: &str) -> Client {
    let transport =
        rmcp::transport::StreamableHttpClientTransport::from_uri(format!("http://{address}{path}"));
    ().serve(transport).await.unwrap()
}

/// Whether `program` can be run (from `PATH`).
fn which(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("-v")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// A server process listening for streamable HTTP at `/mcp`; killed on drop.
struct HttpServer(std::process::Child, std::net::SocketAddr);

impl HttpServer {
    /// `mcp-gateway serve` on `config`.
    fn gateway(config: &Path) -> HttpServer {
        HttpServer::gateway_binary(&gateway_bin(), config)
    }

    /// The gateway `binary` (another build, say) serving `config` over streamable HTTP.
    fn gateway_binary(binary: &Path, config: &Path) -> HttpServer {
        let address = free_address();
        let mut command = std::process::Command::new(binary);
        command
            .args([
                "serve",
                "--wait-for-upstreams",
                "--listen",
                &address.to_string(),
            ])
            .arg("--config")
            .arg(config)
            .env("XDG_DATA_HOME", data_home(config));
        HttpServer::start(command, address)
    }

    /// The kv example serving HTTP itself: the direct baseline.
    fn kv() -> HttpServer {
        let address = free_address();
        let mut command = std::process::Command::new(release_bin("kv"));
        command.args(["--http", &address.to_string()]);
        HttpServer::start(command, address)
    }

    /// The echo example: rmcp's streamable HTTP server with its defaults.
    fn echo() -> HttpServer {
        let address = free_address();
        let mut command = std::process::Command::new(release_bin("echo"));
        command.args(["--http", &address.to_string()]);
        HttpServer::start(command, address)
    }

    /// `tests/servers/echo.py` on the Python SDK; `None` without the test peers.
    fn python_echo() -> Option<HttpServer> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let python = repo.join("tests/peers/.venv/bin/python");
        if !python.exists() {
            return None;
        }
        let address = free_address();
        let mut command = std::process::Command::new(python);
        command
            .arg(repo.join("tests/servers/echo.py"))
            .arg(address.port().to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        Some(HttpServer::start(command, address))
    }

    fn start(mut command: std::process::Command, address: std::net::SocketAddr) -> HttpServer {
        let child = command.env("RUST_LOG", "error").spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(address).is_err() {
            assert!(Instant::now() < deadline, "{command:?} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        HttpServer(child, address)
    }

    async fn client(&self) -> Client {
        http_client(self.1, "/mcp").await
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// The gateway's per-definition work counters from `/metrics`: (schema compilations,
    /// SDK generations).
    async fn work_done(&self) -> (u64, u64) {
        let text = reqwest::get(format!("http://{}/metrics", self.1))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let counter = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or_else(|| panic!("{name} missing from /metrics"))
        };
        (
            counter("mcp_gateway_schema_compilations_total"),
            counter("mcp_gateway_sdk_generations_total"),
        )
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Resident set size of `pid`, in kB.
fn rss_kb(pid: u32) -> u64 {
    proc_kb(pid, "status", "VmRSS:")
}

/// The `field` (e.g. `VmRSS:`) of `/proc/PID/<file>`, in kB; 0 when the process is gone.
fn proc_kb(pid: u32, file: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// kv directly vs through the gateway: over stdio and over streamable HTTP downstream,
/// the gateway reaching kv over stdio, and over streamable HTTP both ways (kv serving
/// HTTP is then both the baseline and the gateway's upstream), and the same for two
/// `echo` servers over streamable HTTP written as most remote servers are (rmcp's and the
/// Python SDK's defaults: SSE answers, Nagle's algorithm on). The session log and
/// metrics are on, as in a deployment; the stdio and HTTP-over-stdio pairs run again
/// with the session log off.
///
/// First, the floor of a hop on this machine, against the same baselines: kv behind a
/// process that only copies lines and behind a tokio relay that only reads and rewrites
/// them ([`relays`]), and kv's HTTP behind HAProxy and behind a hyper relay that reads
/// and rewrites each request. What a proxy can reach (CPU per call, calls/s against
/// direct) is bounded by these. With HAProxy there, the gateway (kv over stdio, and kv
/// over streamable HTTP) and the hyper relay are also measured against it directly, in
/// alternating rounds.
async fn forwarding(dir: &Path, rows: &mut Vec<Row>) {
    let kv = release_bin("kv");
    let kv_http = HttpServer::kv();
    let relay = std::env::current_exe().unwrap();
    for (flag, scenario, tool) in [
        (
            relays::BARE,
            "stdio, bare line relay (the floor of a hop)",
            "get",
        ),
        (
            relays::ASYNC,
            "stdio, tokio JSON relay (the floor of an async hop)",
            KV.via,
        ),
    ] {
        let direct = stdio_client(&kv, &[]).await;
        let (via, pid) = stdio_client_with_pid(&relay, &[flag, &kv.to_string_lossy()]).await;
        let (baseline, measured) = (
            CallPath::direct(&direct, &KV),
            CallPath::via(&via, tool, pid),
        );
        compare_forwarding(rows, &KV, scenario, "direct stdio", baseline, measured).await;
        via.cancel().await.unwrap();
        direct.cancel().await.unwrap();
    }
    let haproxy = which("haproxy").then(|| BenchService::haproxy(dir, &[kv_http.1], ""));
    if let Some(haproxy) = &haproxy {
        let scenario = "streamable HTTP, HAProxy (the floor of a hop)";
        compare_http_hop(rows, scenario, &kv_http, haproxy, ("/mcp", "get")).await;
    } else {
        eprintln!("haproxy is missing (scripts/install-cluster-deps): no HTTP floor row");
    }
    let hyper_relay = BenchService::http_relay(&relay, kv_http.1);
    let scenario = "streamable HTTP, hyper relay (the floor of a Rust hop)";
    compare_http_hop(rows, scenario, &kv_http, &hyper_relay, ("/mcp", KV.via)).await;
    if let Some(haproxy) = haproxy.as_ref().filter(|_| keep_alive::available()) {
        let hop = keep_alive::Measured {
            name: "the hyper relay",
            address: hyper_relay.1,
            pid: hyper_relay.0.id(),
        };
        keep_alive::against_haproxy(rows, dir, scenario, &kv_http, haproxy, hop).await;
    }
    if which("mcp-proxy") {
        let proxy = BenchService::mcp_proxy(dir, &kv);
        let scenario = "streamable HTTP (kv over stdio), the Rust mcp-proxy";
        compare_http_hop(rows, scenario, &kv_http, &proxy, ("/", "kv/get")).await;
    } else {
        eprintln!("mcp-proxy is missing (`cargo install mcp-proxy`): no row for it");
    }
    for logged in [true, false] {
        let log = if logged {
            "session log on"
        } else {
            "session log off"
        };
        let config = write_config_as(
            dir,
            &format!("forwarding-{logged}.toml"),
            &server("kv", "kv", ""),
            logged,
        );

        if let Some(against) = against_bin() {
            let (other, other_pid) = gateway_binary_over_stdio(&against, &config).await;
            let (via, pid) = gateway_over_stdio(&config).await;
            let scenario = format!("stdio, {log}, the gateway");
            let baseline = CallPath::via(&other, KV.via, other_pid);
            let measured = CallPath::via(&via, KV.via, pid);
            compare_forwarding(rows, &KV, &scenario, "BENCH_AGAINST's", baseline, measured).await;
            via.cancel().await.unwrap();
            other.cancel().await.unwrap();

            let (other, gateway) = (
                HttpServer::gateway_binary(&against, &config),
                HttpServer::gateway(&config),
            );
            let (other_client, via) = (other.client().await, gateway.client().await);
            let scenario = format!("streamable HTTP (kv over stdio), {log}, the gateway");
            let baseline = CallPath::via(&other_client, KV.via, other.pid());
            let measured = CallPath::via(&via, KV.via, gateway.pid());
            compare_forwarding(rows, &KV, &scenario, "BENCH_AGAINST's", baseline, measured).await;
            via.cancel().await.unwrap();
            other_client.cancel().await.unwrap();
        }
        let direct = stdio_client(&kv, &[]).await;
        let (via, pid) = gateway_over_stdio(&config).await;
        let scenario = format!("stdio, {log}");
        let (baseline, measured) = (
            CallPath::direct(&direct, &KV),
            CallPath::via(&via, KV.via, pid),
        );
        compare_forwarding(rows, &KV, &scenario, "direct stdio", baseline, measured).await;
        via.cancel().await.unwrap();
        direct.cancel().await.unwrap();

        let scenario = format!("streamable HTTP (kv over stdio), {log}");
        compare_over_http(rows, &KV, &scenario, &kv_http, &config).await;
        if !logged {
            continue;
        }
        if let Some(haproxy) = &haproxy {
            let scenario = "streamable HTTP (kv over stdio), the gateway";
            gateway_against_haproxy(rows, dir, scenario, &kv_http, haproxy, &config).await;
        }

        let remote = format!("[servers.kv]\nurl = \"http://{}/mcp\"\n", kv_http.1);
        let config = write_config_as(dir, "forwarding-http.toml", &remote, true);
        if let Some(against) = against_bin() {
            let (other, gateway) = (
                HttpServer::gateway_binary(&against, &config),
                HttpServer::gateway(&config),
            );
            let (other_client, via) = (other.client().await, gateway.client().await);
            let scenario = format!("streamable HTTP (kv over streamable HTTP), {log}, the gateway");
            let baseline = CallPath::via(&other_client, KV.via, other.pid());
            let measured = CallPath::via(&via, KV.via, gateway.pid());
            compare_forwarding(rows, &KV, &scenario, "BENCH_AGAINST's", baseline, measured).await;
            via.cancel().await.unwrap();
            other_client.cancel().await.unwrap();
        }
        let scenario = format!("streamable HTTP (kv over streamable HTTP), {log}");
        compare_over_http(rows, &KV, &scenario, &kv_http, &config).await;
        if let Some(haproxy) = &haproxy {
            let scenario = "streamable HTTP (kv over streamable HTTP), the gateway";
            gateway_against_haproxy(rows, dir, scenario, &kv_http, haproxy, &config).await;
        }

        // Servers written as most remote ones are: rmcp's and the Python SDK's defaults.
        let others = [
            (&ECHO, "rmcp", Some(HttpServer::echo())),
            (&PYTHON_ECHO, "the Python SDK", HttpServer::python_echo()),
        ];
        for (probe, built_on, upstream) in others {
            let Some(upstream) = upstream else {
                eprintln!("the Python SDK is missing (scripts/install-test-peers): no row for it");
                continue;
            };
            let remote = format!("[servers.echo]\nurl = \"http://{}/mcp\"\n", upstream.1);
            let config = write_config_as(dir, "forwarding-echo.toml", &remote, true);
            let scenario =
                format!("streamable HTTP (an echo on {built_on} over streamable HTTP), {log}");
            compare_over_http(rows, probe, &scenario, &upstream, &config).await;
        }
    }
}

/// [`compare_forwarding`] of kv's own streamable HTTP against `hop`, a third-party
/// proxy in front of kv that serves kv's `get` as `(path, tool)`.
async fn compare_http_hop(
    rows: &mut Vec<Row>,
    scenario: &str,
    kv_http: &HttpServer,
    hop: &BenchService,
    (path, tool): (&str, &str),
) {
    let direct = kv_http.client().await;
    let via = http_client(hop.1, path).await;
    let (baseline, measured) = (
        CallPath::direct(&direct, &KV),
        CallPath::via(&via, tool, hop.0.id()),
    );
    compare_forwarding(
        rows,
        &KV,
        scenario,
        "direct streamable HTTP",
        baseline,
        measured,
    )
    .await;
    via.cancel().await.unwrap();
    direct.cancel().await.unwrap();
}

/// kv's `get` through a gateway serving `config` over streamable HTTP against the same
/// call through `haproxy` in front of `kv`'s own streamable HTTP, in alternating rounds:
/// the two hops side by side, with both their CPU per call; from rmcp's client, then
/// (with `wrk` at hand) from one that keeps its connections ([`keep_alive`]).
async fn gateway_against_haproxy(
    rows: &mut Vec<Row>,
    dir: &Path,
    scenario: &str,
    kv: &HttpServer,
    haproxy: &BenchService,
    config: &Path,
) {
    let gateway = HttpServer::gateway(config);
    let (through_haproxy, via) = (http_client(haproxy.1, "/mcp").await, gateway.client().await);
    let baseline = CallPath::via(&through_haproxy, KV.direct, haproxy.0.id());
    let measured = CallPath::via(&via, KV.via, gateway.pid());
    compare_forwarding(
        rows,
        &KV,
        scenario,
        "HAProxy in front of kv's HTTP",
        baseline,
        measured,
    )
    .await;
    via.cancel().await.unwrap();
    through_haproxy.cancel().await.unwrap();
    if keep_alive::available() {
        let hop = keep_alive::Measured {
            name: "the gateway",
            address: gateway.1,
            pid: gateway.pid(),
        };
        keep_alive::against_haproxy(rows, dir, scenario, kv, haproxy, hop).await;
    } else {
        eprintln!("wrk is missing (scripts/install-cluster-deps): no rows with kept connections");
    }
}

/// How many alternating rounds the direct and the gateway path take turns in, so both
/// see the same machine (loopback IPC here drifts by 2x over a day).
const ROUNDS: usize = 20;

/// `probe` called directly on `upstream` over streamable HTTP vs through a gateway serving
/// `config` over streamable HTTP.
async fn compare_over_http(
    rows: &mut Vec<Row>,
    probe: &Probe,
    scenario: &str,
    upstream: &HttpServer,
    config: &Path,
) {
    let direct = upstream.client().await;
    let gateway = HttpServer::gateway(config);
    let via = gateway.client().await;
    let (baseline, measured) = (
        CallPath::direct(&direct, probe),
        CallPath::via(&via, probe.via, gateway.pid()),
    );
    compare_forwarding(
        rows,
        probe,
        scenario,
        "direct streamable HTTP",
        baseline,
        measured,
    )
    .await;
    via.cancel().await.unwrap();
    direct.cancel().await.unwrap();
}

/// The tool a forwarding row calls: what the rows call it, its name on its server and as
/// the gateway exports it, and its arguments (JSON).
struct Probe {
    label: &'static str,
    direct: &'static str,
    via: &'static str,
    arguments: &'static str,
}

/// kv's `get`.
const KV: Probe = Probe {
    label: "kv get",
    direct: "get",
    via: "mcp__kv__get",
    arguments: r#"{"key": "k"}"#,
};

/// `echo` of the rmcp example (`examples/src/bin/echo.rs`).
const ECHO: Probe = Probe {
    label: "echo",
    direct: "echo",
    via: "mcp__echo__echo",
    arguments: r#"{"text": "k"}"#,
};

/// `echo` of the Python SDK's (`tests/servers/echo.py`).
const PYTHON_ECHO: Probe = Probe {
    label: "Python echo",
    ..ECHO
};

/// One way to call a probe's tool: a client, the tool's name there, the process in the
/// middle whose CPU is counted (none when the client talks to its server directly), and
/// the upstream process whose CPU is counted too, where a row compares upstreams.
#[derive(Clone, Copy)]
struct CallPath<'a> {
    client: &'a Client,
    tool: &'a str,
    hop: Option<u32>,
    upstream: Option<u32>,
}

impl<'a> CallPath<'a> {
    fn direct(client: &'a Client, probe: &Probe) -> Self {
        Self {
            client,
            tool: probe.direct,
            hop: None,
            upstream: None,
        }
    }

    fn via(client: &'a Client, tool: &'a str, hop: u32) -> Self {
        Self {
            client,
            tool,
            hop: Some(hop),
            upstream: None,
        }
    }

    /// This path, with the CPU of the upstream process `pid` counted as well.
    fn with_upstream(self, pid: u32) -> Self {
        Self {
            upstream: Some(pid),
            ..self
        }
    }

    /// Runs `calls` and adds the CPU the hop and the upstream spent on them to `spent`.
    async fn counted<T>(&self, spent: &mut Spent, calls: impl Future<Output = T>) -> T {
        let before = (self.hop.map(cpu_us), self.upstream.map(cpu_us));
        let out = calls.await;
        if let (Some(hop), Some(before)) = (self.hop, before.0) {
            spent.hop += cpu_us(hop) - before;
        }
        if let (Some(upstream), Some(before)) = (self.upstream, before.1) {
            spent.upstream += cpu_us(upstream) - before;
        }
        out
    }
}

/// CPU time a path's calls cost, in µs: the hop's and the upstream's.
#[derive(Clone, Copy, Default)]
struct Spent {
    hop: f64,
    upstream: f64,
}

impl Spent {
    fn per_call(self, calls: f64) -> Spent {
        Spent {
            hop: self.hop / calls,
            upstream: self.upstream / calls,
        }
    }
}

/// `probe` at concurrency 1 and 32 through `measured` against `baseline` (named so in
/// the rows), in alternating rounds: baseline, measured, baseline, …
async fn compare_forwarding(
    rows: &mut Vec<Row>,
    probe: &Probe,
    scenario: &str,
    baseline_name: &str,
    baseline: CallPath<'_>,
    measured: CallPath<'_>,
) {
    let label = probe.label;
    let args: Value = serde_json::from_str(probe.arguments).unwrap();
    let per_round = reps(2000) / ROUNDS;
    let (mut base, mut samples) = (Vec::new(), Vec::new());
    let (mut base_cpu, mut cpu) = (Spent::default(), Spent::default());
    for _ in 0..ROUNDS {
        let calls = sequential(baseline.client, baseline.tool, args.clone(), per_round);
        base.extend(baseline.counted(&mut base_cpu, calls).await);
        let calls = sequential(measured.client, measured.tool, args.clone(), per_round);
        samples.extend(measured.counted(&mut cpu, calls).await);
    }
    let calls = samples.len() as f64;
    let latency = row(
        &format!("{label}, {scenario}, concurrency 1 (vs {baseline_name})"),
        samples,
        base,
    );
    let (cpu, base_cpu) = (cpu.per_call(calls), base_cpu.per_call(calls));
    rows.push(with_cpu(latency, (baseline, base_cpu), (measured, cpu)));
    let per_round = reps(6400) / ROUNDS;
    let (mut base_time, mut time) = (0.0, 0.0);
    let (mut base_cpu, mut cpu) = (Spent::default(), Spent::default());
    for _ in 0..ROUNDS {
        let calls = throughput(baseline.client, baseline.tool, args.clone(), 32, per_round);
        base_time += baseline.counted(&mut base_cpu, calls).await;
        let calls = throughput(measured.client, measured.tool, args.clone(), 32, per_round);
        time += measured.counted(&mut cpu, calls).await;
    }
    let total = (per_round / 32 * 32 * ROUNDS) as f64;
    let rate = rate_row(
        &format!("{label}, {scenario}, concurrency 32 (vs {baseline_name})"),
        total / time,
        Some(total / base_time),
    );
    let (cpu, base_cpu) = (cpu.per_call(total), base_cpu.per_call(total));
    rows.push(with_cpu(rate, (baseline, base_cpu), (measured, cpu)));
}

/// `row` with the hop's CPU per call, and the baseline's where the baseline is a hop; and
/// the upstream's, where both paths count it.
fn with_cpu(
    row: Row,
    (baseline, base_cpu): (CallPath<'_>, Spent),
    (measured, cpu): (CallPath<'_>, Spent),
) -> Row {
    let base_hop = baseline.hop.map(|_| base_cpu.hop);
    let upstreams = baseline.upstream.and(measured.upstream);
    let base_upstream = upstreams.map(|_| base_cpu.upstream);
    Row {
        hop_cpu_us_per_call: Some(cpu.hop),
        baseline_hop_cpu_us_per_call: base_hop,
        hop_cpu_ratio: base_hop.map(|base| cpu.hop / base),
        upstream_cpu_us_per_call: upstreams.map(|_| cpu.upstream),
        baseline_upstream_cpu_us_per_call: base_upstream,
        upstream_cpu_ratio: base_upstream.map(|base| cpu.upstream / base),
        ..row
    }
}

/// Schemas are compiled and the SDK generated once per definition, never per call: the
/// gateway's own counters after warming up vs after many more calls and runs.
async fn repeated_work(dir: &Path, rows: &mut Vec<Row>) {
    let config = write_config(
        dir,
        &format!("[gateway]\nmode = \"both\"\n{}", server("kv", "kv", "")),
    );
    let gateway = HttpServer::gateway(&config);
    let client = gateway.client().await;
    let get = || params("mcp__kv__get", json!({"key": "k"}));
    let run = || {
        params(
            "run_code",
            json!({"code": "await tools.kv.get({ key: 'k' }); return 1"}),
        )
    };
    // Warm up: listing describes run_code (the SDK), the first call compiles kv's schemas.
    client.peer().list_all_tools().await.unwrap();
    client.peer().call_tool(get()).await.unwrap();
    client.peer().call_tool(run()).await.unwrap();
    let before = gateway.work_done().await;
    let (calls, runs) = (reps(2000), reps(100));
    for _ in 0..calls {
        client.peer().call_tool(get()).await.unwrap();
    }
    for _ in 0..runs {
        client.peer().call_tool(run()).await.unwrap();
        client.peer().list_all_tools().await.unwrap();
    }
    let after = gateway.work_done().await;
    let (schemas, sdks) = (after.0 - before.0, after.1 - before.1);
    rows.push(Row {
        scenario: format!(
            "repeated work over {calls} calls, {runs} run_code runs and listings after warm-up"
        ),
        schema_compilations: Some(schemas),
        sdk_generations: Some(sdks),
        ..Row::default()
    });
    client.cancel().await.unwrap();
}

/// A tool that does nothing: the executor for measuring the pipeline alone.
struct NoOp;

impl BuiltinTool for NoOp {
    fn definition(&self, _session: &Session) -> Tool {
        Tool::new("noop", "does nothing", Arc::new(serde_json::Map::new()))
    }
}

impl Executor for NoOp {
    fn call<'a>(
        &'a self,
        _i: &'a Invocation,
        _s: CancellationToken,
        _t: &'a opentelemetry::Context,
    ) -> BoxFuture<'a, Result<ToolResult, ToolError>> {
        Box::pin(async { Ok(ToolResult::success(vec![Block::text("ok")])) })
    }
}

/// The built-in pipeline for `config` (`[log] sessions_dir` under `dir`), over `registry`,
/// and a session to run calls in.
fn bench_pipeline(
    config: &Config,
    registry: Arc<Registry>,
    dir: &Path,
) -> (mcp_gateway::pipeline::Pipeline, Arc<Session>) {
    let metrics = Arc::new(mcp_gateway::observe::metrics::Metrics::new());
    let state = mcp_gateway::state::open(&config.cluster).unwrap();
    let pipeline = mcp_gateway::policies::builtin(config, metrics, state).build(
        registry,
        PipelineSettings {
            ask_fallback: config.gate.ask_fallback,
            ask_timeout: Duration::from_millis(config.gate.ask_timeout_ms),
            console_asks: Arc::default(),
            max_argument_depth: 64,
            tracer: Default::default(),
        },
    );
    let profile = Profiles::new(config).get(None).unwrap();
    let log =
        mcp_gateway::observe::session_log::SessionLog::create(&dir.join("sessions"), "bench").ok();
    (
        pipeline,
        Arc::new(Session::new(
            "bench".into(),
            profile,
            log,
            Opening::own(None, Transport::Cli),
        )),
    )
}

/// Every built-in policy on: a gate rule, the rate limit, retry, reminders, the session
/// log (under `dir`) and metrics; `servers` adds upstreams.
fn every_policy(dir: &Path, servers: &str) -> Config {
    let text = format!(
        "{servers}[[policy]]\ntool = \"mcp__fs__*\"\ndecision = \"deny\"\n[guards]\nmax_calls_per_minute = 100000000\n[log]\nsessions_dir = {:?}\n",
        dir.join("sessions").to_string_lossy()
    );
    Config::from_toml(&text).unwrap()
}

fn invocation(session: &Arc<Session>, tool: &str, arguments: Value, target: Target) -> Invocation {
    Invocation {
        session: session.clone(),
        tool: tool.into(),
        arguments: arguments.as_object().cloned(),
        target: Some(target),
        cancel: CancellationToken::new(),
        caller: None,
        origin: Origin::Client,
        started: Instant::now(),
        trace: opentelemetry::Context::new(),
    }
}

/// The pipeline's own stages around a built-in no-op tool (gate, guard, reminder,
/// finalize, observers; a built-in tool has no schema to validate, no upstream to retry
/// and no timeout) vs calling the no-op directly.
async fn pipeline_alone(dir: &Path, rows: &mut Vec<Row>) {
    let config = every_policy(dir, "");
    let (registry, _updates) = Registry::start(&config, CancellationToken::new()).await;
    let (pipeline, session) = bench_pipeline(&config, registry, dir);
    let noop: Arc<dyn BuiltinTool> = Arc::new(NoOp);
    let call = |i: usize| {
        invocation(
            &session,
            "noop",
            json!({"i": i % 7}),
            Target::Builtin(noop.clone()),
        )
    };
    let n = reps(20_000);
    let mut base = Vec::with_capacity(n);
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let inv = call(i);
        let started = Instant::now();
        let _ = noop.call(&inv, inv.cancel.clone(), &inv.trace).await;
        base.push(started.elapsed());
        let inv = call(i);
        let started = Instant::now();
        let _ = pipeline.run(&inv).await;
        samples.push(started.elapsed());
    }
    rows.push(row(
        "pipeline stages around a built-in no-op tool (vs the no-op alone)",
        samples,
        base,
    ));
}

/// The whole pipeline on a federated tool, every stage running: argument and output
/// validation, retry (kv's `get` is read-only), the timeout (`timeout_ms` set), gate,
/// guard, reminders, session log and metrics; vs calling the same kv build directly, in
/// alternating rounds. The difference is what the pipeline and the gateway's upstream
/// client add to a call, without any downstream transport.
async fn pipeline_federated(dir: &Path, rows: &mut Vec<Row>) {
    let config = every_policy(dir, &server("kv", "kv", "timeout_ms = 30000\n"));
    let shutdown = CancellationToken::new();
    let (registry, _updates) = Registry::start(&config, shutdown.clone()).await;
    registry.first_attempts().await;
    let get = registry
        .catalog()
        .tools
        .get("mcp__kv__get")
        .cloned()
        .expect("kv is up and offers get");
    assert!(get.retryable && get.timeout.is_some() && get.definition.output_schema.is_some());
    let (pipeline, session) = bench_pipeline(&config, registry.clone(), dir);
    let direct = stdio_client(&release_bin("kv"), &[]).await;
    let args = json!({"key": "k"});
    let per_round = reps(4000) / ROUNDS;
    let (mut base, mut samples) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        base.extend(sequential(&direct, "get", args.clone(), per_round).await);
        for _ in 0..per_round {
            let inv = invocation(
                &session,
                "mcp__kv__get",
                args.clone(),
                Target::Federated(get.clone()),
            );
            let started = Instant::now();
            let result = pipeline.run(&inv).await;
            samples.push(started.elapsed());
            assert!(!result.is_error(), "{result:?}");
        }
    }
    rows.push(row(
        "pipeline on a federated tool, every stage running (kv get over stdio, vs kv directly)",
        samples,
        base,
    ));
    direct.cancel().await.unwrap();
    shutdown.cancel();
    registry.stop_all();
}

/// tools/list of 5,000 tools across 10 upstreams vs listing them directly.
async fn big_list(dir: &Path, rows: &mut Vec<Row>) {
    let dynamic = release_bin("dynamic");
    let mut text = String::new();
    let mut envs = Vec::new();
    for s in 0..10 {
        let names: Vec<String> = (0..500).map(|t| format!("tool_{s}_{t}")).collect();
        let env = serde_json::to_string(&names).unwrap();
        text.push_str(&server(
            &format!("d{s}"),
            "dynamic",
            &format!("env = {{ DYNAMIC_TOOLS = {env:?} }}\n"),
        ));
        envs.push(env);
    }
    let config = write_config(dir, &text);
    let mut directs = Vec::new();
    for env in &envs {
        let mut command = tokio::process::Command::new(&dynamic);
        command.env("DYNAMIC_TOOLS", env).env("RUST_LOG", "error");
        let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
        directs.push(().serve(transport).await.unwrap());
    }
    let gateway = gateway_over_stdio(&config).await.0;
    let n = reps(30);
    let (mut base, mut samples) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let started = Instant::now();
        for client in &directs {
            client.peer().list_all_tools().await.unwrap();
        }
        base.push(started.elapsed());
        let started = Instant::now();
        let tools = gateway.peer().list_all_tools().await.unwrap();
        samples.push(started.elapsed());
        assert!(tools.len() >= 5000, "{} tools", tools.len());
    }
    rows.push(row(
        "tools/list, 5,000 tools / 10 upstreams (vs listing the 10 directly)",
        samples,
        base,
    ));
    gateway.cancel().await.unwrap();
    for client in directs {
        client.cancel().await.unwrap();
    }
}

/// sdkgen for 5,000 tools.
fn sdk_generation(rows: &mut Vec<Row>) {
    let tools: Vec<sdkgen::ToolSpec> = (0..5000)
        .map(|i| sdkgen::ToolSpec {
            federated_name: format!("mcp__s{}__tool_{i}", i % 10),
            server: format!("s{}", i % 10),
            name: format!("tool_{i}"),
            title: None,
            description: Some(format!("Tool number {i}: does a thing with its arguments.")),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "where"},
                "count": {"type": "integer", "minimum": 0},
                "mode": {"enum": ["a", "b", "c"]},
                "tags": {"type": "array", "items": {"type": "string"}}
            }, "required": ["path"]}),
            output_schema: (i % 3 == 0)
                .then(|| json!({"type": "object", "properties": {"ok": {"type": "boolean"}}})),
            annotations: Some(json!({"readOnlyHint": i % 2 == 0})),
        })
        .collect();
    let samples: Vec<Duration> = (0..reps(20))
        .map(|_| {
            let started = Instant::now();
            std::hint::black_box(sdkgen::generate(&tools, &sdkgen::Options::default()));
            started.elapsed()
        })
        .collect();
    rows.push(row("sdkgen, 5,000 tools", samples, Vec::new()));
}

/// run_code: `return 1` with idle gaps and back to back; 100 read-only 10 ms calls.
async fn run_code(dir: &Path, rows: &mut Vec<Row>) {
    let slow = release_bin("slow");
    let config = write_config(
        dir,
        &format!(
            "[gateway]\nmode = \"both\"\n{}{}",
            server("kv", "kv", ""),
            server("slow", "slow", "")
        ),
    );
    let gateway = gateway_over_stdio(&config).await.0;
    let against = match against_bin() {
        Some(binary) => Some(gateway_binary_over_stdio(&binary, &config).await.0),
        None => None,
    };
    let run = |code: &str| params("run_code", json!({"code": code}));
    let n = reps(40);
    let mut base = Vec::new();
    let mut samples = Vec::new();
    let mut against_samples = Vec::new();
    for _ in 0..n {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let started = Instant::now();
        gateway
            .peer()
            .call_tool(params("mcp__kv__get", json!({"key": "k"})))
            .await
            .unwrap();
        base.push(started.elapsed());
        samples.push(idle_return_one(&gateway).await);
        if let Some(against) = &against {
            against_samples.push(idle_return_one(against).await);
        }
    }
    if let Some(against) = against {
        rows.push(row(
            "run_code `return 1`, idle gaps (vs BENCH_AGAINST's gateway, calls alternating)",
            samples.clone(),
            against_samples,
        ));
        against.cancel().await.unwrap();
    }
    rows.push(row(
        "run_code `return 1`, idle gaps (vs a kv call through the gateway)",
        samples,
        base,
    ));
    let started = Instant::now();
    for _ in 0..n {
        gateway.peer().call_tool(run("return 1")).await.unwrap();
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    rows.push(rate_row("run_code `return 1`, back to back", rate, None));

    let direct = stdio_client(&slow, &[]).await;
    let fan_out = "await Promise.all(Array.from({ length: 100 }, () => tools.slow.wait({ ms: 10 }))); return 1;";
    let (mut base, mut samples) = (Vec::new(), Vec::new());
    for _ in 0..reps(20) {
        let started = Instant::now();
        for _wave in 0..10 {
            let calls: Vec<_> = (0..10)
                .map(|_| direct.peer().call_tool(params("wait", json!({"ms": 10}))))
                .collect();
            futures::future::join_all(calls).await;
        }
        base.push(started.elapsed());
        let started = Instant::now();
        let result = gateway.peer().call_tool(run(fan_out)).await.unwrap();
        samples.push(started.elapsed());
        assert_ne!(result.is_error, Some(true), "{result:?}");
    }
    rows.push(row(
        "run_code, 100 read-only 10 ms calls, 10 in parallel (vs 10 direct waves)",
        samples,
        base,
    ));
    direct.cancel().await.unwrap();
    gateway.cancel().await.unwrap();
}

/// One run_code `return 1` after an idle gap: how long it took.
async fn idle_return_one(gateway: &Client) -> Duration {
    tokio::time::sleep(Duration::from_millis(150)).await;
    let started = Instant::now();
    let code = params("run_code", json!({"code": "return 1"}));
    let result = gateway.peer().call_tool(code).await.unwrap();
    let took = started.elapsed();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    took
}

/// Resident memory: idle with 3 upstreams, and per concurrent run_code.
async fn memory(dir: &Path, rows: &mut Vec<Row>) {
    let config = write_config(
        dir,
        &format!(
            "[gateway]\nmode = \"both\"\n{}{}{}",
            server("kv", "kv", ""),
            server("slow", "slow", ""),
            server("dyn", "dynamic", "")
        ),
    );
    let gateway = HttpServer::gateway(&config);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = rss_kb(gateway.pid());
    rows.push(Row {
        scenario: "gateway RSS idle, 3 upstreams".into(),
        gateway_rss_mb: Some(idle as f64 / 1024.0),
        ..Row::default()
    });
    let client = Arc::new(gateway.client().await);
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .peer()
                    .call_tool(params(
                        "run_code",
                        json!({"code": "await new Promise((r) => setTimeout(r, 3000)); return 1;"}),
                    ))
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let workers = worker_pids(gateway.pid());
    let workers_kb: u64 = workers.iter().copied().map(rss_kb).sum();
    let during = rss_kb(gateway.pid());
    for run in runs {
        let _ = run.await;
    }
    rows.push(Row {
        scenario:
            "per concurrent run_code (4 in flight): each worker, and the gateway's growth per run"
                .into(),
        worker_rss_mb: Some(workers_kb as f64 / workers.len().max(1) as f64 / 1024.0),
        workers: Some(workers.len()),
        gateway_rss_growth_per_run_mb: Some(during.saturating_sub(idle) as f64 / 4.0 / 1024.0),
        ..Row::default()
    });
}

async fn code_gateway(dir: &Path) -> (Client, u32) {
    let config = write_config(
        dir,
        &format!("[gateway]\nmode = \"both\"\n{}", server("kv", "kv", "")),
    );
    gateway_over_stdio(&config).await
}

/// A run of `code` through the gateway; panics on a failed run.
async fn run_ok(gateway: &Client, code: &str) -> Duration {
    let started = Instant::now();
    let result = gateway
        .peer()
        .call_tool(params("run_code", json!({"code": code})))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    started.elapsed()
}

/// run_code, 8 concurrent runs of ~100 ms of compute each, against the ideal on this
/// machine's cores: the work of one run measured alone, times 8, spread over the cores.
async fn run_code_compute(dir: &Path, rows: &mut Vec<Row>) {
    let (gateway, _) = code_gateway(dir).await;
    let spin = |n: u64| {
        format!("let x = 0; for (let i = 0; i < {n}; i++) {{ x = (x + i) % 1000003; }} return x;")
    };
    let empty = run_ok(&gateway, "return 1").await;
    // Calibrate the loop to ~100 ms alone (beyond the cost of an empty run).
    let mut n = 1_000_000u64;
    for _ in 0..4 {
        let took = run_ok(&gateway, &spin(n)).await.saturating_sub(empty);
        n = ((n as f64) * 0.100 / took.as_secs_f64().max(0.001)) as u64;
    }
    let program = spin(n);
    let mut alone = Vec::new();
    for _ in 0..reps(5) {
        alone.push(run_ok(&gateway, &program).await);
    }
    let one = Duration::from_secs_f64(percentile(&mut alone, 0.5) / 1e6);
    let cores = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let ideal = one * 8 / cores as u32;
    let gateway = Arc::new(gateway);
    let mut waves = Vec::new();
    for _ in 0..reps(5) {
        let started = Instant::now();
        let runs: Vec<_> = (0..8)
            .map(|_| {
                let (gateway, program) = (gateway.clone(), program.clone());
                tokio::spawn(async move { run_ok(&gateway, &program).await })
            })
            .collect();
        for run in runs {
            run.await.unwrap();
        }
        waves.push(started.elapsed());
    }
    let wall = percentile(&mut waves, 0.5) / 1e3;
    rows.push(summary_row(format!(
        "run_code, 8 concurrent runs of ~100 ms compute: {wall:.0} ms vs ideal {:.0} ms \
             on {cores} cores ({:.0} ms alone)",
        ideal.as_secs_f64() * 1e3,
        one.as_secs_f64() * 1e3
    )));
}

/// Proportional set size of `pid` (shared pages split among their sharers), in kB: what a
/// forked worker really adds, unlike its RSS, which counts the pages it shares.
fn pss_kb(pid: u32) -> u64 {
    proc_kb(pid, "smaps_rollup", "Pss:")
}

/// Memory of run_code: the gateway plus its idle workers (the template every runner is
/// copied from, and the runner ready for the next run), and what each concurrent run adds.
/// RSS counts a page in every process that maps it (the template, the runner and the
/// gateway share the executable); PSS splits shared pages among their sharers.
async fn code_memory(dir: &Path, rows: &mut Vec<Row>) {
    let (gateway, pid) = code_gateway(dir).await;
    run_ok(&gateway, "return 1").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle: Vec<u32> = worker_pids(pid);
    let sum = |measure: fn(u32) -> u64| -> f64 {
        (measure(pid) + idle.iter().copied().map(measure).sum::<u64>()) as f64 / 1024.0
    };
    let workers_rss: u64 = idle.iter().copied().map(rss_kb).sum();
    rows.push(summary_row(format!(
        "run_code idle, gateway + template + runner ({} workers): RSS {:.1} MB \
         (gateway {:.1}, workers {:.1}), PSS {:.1} MB",
        idle.len(),
        sum(rss_kb),
        rss_kb(pid) as f64 / 1024.0,
        workers_rss as f64 / 1024.0,
        sum(pss_kb),
    )));
    let gateway = Arc::new(gateway);
    let before = rss_kb(pid);
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let gateway = gateway.clone();
            tokio::spawn(async move {
                run_ok(
                    &gateway,
                    "const keep = Array.from({ length: 1000 }, (_, i) => ({ i })); \
                     await new Promise((r) => setTimeout(r, 2000)); return keep.length;",
                )
                .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let running: Vec<u32> = worker_pids(pid)
        .into_iter()
        .filter(|worker| !idle.contains(worker))
        .collect();
    let count = running.len().max(1) as f64;
    let rss: u64 = running.iter().copied().map(rss_kb).sum();
    let pss: u64 = running.iter().copied().map(pss_kb).sum();
    let gateway_growth = rss_kb(pid).saturating_sub(before);
    for run in runs {
        run.await.unwrap();
    }
    rows.push(summary_row(format!(
        "run_code per concurrent run ({} in flight): worker RSS {:.1} MB, PSS {:.1} MB; \
             gateway +{:.2} MB",
        running.len(),
        rss as f64 / count / 1024.0,
        pss as f64 / count / 1024.0,
        gateway_growth as f64 / count / 1024.0
    )));
}

/// The gateway's code workers: those running programs, the template and the runner.
fn worker_pids(gateway: u32) -> Vec<u32> {
    children(gateway)
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.contains("__code-worker"))
        })
        .collect()
}

/// The processes whose parent is `parent`.
fn children(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            ppid == Some(parent)
        })
        .collect()
}

/// A service the cluster scenarios need (Redis, HAProxy), listening on `.1`; killed on
/// drop.
struct BenchService(std::process::Child, std::net::SocketAddr);

impl BenchService {
    /// Runs `command` (`what` names it, with where it comes from) and waits until
    /// `address` accepts connections.
    fn spawn(
        mut command: std::process::Command,
        address: std::net::SocketAddr,
        what: &str,
    ) -> BenchService {
        let child = command
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        // Owned before waiting, so a failed start still kills the child.
        let service = BenchService(child, address);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(address).is_err() {
            assert!(Instant::now() < deadline, "{what} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        service
    }

    /// A `redis-server` on a free loopback port, persisting nothing.
    fn redis() -> BenchService {
        let address = free_address();
        let mut command = std::process::Command::new("redis-server");
        command
            .args(["--port", &address.port().to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"]);
        Self::spawn(
            command,
            address,
            "redis-server (scripts/install-cluster-deps)",
        )
    }

    /// The Rust `mcp-proxy` (`cargo install mcp-proxy`) serving streamable HTTP at `/` on
    /// a free port, in front of `kv` over stdio, its tools named `kv/<tool>`. Its log level
    /// is set: without an `[observability]` section, 0.6.0 logs every message at debug
    /// level (its `Default` leaves the level empty, not its documented `info`).
    fn mcp_proxy(dir: &Path, kv: &Path) -> BenchService {
        let address = free_address();
        let config = format!(
            "[proxy]\nname = \"bench\"\nseparator = \"/\"\n[proxy.listen]\nhost = \"{}\"\n\
             port = {}\n[observability]\nlog_level = \"info\"\n\
             [[backends]]\nname = \"kv\"\ntransport = \"stdio\"\ncommand = {:?}\n",
            address.ip(),
            address.port(),
            kv.to_string_lossy()
        );
        let path = dir.join("mcp-proxy.toml");
        std::fs::write(&path, config).unwrap();
        let mut command = std::process::Command::new("mcp-proxy");
        command.arg("--config").arg(&path);
        Self::spawn(command, address, "mcp-proxy (cargo install mcp-proxy)")
    }

    /// `haproxy` balancing `backends` round robin on a free port, with `options` (lines
    /// of its `defaults` section) besides plain HTTP mode and timeouts.
    /// This bench's [`relays::HTTP`] in front of `upstream`'s `/mcp`.
    fn http_relay(bench: &Path, upstream: std::net::SocketAddr) -> BenchService {
        let address = free_address();
        let mut command = std::process::Command::new(bench);
        command.args([
            relays::HTTP.to_owned(),
            address.to_string(),
            format!("http://{upstream}/mcp"),
        ]);
        BenchService::spawn(command, address, "the bench's HTTP relay")
    }

    fn haproxy(dir: &Path, backends: &[std::net::SocketAddr], options: &str) -> BenchService {
        let address = free_address();
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, b)| format!("    server g{i} {b}\n"))
            .collect();
        let config = format!(
            "global\n    maxconn 4096\ndefaults\n    mode http\n    timeout connect 2s\n    \
             timeout client 60s\n    timeout server 60s\n{options}\
             frontend mcp\n    bind {address}\n    default_backend gateways\n\
             backend gateways\n    balance roundrobin\n{servers}"
        );
        let path = dir.join(format!("haproxy-{}.cfg", address.port()));
        std::fs::write(&path, config).unwrap();
        let mut command = std::process::Command::new("haproxy");
        command.arg("-f").arg(&path).arg("-db");
        Self::spawn(command, address, "haproxy (scripts/install-cluster-deps)")
    }
}

impl Drop for BenchService {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 18: the added latency of a Redis-backed session over an in-memory one (one
/// gateway each, kv `get` at concurrency 1), and calls/s at concurrency 32 through three
/// Redis-backed replicas behind HAProxy vs one of them alone; both in alternating rounds.
async fn cluster(dir: &Path, rows: &mut Vec<Row>) {
    let redis = BenchService::redis();
    let kv = server("kv", "kv", "");
    let memory_gateway = HttpServer::gateway(&write_config(dir, &kv));
    let shared_dir = dir.join("shared");
    std::fs::create_dir_all(&shared_dir).unwrap();
    let shared_config = write_config(
        &shared_dir,
        &format!("{kv}\n[cluster]\nredis_url = \"redis://{}/0\"\n", redis.1),
    );
    let replicas: Vec<_> = (0..3)
        .map(|_| HttpServer::gateway(&shared_config))
        .collect();
    let in_memory = memory_gateway.client().await;
    let alone = replicas[0].client().await;
    let args = json!({"key": "k"});
    let per_round = reps(2000) / ROUNDS;
    let (mut base, mut samples) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        base.extend(sequential(&in_memory, "mcp__kv__get", args.clone(), per_round).await);
        samples.extend(sequential(&alone, "mcp__kv__get", args.clone(), per_round).await);
    }
    rows.push(row(
        "kv get, one gateway, Redis-backed session (vs in-memory session)",
        samples,
        base,
    ));
    in_memory.cancel().await.unwrap();
    drop(memory_gateway);

    let backends: Vec<_> = replicas.iter().map(|r| r.1).collect();
    // A new server connection per request, so that each request is balanced anew.
    let haproxy = BenchService::haproxy(dir, &backends, "    option http-server-close\n");
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(format!(
        "http://{}/mcp",
        haproxy.1
    ));
    let balanced = ().serve(transport).await.unwrap();
    let per_round = reps(6400) / ROUNDS;
    let (mut base_time, mut time) = (0.0, 0.0);
    for _ in 0..ROUNDS {
        base_time += throughput(&alone, "mcp__kv__get", args.clone(), 32, per_round).await;
        time += throughput(&balanced, "mcp__kv__get", args.clone(), 32, per_round).await;
    }
    let total = (per_round / 32 * 32 * ROUNDS) as f64;
    rows.push(rate_row(
        "kv get, concurrency 32, 3 Redis-backed replicas behind HAProxy round robin \
         (vs one replica alone)",
        total / time,
        Some(total / base_time),
    ));
    balanced.cancel().await.unwrap();
    alone.cancel().await.unwrap();
}

fn main() {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    relays::run_if_named(&args);
    let first = args.first().map(|a| a.as_os_str());
    // The pipeline scenario builds a code runtime whose workers run this executable.
    if first == Some(mcp_gateway::code::tool::WORKER_SUBCOMMAND.as_ref()) {
        std::process::exit(match mcp_gateway::code::worker_main() {
            code if code == std::process::ExitCode::SUCCESS => 0,
            _ => 1,
        });
    }
    let started = report::Started::now();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    runtime.block_on(async {
        if selected("pipeline") {
            pipeline_alone(dir.path(), &mut rows).await;
            pipeline_federated(dir.path(), &mut rows).await;
        }
        if selected("sdkgen") {
            sdk_generation(&mut rows);
        }
        if selected("forwarding") {
            forwarding(dir.path(), &mut rows).await;
        }
        if selected("work") {
            repeated_work(dir.path(), &mut rows).await;
        }
        if selected("list") {
            big_list(dir.path(), &mut rows).await;
        }
        if selected("run_code") {
            run_code(dir.path(), &mut rows).await;
        }
        if selected("memory") {
            memory(dir.path(), &mut rows).await;
        }
        if selected("search") {
            search::listing_sizes(dir.path(), &mut rows).await;
            search::at_scale(dir.path(), &mut rows).await;
            search::semantic_at_scale(dir.path(), &mut rows).await;
        }
        if selected("code_compute") {
            run_code_compute(dir.path(), &mut rows).await;
        }
        if selected("code_memory") {
            code_memory(dir.path(), &mut rows).await;
        }
        if selected("cluster") {
            cluster(dir.path(), &mut rows).await;
        }
        if selected("confinement") {
            confinement::start_up(dir.path(), &mut rows).await;
            confinement::per_call(dir.path(), &mut rows).await;
        }
        if selected("pinning") {
            pinning::many_tools(dir.path(), &mut rows).await;
        }
    });
    report::write(&rows, &started, &target_dir());
}
