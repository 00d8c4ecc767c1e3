//! What the gateway costs, measured against a baseline in the same run (ratios, medians),
//! with real processes: the kv, slow and dynamic example servers, the built gateway
//! binary, and rmcp clients. Prints a markdown table and writes
//! `target/bench-report.json`.
//!
//! Run with `cargo bench -p mcp-gateway --bench gateway` (it builds the example servers
//! in release first if they are missing). `BENCH_QUICK=1` cuts repetitions;
//! `BENCH_ONLY=forwarding,run_code` runs some groups (pipeline, sdkgen, forwarding, list,
//! work, run_code, memory, cluster; cluster needs redis-server and haproxy from
//! scripts/install-cluster-deps).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_gateway::config::Config;
use mcp_gateway::pipeline::{
    BoxFuture, BuiltinTool, Executor, Invocation, Origin, PipelineSettings, Session, Target,
    ToolError,
};
use mcp_gateway::registry::Registry;
use mcp_gateway::registry::profile::Profiles;
use rmcp::RoleClient;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, Tool};
use rmcp::service::RunningService;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

type Client = RunningService<RoleClient, ()>;

/// One row of the report.
#[derive(serde::Serialize)]
struct Row {
    scenario: String,
    p50_us: f64,
    p99_us: f64,
    calls_per_s: f64,
    baseline_p50_us: f64,
    ratio: f64,
    /// CPU the gateway process spent per call (all threads): unlike latency, this hardly
    /// moves when other processes compete for the cores.
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway_cpu_us_per_call: Option<f64>,
}

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

fn row(scenario: &str, mut samples: Vec<Duration>, mut baseline: Vec<Duration>, per_s: f64) -> Row {
    let p50 = percentile(&mut samples, 0.5);
    let p99 = percentile(&mut samples, 0.99);
    let base = if baseline.is_empty() {
        0.0
    } else {
        percentile(&mut baseline, 0.5)
    };
    Row {
        scenario: scenario.to_owned(),
        p50_us: p50,
        p99_us: p99,
        calls_per_s: per_s,
        baseline_p50_us: base,
        ratio: if base > 0.0 { p50 / base } else { 0.0 },
        gateway_cpu_us_per_call: None,
    }
}

/// A row that states its figure in the scenario text (rates, sizes), with no latencies.
fn summary_row(scenario: String, calls_per_s: f64, ratio: f64) -> Row {
    Row {
        scenario,
        p50_us: 0.0,
        p99_us: 0.0,
        calls_per_s,
        baseline_p50_us: 0.0,
        ratio,
        gateway_cpu_us_per_call: None,
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// A release binary of the workspace, built on demand.
fn release_bin(package: &str, name: &str) -> PathBuf {
    let path = target_dir().join("release").join(name);
    if !path.exists() {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", package])
            .status()
            .expect("cargo build");
        assert!(status.success(), "building {package} failed");
    }
    path
}

fn gateway_bin() -> PathBuf {
    release_bin("mcp-gateway", "mcp-gateway")
}

fn server(name: &str, bin: &str, env: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = {:?}\n{env}",
        release_bin("mcp-gateway-examples", bin).to_string_lossy()
    )
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(&path, format!("{text}\n[log]\nsessions_dir = false\n")).unwrap();
    path
}

async fn stdio_client(program: &Path, args: &[&str]) -> Client {
    stdio_client_with_pid(program, args).await.0
}

/// A client of `program` over stdio, and the server's process id.
async fn stdio_client_with_pid(program: &Path, args: &[&str]) -> (Client, u32) {
    let mut command = tokio::process::Command::new(program);
    command.args(args).env("RUST_LOG", "error");
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

/// Calls per second with `concurrency` calls in flight, `total` calls in all.
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
    (per_task * concurrency) as f64 / started.elapsed().as_secs_f64()
}

fn free_address() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A server process listening for streamable HTTP at `/mcp`; killed on drop.
struct HttpServer(std::process::Child, std::net::SocketAddr);

impl HttpServer {
    /// `mcp-gateway serve` on `config`.
    fn gateway(config: &Path) -> HttpServer {
        let address = free_address();
        let mut command = std::process::Command::new(gateway_bin());
        command
            .args(["serve", "--listen", &address.to_string(), "--config"])
            .arg(config);
        HttpServer::start(command, address)
    }

    /// The kv example serving HTTP itself: the direct baseline.
    fn kv() -> HttpServer {
        let address = free_address();
        let mut command = std::process::Command::new(release_bin("mcp-gateway-examples", "kv"));
        command.args(["--http", &address.to_string()]);
        HttpServer::start(command, address)
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
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(format!(
            "http://{}/mcp",
            self.1
        ));
        ().serve(transport).await.unwrap()
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

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// kv directly vs through the gateway, over stdio and over streamable HTTP (the gateway's
/// own upstream connection to kv is stdio in both cases).
async fn forwarding(dir: &Path, rows: &mut Vec<Row>) {
    let kv = release_bin("mcp-gateway-examples", "kv");
    let config = write_config(dir, &server("kv", "kv", ""));

    let direct = stdio_client(&kv, &[]).await;
    let (via, pid) = stdio_client_with_pid(
        &gateway_bin(),
        &["serve", "--stdio", "--config", &config.to_string_lossy()],
    )
    .await;
    compare_forwarding(rows, "stdio", &direct, &via, pid).await;
    via.cancel().await.unwrap();
    direct.cancel().await.unwrap();

    let kv_http = HttpServer::kv();
    let direct = kv_http.client().await;
    let gateway = HttpServer::gateway(&config);
    let via = gateway.client().await;
    compare_forwarding(rows, "streamable HTTP", &direct, &via, gateway.pid()).await;
    via.cancel().await.unwrap();
    direct.cancel().await.unwrap();
}

/// `get` on kv at concurrency 1 and 32, through the gateway (`via`, process `gateway`) and
/// directly, interleaved so both see the same machine.
async fn compare_forwarding(
    rows: &mut Vec<Row>,
    transport: &str,
    direct: &Client,
    via: &Client,
    gateway: u32,
) {
    let args = json!({"key": "k"});
    let n = reps(2000);
    let base = sequential(direct, "get", args.clone(), n).await;
    let cpu_before = cpu_us(gateway);
    let samples = sequential(via, "mcp__kv__get", args.clone(), n).await;
    let gateway_cpu = (cpu_us(gateway) - cpu_before) / n as f64;
    rows.push(Row {
        gateway_cpu_us_per_call: Some(gateway_cpu),
        ..row(
            &format!("kv get, {transport}, concurrency 1 (vs direct {transport})"),
            samples,
            base,
            0.0,
        )
    });
    let base_rate = throughput(direct, "get", args.clone(), 32, reps(6400)).await;
    let rate = throughput(via, "mcp__kv__get", args, 32, reps(6400)).await;
    rows.push(summary_row(
        format!("kv get, {transport}, concurrency 32: {rate:.0} vs direct {base_rate:.0} calls/s"),
        rate,
        rate / base_rate,
    ));
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
    rows.push(summary_row(
        format!(
            "repeated work over {calls} calls, {runs} run_code runs and listings after warm-up: \
             {schemas} schema compilations, {sdks} SDK generations"
        ),
        0.0,
        (schemas + sdks) as f64,
    ));
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
    ) -> BoxFuture<'a, Result<CallToolResult, ToolError>> {
        Box::pin(async { Ok(CallToolResult::success(vec![ContentBlock::text("ok")])) })
    }
}

/// The pipeline with every built-in policy on vs calling the executor directly.
async fn pipeline_alone(dir: &Path, rows: &mut Vec<Row>) {
    let text = format!(
        "[[policy]]\ntool = \"mcp__fs__*\"\ndecision = \"deny\"\n[guards]\nmax_calls_per_minute = 100000000\n[log]\nsessions_dir = {:?}\n",
        dir.join("sessions").to_string_lossy()
    );
    let config: Config = Config::from_toml(&text).unwrap();
    let (registry, _updates) = Registry::start(&config, CancellationToken::new()).await;
    let metrics = Arc::new(mcp_gateway::observe::metrics::Metrics::new());
    let state = mcp_gateway::state::open(&config.cluster).unwrap();
    let pipeline = mcp_gateway::policies::builtin(&config, metrics, state).build(
        registry,
        PipelineSettings {
            ask_fallback: config.gate.ask_fallback,
            max_argument_depth: 64,
            tracer: Default::default(),
        },
    );
    let profile = Profiles::new(&config).get(None).unwrap();
    let log =
        mcp_gateway::observe::session_log::SessionLog::create(&dir.join("sessions"), "bench").ok();
    let session = Arc::new(Session::new("bench".into(), profile, log));
    let noop: Arc<dyn BuiltinTool> = Arc::new(NoOp);
    let invocation = |i: usize| Invocation {
        session: session.clone(),
        tool: "noop".into(),
        arguments: json!({"i": i % 7}).as_object().cloned(),
        target: Some(Target::Builtin(noop.clone())),
        cancel: CancellationToken::new(),
        progress: None,
        peer: None,
        origin: Origin::Client,
        started: Instant::now(),
        trace: opentelemetry::Context::new(),
    };
    let n = reps(20_000);
    let mut base = Vec::with_capacity(n);
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let inv = invocation(i);
        let started = Instant::now();
        let _ = noop.call(&inv, inv.cancel.clone()).await;
        base.push(started.elapsed());
        let inv = invocation(i);
        let started = Instant::now();
        let _ = pipeline.run(&inv).await;
        samples.push(started.elapsed());
    }
    rows.push(row(
        "pipeline, every built-in policy on (vs no-op executor)",
        samples,
        base,
        0.0,
    ));
}

/// tools/list of 5,000 tools across 10 upstreams vs listing them directly.
async fn big_list(dir: &Path, rows: &mut Vec<Row>) {
    let dynamic = release_bin("mcp-gateway-examples", "dynamic");
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
    let gateway = stdio_client(
        &gateway_bin(),
        &["serve", "--stdio", "--config", &config.to_string_lossy()],
    )
    .await;
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
        0.0,
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
    rows.push(row("sdkgen, 5,000 tools", samples, Vec::new(), 0.0));
}

/// run_code: `return 1` with idle gaps and back to back; 100 read-only 10 ms calls.
async fn run_code(dir: &Path, rows: &mut Vec<Row>) {
    let slow = release_bin("mcp-gateway-examples", "slow");
    let config = write_config(
        dir,
        &format!(
            "[gateway]\nmode = \"both\"\n{}{}",
            server("kv", "kv", ""),
            server("slow", "slow", "")
        ),
    );
    let gateway = stdio_client(
        &gateway_bin(),
        &["serve", "--stdio", "--config", &config.to_string_lossy()],
    )
    .await;
    let run = |code: &str| params("run_code", json!({"code": code}));
    let n = reps(40);
    let mut base = Vec::new();
    let mut samples = Vec::new();
    for _ in 0..n {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let started = Instant::now();
        gateway
            .peer()
            .call_tool(params("mcp__kv__get", json!({"key": "k"})))
            .await
            .unwrap();
        base.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(150)).await;
        let started = Instant::now();
        let result = gateway.peer().call_tool(run("return 1")).await.unwrap();
        samples.push(started.elapsed());
        assert_ne!(result.is_error, Some(true), "{result:?}");
    }
    rows.push(row(
        "run_code `return 1`, idle gaps (vs a kv call through the gateway)",
        samples,
        base,
        0.0,
    ));
    let started = Instant::now();
    for _ in 0..n {
        gateway.peer().call_tool(run("return 1")).await.unwrap();
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    rows.push(summary_row(
        format!("run_code `return 1`, back to back: {rate:.1} runs/s"),
        rate,
        0.0,
    ));

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
        0.0,
    ));
    direct.cancel().await.unwrap();
    gateway.cancel().await.unwrap();
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
    rows.push(summary_row(
        format!(
            "gateway RSS idle, 3 upstreams: {:.1} MB",
            idle as f64 / 1024.0
        ),
        0.0,
        0.0,
    ));
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
    let workers: u64 = worker_pids(gateway.pid()).into_iter().map(rss_kb).sum();
    let during = rss_kb(gateway.pid());
    for run in runs {
        let _ = run.await;
    }
    rows.push(summary_row(
        format!(
            "per concurrent run_code (4 in flight): worker {:.1} MB each, gateway +{:.1} MB",
            workers as f64 / 5.0 / 1024.0,
            (during.saturating_sub(idle)) as f64 / 4.0 / 1024.0
        ),
        0.0,
        0.0,
    ));
}

/// The gateway's code workers (the 4 running and the spare).
fn worker_pids(gateway: u32) -> Vec<u32> {
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
            ppid == Some(gateway)
                && std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.contains("__code-worker"))
        })
        .collect()
}

/// A `redis-server` on a free loopback port for the cluster scenarios; killed on drop.
struct BenchRedis(std::process::Child, std::net::SocketAddr);

impl BenchRedis {
    fn start() -> BenchRedis {
        let address = free_address();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &address.port().to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (scripts/install-cluster-deps)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(address).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        BenchRedis(child, address)
    }
}

impl Drop for BenchRedis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `haproxy` balancing `backends` round robin on a free port; killed on drop.
struct BenchHaproxy(std::process::Child, std::net::SocketAddr);

impl BenchHaproxy {
    fn start(dir: &Path, backends: &[std::net::SocketAddr]) -> BenchHaproxy {
        let address = free_address();
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, b)| format!("    server g{i} {b}\n"))
            .collect();
        let config = format!(
            "global\n    maxconn 4096\ndefaults\n    mode http\n    timeout connect 2s\n    \
             timeout client 60s\n    timeout server 60s\n    option http-server-close\n\
             frontend mcp\n    bind {address}\n    default_backend gateways\n\
             backend gateways\n    balance roundrobin\n{servers}"
        );
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let child = std::process::Command::new("haproxy")
            .arg("-f")
            .arg(&path)
            .arg("-db")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("haproxy (scripts/install-cluster-deps)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(address).is_err() {
            assert!(Instant::now() < deadline, "haproxy did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        BenchHaproxy(child, address)
    }
}

impl Drop for BenchHaproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 18: the added latency of a Redis-backed session over an in-memory one (one
/// gateway each, kv `get` at concurrency 1), and calls/s at concurrency 32 through three
/// replicas behind HAProxy vs one replica alone (both Redis-backed).
async fn cluster(dir: &Path, rows: &mut Vec<Row>) {
    let redis = BenchRedis::start();
    let kv = server("kv", "kv", "");
    let memory_config = write_config(dir, &kv);
    let memory_gateway = HttpServer::gateway(&memory_config);
    let shared_dir = dir.join("shared");
    std::fs::create_dir_all(&shared_dir).unwrap();
    let shared_config = write_config(
        &shared_dir,
        &format!("{kv}\n[cluster]\nredis_url = \"redis://{}/0\"\n", redis.1),
    );
    let shared_gateway = HttpServer::gateway(&shared_config);
    let in_memory = memory_gateway.client().await;
    let in_redis = shared_gateway.client().await;
    let args = json!({"key": "k"});
    let n = reps(2000);
    let base = sequential(&in_memory, "mcp__kv__get", args.clone(), n).await;
    let samples = sequential(&in_redis, "mcp__kv__get", args.clone(), n).await;
    rows.push(row(
        "kv get through one gateway, Redis-backed session (vs in-memory session)",
        samples,
        base,
        0.0,
    ));
    in_memory.cancel().await.unwrap();
    drop(memory_gateway);

    let alone = throughput(&in_redis, "mcp__kv__get", args.clone(), 32, reps(6400)).await;
    in_redis.cancel().await.unwrap();
    let mut replicas = vec![shared_gateway];
    replicas.extend((0..2).map(|_| HttpServer::gateway(&shared_config)));
    let backends: Vec<_> = replicas.iter().map(|r| r.1).collect();
    let haproxy = BenchHaproxy::start(dir, &backends);
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(format!(
        "http://{}/mcp",
        haproxy.1
    ));
    let balanced = ().serve(transport).await.unwrap();
    let rate = throughput(&balanced, "mcp__kv__get", args, 32, reps(6400)).await;
    balanced.cancel().await.unwrap();
    rows.push(summary_row(
        format!(
            "kv get, concurrency 32, 3 replicas behind HAProxy: {rate:.0} vs one replica alone \
             {alone:.0} calls/s"
        ),
        rate,
        rate / alone,
    ));
}

fn main() {
    // The pipeline scenario builds a code runtime whose workers run this executable.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == mcp_gateway::code::tool::WORKER_SUBCOMMAND)
    {
        std::process::exit(match mcp_gateway::code::worker_main() {
            code if code == std::process::ExitCode::SUCCESS => 0,
            _ => 1,
        });
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    runtime.block_on(async {
        if selected("pipeline") {
            pipeline_alone(dir.path(), &mut rows).await;
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
        if selected("cluster") {
            cluster(dir.path(), &mut rows).await;
        }
    });
    println!(
        "| scenario | p50 µs | p99 µs | calls/s | baseline p50 µs | ratio | gateway CPU µs/call |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let cpu = r
            .gateway_cpu_us_per_call
            .map_or(String::new(), |cpu| format!("{cpu:.1}"));
        println!(
            "| {} | {:.1} | {:.1} | {:.0} | {:.1} | {:.2} | {cpu} |",
            r.scenario, r.p50_us, r.p99_us, r.calls_per_s, r.baseline_p50_us, r.ratio
        );
    }
    let report = target_dir().join("bench-report.json");
    std::fs::write(&report, serde_json::to_string_pretty(&rows).unwrap()).unwrap();
    eprintln!("wrote {}", report.display());
}
