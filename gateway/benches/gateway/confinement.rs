//! What confining a stdio server costs (docs/transports-and-security.md, "What it
//! costs"): the same server with the default sandbox and with `sandbox = false`.
//!
//! - Start-up: how long the registry takes to (re)start a server until its first
//!   connection attempt is over (spawned, confined between fork and exec, initialized, its
//!   tools listed), confined and unconfined starts alternating, for the kv example (a
//!   Rust binary) and npm server-filesystem (Node; skipped without the test peers).
//! - Per call: kv's `get` through a gateway over stdio whose kv is confined, against
//!   another gateway whose kv is not, in alternating rounds, with the CPU per call of both
//!   gateways and of both kv processes: the kernel's checks (seccomp on each system call,
//!   Landlock on each open) are spent in kv.

use std::path::Path;
use std::time::{Duration, Instant};

use mcp_gateway::config::Config;
use mcp_gateway::registry::Registry;
use tokio_util::sync::CancellationToken;

use super::{
    CallPath, KV, Row, children, compare_forwarding, gateway_over_stdio, release_bin, reps, row,
    write_config_as,
};

/// Start-up of kv and of server-filesystem, confined against `sandbox = false`.
pub async fn start_up(dir: &Path, rows: &mut Vec<Row>) {
    let kv = format!("command = {:?}\n", release_bin("kv").to_string_lossy());
    compare_starts(rows, "kv", &kv, reps(200)).await;
    let filesystem = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/peers/node_modules/.bin/mcp-server-filesystem");
    if !filesystem.exists() {
        eprintln!("the npm test peers are missing (scripts/install-test-peers): no row for them");
        return;
    }
    let served = dir.join("served");
    std::fs::create_dir_all(&served).unwrap();
    let entry = format!(
        "command = {:?}\nargs = [{:?}]\n",
        filesystem.to_string_lossy(),
        served.to_string_lossy()
    );
    compare_starts(rows, "npm server-filesystem", &entry, reps(40)).await;
}

/// `n` starts of the server `entry` describes confined, alternating with `n` of it with
/// `sandbox = false`, in one registry.
async fn compare_starts(rows: &mut Vec<Row>, label: &str, entry: &str, n: usize) {
    let text = format!("[servers.confined]\n{entry}[servers.open]\n{entry}sandbox = false\n");
    let config = Config::from_toml(&text).unwrap();
    let shutdown = CancellationToken::new();
    let (registry, _updates) = Registry::start(&config, shutdown.clone()).await;
    registry.first_attempts().await;
    let (mut confined, mut open) = (Vec::new(), Vec::new());
    for _ in 0..n {
        open.push(restart(&registry, "open", "off").await);
        confined.push(restart(&registry, "confined", "confined").await);
    }
    rows.push(row(
        &format!(
            "{label} over stdio, start until its tools are listed, confined \
             (vs sandbox = false)"
        ),
        confined,
        open,
    ));
    shutdown.cancel();
    registry.stop_all();
}

/// How long `server` takes to restart until its tools are in the catalog; its health must
/// show the confinement `expected` (`confined`, `off`).
async fn restart(registry: &Registry, server: &str, expected: &str) -> Duration {
    let started = Instant::now();
    registry.restart(server).await.unwrap();
    let took = started.elapsed();
    let prefix = format!("mcp__{server}__");
    assert!(
        registry
            .catalog()
            .tools
            .keys()
            .any(|name| name.starts_with(&prefix)),
        "{server} restarted without its tools: {:?}",
        registry.health().get(server).map(|h| &h.last_error)
    );
    let confinement = registry.health()[server]
        .sandbox
        .as_ref()
        .map(|sandbox| sandbox.summary())
        .unwrap_or_default();
    assert!(confinement.starts_with(expected), "{server}: {confinement}");
    // The instance replaced stops in the background: not during the next start.
    tokio::time::sleep(Duration::from_millis(20)).await;
    took
}

/// kv's `get` through a gateway to a confined kv against one to an unconfined kv.
pub async fn per_call(dir: &Path, rows: &mut Vec<Row>) {
    let kv = format!(
        "[servers.kv]\ncommand = {:?}\n",
        release_bin("kv").to_string_lossy()
    );
    let confined = write_config_as(dir, "confined.toml", &kv, false);
    let open = write_config_as(
        dir,
        "unconfined.toml",
        &format!("{kv}sandbox = false\n"),
        false,
    );
    let (via_open, open_pid) = gateway_over_stdio(&open).await;
    let (via_confined, confined_pid) = gateway_over_stdio(&confined).await;
    let baseline = CallPath::via(&via_open, KV.via, open_pid).with_upstream(kv_of(open_pid));
    let measured =
        CallPath::via(&via_confined, KV.via, confined_pid).with_upstream(kv_of(confined_pid));
    compare_forwarding(
        rows,
        &KV,
        "stdio, kv confined",
        "kv with sandbox = false",
        baseline,
        measured,
    )
    .await;
    via_confined.cancel().await.unwrap();
    via_open.cancel().await.unwrap();
}

/// The kv process `gateway` started.
fn kv_of(gateway: u32) -> u32 {
    let kv: Vec<u32> = children(gateway)
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "kv")
        })
        .collect();
    assert_eq!(kv.len(), 1, "the gateway {gateway} runs kv as {kv:?}");
    kv[0]
}
