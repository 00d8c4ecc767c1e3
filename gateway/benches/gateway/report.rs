//! The bench's report: the rows measured, the commit they were measured at and the host's
//! load, written as `target/bench-report.json`, and the table docs/performance.md shows,
//! printed with the same figures (so the doc can be checked against the committed report,
//! `docs/bench-report.json`, by tests/tests/docs_drift.rs).

use std::fmt::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// One row of the report. Every field has one meaning and is left out where it was not
/// measured; ratios are always measured / baseline of the same quantity.
#[derive(serde::Serialize, Default)]
pub struct Row {
    pub scenario: String,
    /// Latency of the measured path, median and 99th percentile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_us: Option<f64>,
    /// Median latency of the baseline (the same work without the gateway).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_p50_us: Option<f64>,
    /// `p50_us / baseline_p50_us`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ratio: Option<f64>,
    /// 99th percentile latency of the baseline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_p99_us: Option<f64>,
    /// `p99_us / baseline_p99_us`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ratio: Option<f64>,
    /// Calls (a run_code run is one call) per second on the measured path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_calls_per_s: Option<f64>,
    /// `calls_per_s / baseline_calls_per_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_ratio: Option<f64>,
    /// CPU the process in the middle spent per call (all threads): the gateway, or the
    /// bare hop of a floor row. Unlike latency, this hardly moves when other processes
    /// compete for the cores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop_cpu_us_per_call: Option<f64>,
    /// The same for the baseline, where the baseline is a hop too (another gateway build).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_hop_cpu_us_per_call: Option<f64>,
    /// `hop_cpu_us_per_call / baseline_hop_cpu_us_per_call`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop_cpu_ratio: Option<f64>,
    /// CPU the upstream process spent per call (all threads), where a row compares two
    /// upstreams of the same program (confined and not): the baseline's, and the ratio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_cpu_us_per_call: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_upstream_cpu_us_per_call: Option<f64>,
    /// `upstream_cpu_us_per_call / baseline_upstream_cpu_us_per_call`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_cpu_ratio: Option<f64>,
    /// The gateway process's peak resident memory (`VmHWM`) over the scenario (its start
    /// included), the baseline's, and the ratio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_mb: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_peak_rss_mb: Option<f64>,
    /// `peak_rss_mb / baseline_peak_rss_mb`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_ratio: Option<f64>,
    /// Schema compilations and SDK generations the gateway counted during the scenario.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_compilations: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sdk_generations: Option<u64>,
    /// Resident memory of the gateway process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway_rss_mb: Option<f64>,
    /// How much the gateway's resident memory grew per concurrent run_code run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway_rss_growth_per_run_mb: Option<f64>,
    /// Resident memory of one code worker process, averaged over the workers running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_rss_mb: Option<f64>,
    /// How many code workers were running when memory was sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
}

/// What is known of a run before it starts: when, on what, and how busy the host was.
pub struct Started {
    at: Instant,
    date: String,
    commit: String,
    load_average: f64,
}

impl Started {
    pub fn now() -> Self {
        Self {
            at: Instant::now(),
            date: command_output("date", &["-u", "+%Y-%m-%dT%H:%MZ"]),
            commit: commit(),
            load_average: load_average(),
        }
    }
}

/// The whole report, as written to `bench-report.json`.
#[derive(serde::Serialize)]
struct Report<'a> {
    /// The commit measured; `-dirty` when tracked files differed from it.
    commit: &'a str,
    /// When the run started (UTC).
    date: &'a str,
    /// The command, with the environment variables that chose what ran.
    command: String,
    cores: usize,
    /// The one-minute load average at the start and at the end.
    load_average_start: f64,
    load_average_end: f64,
    /// How long the whole run took, building included.
    wall_s: f64,
    rows: &'a [Row],
}

/// Prints the table docs/performance.md shows and writes `bench-report.json` in `target`.
pub fn write(rows: &[Row], started: &Started, target: &Path) {
    let report = Report {
        commit: &started.commit,
        date: &started.date,
        command: command_line(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_average_start: started.load_average,
        load_average_end: load_average(),
        wall_s: started.at.elapsed().as_secs_f64().round(),
        rows,
    };
    println!(
        "Commit `{}`, {}, {} cores, load average {:.1} at the start and {:.1} at the end, {:.0} s:\n",
        report.commit,
        report.date,
        report.cores,
        report.load_average_start,
        report.load_average_end,
        report.wall_s
    );
    println!("| scenario | measured | baseline | ratio | hop CPU per call |");
    println!("|---|---:|---:|---:|---:|");
    for row in rows {
        println!("{}", table_row(row));
    }
    let path = target.join("bench-report.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    eprintln!("wrote {}", path.display());
}

/// One line of the table: every figure of `row`, rounded as shown, in words a reader
/// knows. A figure that is only in the scenario (sizes, memory of a summary row) stays
/// there.
fn table_row(row: &Row) -> String {
    let micros = |value: f64| format!("{} µs", microseconds(value));
    let with_p99 = |p50: Option<f64>, p99: Option<f64>| {
        p50.map(|p50| match p99 {
            Some(p99) => format!("{} (p99 {})", micros(p50), microseconds(p99)),
            None => micros(p50),
        })
    };
    let rate = |value: Option<f64>| value.map(|v| format!("{} calls/s", grouped(v, 0)));
    let ratio = |value: Option<f64>| value.map(|v| format!("{v:.2}×"));
    let mut measured: Vec<String> = [with_p99(row.p50_us, row.p99_us), rate(row.calls_per_s)]
        .into_iter()
        .flatten()
        .collect();
    measured.extend(
        row.schema_compilations
            .map(|n| format!("{n} schema compilations")),
    );
    measured.extend(row.sdk_generations.map(|n| format!("{n} SDK generations")));
    measured.extend(
        row.gateway_rss_mb
            .map(|mb| format!("gateway RSS {mb:.1} MB")),
    );
    measured.extend(
        row.gateway_rss_growth_per_run_mb
            .map(|mb| format!("gateway +{mb:.1} MB per run")),
    );
    measured.extend(row.worker_rss_mb.map(|mb| format!("worker RSS {mb:.1} MB")));
    measured.extend(row.workers.map(|n| format!("{n} workers")));
    let upstream_cpu =
        |value: Option<f64>| value.map(|v| format!("upstream CPU {} per call", micros(v)));
    let peak = |value: Option<f64>| value.map(|mb| format!("peak RSS {mb:.1} MB"));
    measured.extend(upstream_cpu(row.upstream_cpu_us_per_call));
    measured.extend(peak(row.peak_rss_mb));
    let baseline: Vec<String> = [
        with_p99(row.baseline_p50_us, row.baseline_p99_us),
        rate(row.baseline_calls_per_s),
        upstream_cpu(row.baseline_upstream_cpu_us_per_call),
        peak(row.baseline_peak_rss_mb),
    ]
    .into_iter()
    .flatten()
    .collect();
    let ratios: Vec<String> = [
        ratio(row.latency_ratio).map(|r| match ratio(row.p99_ratio) {
            Some(p99) => format!("{r} (p99 {p99})"),
            None => r,
        }),
        ratio(row.throughput_ratio),
        ratio(row.upstream_cpu_ratio).map(|r| format!("upstream CPU {r}")),
        ratio(row.peak_rss_ratio).map(|r| format!("peak RSS {r}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut hop = row.hop_cpu_us_per_call.map(micros).unwrap_or_default();
    if let (Some(base), Some(r)) = (row.baseline_hop_cpu_us_per_call, row.hop_cpu_ratio) {
        let _ = write!(hop, " (baseline {}, {r:.2}×)", micros(base));
    }
    let cell = |parts: Vec<String>| {
        if parts.is_empty() {
            "—".to_owned()
        } else {
            parts.join(", ")
        }
    };
    format!(
        "| {} | {} | {} | {} | {} |",
        row.scenario.replace('|', "\\|"),
        cell(measured),
        cell(baseline),
        cell(ratios),
        if hop.is_empty() {
            "—".to_owned()
        } else {
            hop
        }
    )
}

/// Microseconds as shown: a tenth under 10 µs (a pipeline stage costs a few), whole
/// ones above.
fn microseconds(value: f64) -> String {
    grouped(value, if value < 10.0 { 1 } else { 0 })
}

/// `value` with `decimals` decimals and thousands separated by commas (12,605).
pub fn grouped(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    let (whole, fraction) = text
        .split_once('.')
        .map_or((text.as_str(), None), |(w, f)| (w, Some(f)));
    let (sign, digits) = whole.strip_prefix('-').map_or(("", whole), |d| ("-", d));
    let mut out = String::from(sign);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    if let Some(fraction) = fraction {
        out.push('.');
        out.push_str(fraction);
    }
    out
}

/// `BENCH_*=… cargo bench -p mcp-gateway --bench gateway`, as this run was started.
fn command_line() -> String {
    let mut chosen: Vec<String> = std::env::vars()
        .filter(|(name, _)| name.starts_with("BENCH_"))
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    chosen.sort();
    chosen.push("cargo bench -p mcp-gateway --bench gateway".into());
    chosen.join(" ")
}

/// The workspace's commit, with `-dirty` when a tracked file differs from it.
fn commit() -> String {
    let workspace = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let head = command_output("git", &["-C", workspace, "rev-parse", "HEAD"]);
    let changed = command_output(
        "git",
        &[
            "-C",
            workspace,
            "status",
            "--porcelain",
            "--untracked-files=no",
        ],
    );
    if changed.is_empty() {
        head
    } else {
        format!("{head}-dirty")
    }
}

fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The one-minute load average from `/proc/loadavg`.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}
