//! Worker processes as processes: started ahead of time, killed on cancellation, on
//! shutdown and from outside, and never left behind. These tests count this process's
//! children, so they run one at a time.

mod common;

use std::sync::Arc;

use common::{BINDINGS, FakeBridge, children, run_with, runtime, settle_children, until};
use mcp_gateway::code::{Bindings, FailureKind};
use mcp_gateway::config::CodeBudgets;
use serde_json::json;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// Serializes the tests in this file: they count children of the test process.
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// Wait until the fake bridge has seen `n` calls.
async fn wait_for_calls(bridge: &FakeBridge, n: usize) {
    until(&format!("call {n} reaching the bridge"), || {
        bridge.records().len() >= n
    })
    .await;
}

#[tokio::test]
async fn a_template_and_a_runner_are_started_ahead_and_nothing_outlives_shutdown() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let rt = runtime(CodeBudgets::default());
    assert_eq!(
        settle_children(2).await,
        2,
        "the template and the first runner were not started"
    );
    let bridge = Arc::new(FakeBridge::default());
    for _ in 0..3 {
        assert_eq!(
            run_with(&rt, &bridge, "return 1").await.result,
            Some(json!(1))
        );
        // The run's worker is reaped; only the template and the next runner remain.
        assert_eq!(settle_children(2).await, 2);
    }
    rt.shutdown().await;
    assert_eq!(children(), Vec::<u32>::new());
    assert_eq!(
        run_with(&rt, &bridge, "return 1")
            .await
            .failure
            .unwrap()
            .kind,
        FailureKind::Aborted
    );
}

#[tokio::test]
async fn cancellation_mid_run_kills_the_worker_and_cancels_its_calls() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let rt = runtime(CodeBudgets::default());
    let bridge = Arc::new(FakeBridge::default());
    let cancel = CancellationToken::new();
    let bindings = Bindings::Script(BINDINGS.into());
    let run = rt.run(
        "console.log('about to wait'); await tools.t.hang({}); return 'unreachable';",
        &bindings,
        Arc::clone(&bridge) as Arc<dyn mcp_gateway::code::ToolBridge>,
        cancel.clone(),
    );
    let canceller = async {
        wait_for_calls(&bridge, 1).await;
        cancel.cancel();
    };
    let (outcome, ()) = tokio::join!(run, canceller);
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Aborted);
    assert_eq!(outcome.logs, ["about to wait"]);
    assert!(bridge.records()[0].cancelled);
    assert_eq!(
        settle_children(2).await,
        2,
        "only the template and the next runner should be left"
    );
    rt.shutdown().await;
    assert_eq!(children(), Vec::<u32>::new());
}

/// The soft limits of process `pid` (`/proc/PID/limits`), by name: `"Max cpu time"` →
/// `"3"`.
fn limits(pid: u32) -> std::collections::BTreeMap<String, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|line| {
            // `Max cpu time              3                    3                    seconds`
            let (name, values) = line.split_at_checked(26)?;
            let soft = values.split_whitespace().next()?;
            Some((name.trim().to_owned(), soft.to_owned()))
        })
        .collect()
}

#[tokio::test]
async fn the_waiting_runner_is_already_held_to_its_limits() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let rt = runtime(CodeBudgets {
        compute_ms: 1500,
        heap_mb: 64,
        ..CodeBudgets::default()
    });
    assert_eq!(settle_children(2).await, 2);
    // The runner confines itself before it says it is ready; the template never does.
    let mut runner = None;
    until("a confined runner among the children", || {
        runner = children().into_iter().find(|&pid| {
            limits(pid)
                .get("Max cpu time")
                .is_some_and(|cpu| cpu != "unlimited")
        });
        runner.is_some()
    })
    .await;
    let runner = runner.unwrap_or_default();
    let limits = limits(runner);
    let limit = |name: &str| limits.get(name).map(String::as_str);
    // The compute budget rounded up to seconds, plus one.
    assert_eq!(limit("Max cpu time"), Some("3"), "{limits:?}");
    // The heap plus 1 GiB of headroom.
    let address_space = ((64u64 << 20) + (1 << 30)).to_string();
    assert_eq!(limit("Max address space"), Some(address_space.as_str()));
    assert_eq!(limit("Max processes"), Some("0"), "{limits:?}");
    assert_eq!(limit("Max core file size"), Some("0"), "{limits:?}");
    rt.shutdown().await;
}

#[tokio::test]
async fn runs_beyond_the_concurrency_cap_fail_busy_at_once_and_start_no_process() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let rt = runtime(CodeBudgets {
        max_concurrent_runs: 1,
        ..CodeBudgets::default()
    });
    let bridge = Arc::new(FakeBridge::default());
    let cancel = CancellationToken::new();
    let bindings = Bindings::Script(BINDINGS.into());
    let hanging = rt.run(
        "await tools.t.hang({});",
        &bindings,
        Arc::clone(&bridge) as Arc<dyn mcp_gateway::code::ToolBridge>,
        cancel.clone(),
    );
    let second = async {
        wait_for_calls(&bridge, 1).await;
        let workers = children().len();
        let refused = run_with(&rt, &bridge, "return 'second';").await;
        let after = children().len();
        cancel.cancel();
        (refused, workers, after)
    };
    let (first, (refused, workers, after)) = tokio::join!(hanging, second);
    assert_eq!(first.failure.unwrap().kind, FailureKind::Aborted);
    let failure = refused.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Busy, "{}", failure.message);
    assert!(
        failure.message.contains("max_concurrent_runs"),
        "{}",
        failure.message
    );
    assert!(after <= workers, "a refused run started a process");
    // With the slot free again, a run works.
    let third = run_with(&rt, &bridge, "return 'third';").await;
    assert_eq!(third.result, Some(json!("third")), "{:?}", third.failure);
    rt.shutdown().await;
}

#[tokio::test]
async fn a_worker_killed_from_outside_is_died_and_the_next_run_works() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let rt = runtime(CodeBudgets::default());
    let bridge = Arc::new(FakeBridge::default());
    settle_children(2).await;
    let run = run_with(
        &rt,
        &bridge,
        "console.log('working'); await tools.t.hang({});",
    );
    let killer = async {
        wait_for_calls(&bridge, 1).await;
        // Kill the running worker and the template (the next runner is made only once
        // the run has settled).
        for pid in children() {
            // SAFETY: signalling our own child process.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    };
    let (outcome, ()) = tokio::join!(run, killer);
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Died, "{}", failure.message);
    assert!(failure.message.contains("signal: 9"), "{}", failure.message);
    assert_eq!(outcome.logs, ["working"]);
    assert!(bridge.records()[0].cancelled);
    // A new template and runner are made after the run; killed too, they are noticed
    // and replaced.
    settle_children(2).await;
    for pid in children() {
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
    let next = run_with(&rt, &bridge, "return 'alive'").await;
    assert_eq!(next.result, Some(json!("alive")), "{:?}", next.failure);
    rt.shutdown().await;
    assert_eq!(children(), Vec::<u32>::new());
}

#[tokio::test]
async fn shutdown_aborts_runs_in_flight() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let rt = runtime(CodeBudgets::default());
    let bridge = Arc::new(FakeBridge::default());
    let run = run_with(&rt, &bridge, "await tools.t.hang({});");
    let stopper = async {
        wait_for_calls(&bridge, 1).await;
        rt.shutdown().await;
    };
    let (outcome, ()) = tokio::join!(run, stopper);
    assert_eq!(outcome.failure.unwrap().kind, FailureKind::Aborted);
    assert_eq!(children(), Vec::<u32>::new());
}

#[tokio::test]
async fn budget_kills_leave_no_process_behind() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let bridge = Arc::new(FakeBridge::default());
    let compute = runtime(CodeBudgets {
        compute_ms: 200,
        ..CodeBudgets::default()
    });
    assert_eq!(
        run_with(&compute, &bridge, "for (;;) {}")
            .await
            .failure
            .unwrap()
            .kind,
        FailureKind::Compute
    );
    drop(compute);
    let wall = runtime(CodeBudgets {
        max_wall_ms: 300,
        ..CodeBudgets::default()
    });
    assert_eq!(
        run_with(&wall, &bridge, "await tools.t.hang({})")
            .await
            .failure
            .unwrap()
            .kind,
        FailureKind::Wall
    );
    assert_eq!(settle_children(2).await, 2);
    drop(wall);
    // Dropping the runtime kills the template and the runner; tokio reaps them in the
    // background.
    assert_eq!(settle_children(0).await, 0);
}

/// A process's scheduler state from `/proc/PID/stat` (`S` sleeping, `R` running, `Z` dead).
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    after.trim_start().chars().next().unwrap()
}

#[tokio::test]
async fn a_runner_told_of_a_run_that_never_came_sleeps_and_serves_the_next() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let rt = runtime(CodeBudgets::default());
    assert_eq!(settle_children(2).await, 2);
    let waiting = children();
    let bridge = Arc::new(FakeBridge::default());
    // The runner hears that a run is coming; then the program does not parse.
    let failed = run_with(&rt, &bridge, "return (").await;
    assert_eq!(failed.failure.unwrap().kind, FailureKind::Parse);
    // Its polling over, the runner is alive and asleep again, not spinning (a spinning
    // worker is never seen asleep).
    for pid in &waiting {
        until(&format!("worker {pid} asleep"), || state(*pid) == 'S').await;
    }
    assert_eq!(
        run_with(&rt, &bridge, "return 1").await.result,
        Some(json!(1))
    );
    rt.shutdown().await;
}
