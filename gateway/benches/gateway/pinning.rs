//! What pinning tool definitions costs a gateway with many tools: the time from starting
//! the gateway to a client holding the listing of 5,060 tools from 10 upstreams, and the
//! gateway's peak resident memory over it, with `pin = "hold"` against `pin = "off"`
//! (which records and compares nothing). Two ways of holding: at first sight (no pins
//! yet: every definition is screened, fingerprinted and written to the pins file) and at
//! a later start (the pins file is read, and each definition compared with its pin).
//! Each round starts the three in turn, each gateway alone on the machine.

use std::path::Path;
use std::time::{Duration, Instant};

use super::report::grouped;
use super::{Row, data_home, gateway_over_stdio, proc_kb, reps, row, write_config_as};

/// One gateway start: how long until the listing was in hand, the gateway's peak resident
/// memory (kB), and how many tools it listed.
struct Start {
    took: Duration,
    peak_kb: u64,
    tools: usize,
}

/// Starts with `pin = "off"`, and with `pin = "hold"` at first sight and later.
pub async fn many_tools(dir: &Path, rows: &mut Vec<Row>) {
    let servers = super::search::dynamic_servers();
    let off = write_config_as(
        dir,
        "pins-off.toml",
        &format!("[pinning]\npin = \"off\"\n{servers}"),
        false,
    );
    let hold = write_config_as(dir, "pins-hold.toml", &servers, false);
    let pins = data_home(&hold).join("mcp-gateway").join("pins");
    let (mut unpinned, mut first, mut later) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps(10) {
        let _ = std::fs::remove_dir_all(&pins);
        first.push(start_and_list(&hold).await);
        later.push(start_and_list(&hold).await);
        unpinned.push(start_and_list(&off).await);
    }
    let tools = unpinned[0].tools;
    for start in unpinned.iter().chain(&first).chain(&later) {
        assert_eq!(start.tools, tools, "every start lists the same tools");
    }
    let pins_mb = std::fs::read_dir(&pins)
        .unwrap()
        .flatten()
        .map(|entry| entry.metadata().unwrap().len())
        .sum::<u64>() as f64
        / 1e6;
    let catalog = format!("{} tools / 10 upstreams", grouped(tools as f64, 0));
    rows.push(with_peaks(
        row(
            &format!(
                "gateway start until a client holds the listing, {catalog}, \
                 `pin = \"hold\"`, first sight (vs `pin = \"off\"`)"
            ),
            first.iter().map(|s| s.took).collect(),
            unpinned.iter().map(|s| s.took).collect(),
        ),
        &first,
        &unpinned,
    ));
    rows.push(with_peaks(
        row(
            &format!(
                "gateway start until a client holds the listing, {catalog}, \
                 `pin = \"hold\"`, a later start reading a {pins_mb:.1} MB pins file \
                 (vs `pin = \"off\"`)"
            ),
            later.iter().map(|s| s.took).collect(),
            unpinned.iter().map(|s| s.took).collect(),
        ),
        &later,
        &unpinned,
    ));
}

/// `row` with the median peak memory of the `measured` starts against the `baseline`'s.
fn with_peaks(row: Row, measured: &[Start], baseline: &[Start]) -> Row {
    let median_mb = |starts: &[Start]| {
        let mut peaks: Vec<u64> = starts.iter().map(|s| s.peak_kb).collect();
        peaks.sort_unstable();
        peaks[peaks.len() / 2] as f64 / 1024.0
    };
    let (peak, base) = (median_mb(measured), median_mb(baseline));
    Row {
        peak_rss_mb: Some(peak),
        baseline_peak_rss_mb: Some(base),
        peak_rss_ratio: Some(peak / base),
        ..row
    }
}

/// Starts the gateway on `config`, lists its tools, and stops it.
async fn start_and_list(config: &Path) -> Start {
    let started = Instant::now();
    let (client, pid) = gateway_over_stdio(config).await;
    let tools = client.peer().list_all_tools().await.unwrap().len();
    let took = started.elapsed();
    let peak_kb = proc_kb(pid, "status", "VmHWM:");
    client.cancel().await.unwrap();
    ended(pid).await;
    Start {
        took,
        peak_kb,
        tools,
    }
}

/// Waits until process `pid` (and so its upstreams) has exited, so that the next start
/// has the machine to itself.
async fn ended(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next());
        if matches!(state, None | Some("Z")) {
            return;
        }
        assert!(Instant::now() < deadline, "the gateway {pid} did not stop");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
