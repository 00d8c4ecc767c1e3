//! Runs are made by copying an idle worker: nothing a run does may reach a later run, and
//! every run's process is confined by the kernel before the program starts. Multi-threaded
//! runtimes and real worker processes throughout.

mod common;

use std::sync::Arc;

use common::{FakeBridge, run_with, runtime};
use mcp_gateway::code::{CodeRuntime, WorkerCommand};
use mcp_gateway::config::CodeBudgets;
use serde_json::{Value, json};

/// What a program can observe of the world it starts in: the global names, the own
/// properties of the builtin prototypes, and a few random numbers.
const OBSERVE: &str = "const names = (o: object) => Object.getOwnPropertyNames(o).sort().join(',');\n\
     const world = {\n\
       globals: names(globalThis),\n\
       object: names(Object.prototype),\n\
       array: names(Array.prototype),\n\
       func: names(Function.prototype),\n\
       promise: names(Promise.prototype),\n\
       pushIsNative: /native code/.test(Array.prototype.push.toString()),\n\
       polluted: ({} as any).polluted ?? null,\n\
       leak: (globalThis as any).leak ?? null,\n\
     };\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_sees_nothing_an_earlier_run_left_behind() {
    let rt = runtime(CodeBudgets::default());
    let bridge = Arc::new(FakeBridge::default());
    // The first run pollutes everything it can reach, leaves a timer that would log, and
    // keeps a secret on the heap.
    let polluter = format!(
        "{OBSERVE}\
         (globalThis as any).leak = 'secret-' + Math.random();\n\
         (Object.prototype as any).polluted = 'yes';\n\
         Array.prototype.push = function () {{ return 0; }};\n\
         (Function.prototype as any).extra = 1;\n\
         (Promise.prototype as any).extra = 1;\n\
         setTimeout(() => console.log('a timer from an earlier run'), 1);\n\
         return {{ world, random: [Math.random(), Math.random(), Math.random()] }};"
    );
    let first = run_with(&rt, &bridge, &polluter).await;
    let first = first.result.expect("the polluting run completes");
    let pristine = first["world"].clone();
    assert_eq!(pristine["polluted"], Value::Null);
    assert_eq!(pristine["pushIsNative"], json!(true));
    // Several later runs, on copies made one after another: each sees the world the first
    // run saw before it polluted it, fires no timer of another run, and draws its own
    // random numbers.
    let observer = format!(
        "{OBSERVE}\
         await new Promise(done => setTimeout(done, 30));\n\
         return {{ world, random: [Math.random(), Math.random(), Math.random()] }};"
    );
    let mut draws = vec![first["random"].clone()];
    for round in 0..3 {
        let later = run_with(&rt, &bridge, &observer).await;
        assert!(later.logs.is_empty(), "round {round}: {:?}", later.logs);
        let later = later.result.expect("an observing run completes");
        assert_eq!(later["world"], pristine, "round {round}");
        assert!(
            !draws.contains(&later["random"]),
            "round {round} drew the same random numbers as an earlier run"
        );
        draws.push(later["random"].clone());
    }
    rt.shutdown().await;
}

/// A runtime whose workers, once confined, report their walls (see `code::probe`) instead
/// of running the program; with `args`, e.g. the threaded probe.
fn probing_runtime(args: &[&str], budgets: CodeBudgets) -> CodeRuntime {
    let mut all = vec!["__code-confinement-probe".to_owned()];
    all.extend(args.iter().map(|arg| (*arg).to_owned()));
    CodeRuntime::new(
        WorkerCommand {
            program: env!("CARGO_BIN_EXE_mcp-gateway").into(),
            args: all,
        },
        budgets,
    )
    .expect("this kernel confines runs")
}

/// The probe's report of one run.
async fn probe(rt: &CodeRuntime) -> Value {
    let outcome = run_with(rt, &Arc::new(FakeBridge::default()), "return 1").await;
    outcome
        .result
        .unwrap_or_else(|| panic!("the probe did not report: {:?}", outcome.failure))
}

/// Every call the probe tried was refused with EPERM.
fn assert_all_refused(calls: &Value, whose: &str) {
    let mut expected = vec![
        "openat", "socket", "connect", "execve", "ptrace", "clone", "kill",
    ];
    if cfg!(target_arch = "x86_64") {
        expected.push("open");
    }
    for call in expected {
        assert_eq!(calls[call], json!(libc::EPERM), "{whose}: {call}: {calls}");
    }
}

/// The kernel features these tests check; a kernel without them fails them.
fn assert_the_kernel_confines() {
    let support = mcp_gateway::code::confinement_support();
    assert!(
        support.seccomp && support.no_new_privs && support.landlock_abi.is_some(),
        "this kernel lacks the confinement these tests check (seccomp, no_new_privs and \
         Landlock): {support:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_forbidden_system_call_is_refused_in_a_runs_process() {
    assert_the_kernel_confines();
    let rt = probing_runtime(&[], CodeBudgets::default());
    // The first run takes the exec'd worker, the later ones its copies.
    for round in 0..3 {
        let report = probe(&rt).await;
        assert_all_refused(&report["calls"], &format!("round {round}"));
        assert_eq!(report["other_thread_calls"], Value::Null);
    }
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_a_second_thread_is_confined_on_every_thread() {
    assert_the_kernel_confines();
    // The worker cannot fork, so it runs itself: the fallback for engines with threads.
    let rt = probing_runtime(&[mcp_gateway::code::THREADED_PROBE], CodeBudgets::default());
    for round in 0..2 {
        let report = probe(&rt).await;
        assert_all_refused(&report["calls"], &format!("round {round}, running thread"));
        assert_all_refused(
            &report["other_thread_calls"],
            &format!("round {round}, the other thread"),
        );
    }
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_process_cannot_map_more_memory_than_its_address_space_limit() {
    let budgets = CodeBudgets {
        heap_mb: 64,
        ..CodeBudgets::default()
    };
    let rt = probing_runtime(&[], budgets);
    let report = probe(&rt).await;
    // The heap plus 1 GiB of headroom, which the probe tries to map at once.
    let address_space = (64u64 << 20) + (1 << 30);
    assert_eq!(
        report["map_past_address_space"],
        json!(libc::ENOMEM),
        "{address_space} bytes of memory could be mapped"
    );
    rt.shutdown().await;
}
