//! What a first run prints: `mcp-gateway serve` on a configuration like the default one,
//! with no `RUST_LOG`, says where it listens and one line per upstream when it is ready
//! (with its tool count), and nothing from its dependencies or its upstreams' own logs at
//! info, nor a warning for a server's question it cannot relay; `RUST_LOG` still opens
//! them up.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mcp_gateway_tests::*;
use serde_json::json;

/// The default configuration's servers: the two example servers.
fn default_like() -> Workspace {
    Workspace::new(&format!(
        "[gateway]\nmode = \"both\"\n{}{}",
        example_server("kv", "kv"),
        example_server("slow", "slow")
    ))
}

/// `serve` on a free port with `RUST_LOG` as given (removed when `None`), stderr into
/// `name` in the workspace; the process and its address.
fn serve(workspace: &Workspace, rust_log: Option<&str>, name: &str) -> (Child, SocketAddr) {
    let address = free_address();
    let mut command = Command::new(gateway_bin());
    command
        .args(["serve", "--config"])
        .arg(workspace.config())
        .args(["--listen", &address.to_string()])
        .env_remove("RUST_LOG")
        .env("XDG_DATA_HOME", workspace.data_home())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(workspace.path(name)).unwrap());
    if let Some(filter) = rust_log {
        command.env("RUST_LOG", filter);
    }
    (command.spawn().unwrap(), address)
}

/// The log once both upstreams are ready and the gateway has then answered a request
/// (what start-up logs is behind it); then the gateway is killed.
fn log_when_ready(
    workspace: &Workspace,
    (mut gateway, address): (Child, SocketAddr),
    name: &str,
) -> String {
    let read = || std::fs::read_to_string(workspace.path(name)).unwrap_or_default();
    let ready = eventually(Duration::from_secs(60), || {
        read().matches("upstream ready").count() >= 2
    });
    let (status, _, health) = http_get(address, "/healthz");
    assert_eq!(status, 200, "{health}");
    // Read before the kill: what the gateway's code workers say when it vanishes under them
    // is no part of a run.
    let log = read();
    let _ = gateway.kill();
    let _ = gateway.wait();
    assert!(ready, "the upstreams did not get ready:\n{log}");
    log
}

#[test]
fn a_default_run_says_one_line_per_upstream_and_nothing_from_dependencies() {
    let workspace = default_like();
    let gateway = serve(&workspace, None, "quiet.log");
    let log = log_when_ready(&workspace, gateway, "quiet.log");
    let lines: Vec<&str> = log.lines().collect();
    for server in ["kv", "slow"] {
        let ready: Vec<&&str> = lines
            .iter()
            .filter(|l| l.contains("upstream ready") && l.contains(&format!("server={server} ")))
            .collect();
        assert_eq!(ready.len(), 1, "{server}:\n{log}");
        assert!(ready[0].contains("tools="), "{log}");
    }
    // Every info line is the gateway's own: where it listens and the two ready lines.
    let info: Vec<&&str> = lines.iter().filter(|l| l.contains(" INFO ")).collect();
    for line in &info {
        assert!(
            line.contains(" INFO mcp_gateway"),
            "not the gateway's own: {line}\n{log}"
        );
    }
    assert_eq!(info.len(), 3, "{log}");
    assert!(log.contains("listening on http://127.0.0.1:"), "{log}");
    assert_eq!(lines.len(), 3, "{log}");
}

#[test]
fn rust_log_still_shows_the_dependencies() {
    let workspace = default_like();
    let gateway = serve(&workspace, Some("info"), "loud.log");
    let log = log_when_ready(&workspace, gateway, "loud.log");
    assert!(
        log.lines()
            .any(|l| l.contains(" INFO ") && !l.contains(" INFO mcp_gateway")),
        "RUST_LOG=info shows no dependency's info line:\n{log}"
    );
}

/// A server that asks its client for what no client gives it (npm `server-everything`
/// asks for the roots as it starts, before any client came, and again when a client
/// without roots calls `get-roots-list`) gets an error, as it would from a client without
/// the capability: that is no fault, and a default run shows no warning for it.
#[test]
fn a_question_no_client_can_take_is_no_warning_in_a_default_run() {
    let workspace = Workspace::new(&format!(
        "[servers.everything]\ncommand = {}\n",
        toml_str(npm_bin("mcp-server-everything").to_string_lossy())
    ));
    let (mut gateway, address) = serve(&workspace, None, "quiet.log");
    let read = || std::fs::read_to_string(workspace.path("quiet.log")).unwrap_or_default();
    assert!(
        eventually(Duration::from_secs(60), || read()
            .contains("upstream ready")),
        "{}",
        read()
    );
    let run = python_client(
        &[
            "--transport".into(),
            "http".into(),
            "--url".into(),
            format!("http://{address}/mcp"),
        ],
        &json!([{"action": "call_tool", "name": "mcp__everything__get-roots-list", "arguments": {}}]),
    );
    let asked = result_text(action_result(&run, 0));
    assert!(asked.contains("roots"), "{run:#}");
    let log = read();
    let _ = gateway.kill();
    let _ = gateway.wait();
    assert!(!log.contains(" WARN "), "{log}");
}
