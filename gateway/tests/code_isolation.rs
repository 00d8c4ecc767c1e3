//! Runs are made by copying an idle worker: nothing a run does may reach a later run, and
//! every run's process is confined by the kernel before the program starts. Multi-threaded
//! runtimes and real worker processes throughout.

mod common;

use std::sync::Arc;

use common::{FakeBridge, run_with, runtime};
use mcp_gateway::code::{CodeBudgets, CodeRuntime, WorkerCommand};
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

/// A runtime whose workers, once confined, try each forbidden system call and complete
/// with what each returned, instead of running the program.
fn probing_runtime() -> CodeRuntime {
    CodeRuntime::new(
        WorkerCommand {
            program: env!("CARGO_BIN_EXE_mcp-gateway").into(),
            args: vec!["__code-confinement-probe".to_owned()],
        },
        CodeBudgets::default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_forbidden_system_call_is_refused_in_a_runs_process() {
    let support = mcp_gateway::code::confinement_support();
    let rt = probing_runtime();
    let bridge = Arc::new(FakeBridge::default());
    // The first run takes the exec'd worker, the later ones its copies.
    for round in 0..3 {
        let outcome = run_with(&rt, &bridge, "return 1").await;
        let refused = outcome
            .result
            .unwrap_or_else(|| panic!("round {round}: {:?}", outcome.failure));
        let mut calls = vec![
            "openat", "socket", "connect", "execve", "ptrace", "clone", "kill",
        ];
        if cfg!(target_arch = "x86_64") {
            calls.push("open");
        }
        for call in calls {
            let errno = &refused[call];
            if support.seccomp {
                assert_eq!(
                    *errno,
                    json!(libc::EPERM),
                    "round {round}: {call}: {refused}"
                );
            } else if support.landlock_abi.is_some() && ["open", "openat", "execve"].contains(&call)
            {
                assert!(
                    errno.is_number(),
                    "round {round}: {call} was allowed: {refused}"
                );
            }
        }
    }
    rt.shutdown().await;
}
