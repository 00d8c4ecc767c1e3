//! The program and the worker as hostile peers: engine internals out of reach, forged or
//! malformed bridge traffic, floods. Each case must leave the runtime serving the next run.

mod common;

use std::sync::Arc;

use common::{FakeBridge, run, run_with, runtime};
use mcp_gateway::code::{CodeRuntime, FailureKind, WorkerCommand};
use mcp_gateway::config::CodeBudgets;
use serde_json::json;

#[tokio::test]
async fn engine_internals_are_out_of_reach() {
    let outcome = run(
        "const viaFunction = (function () {}).constructor('return this')();\n\
         const viaTools = (tools as any).constructor.constructor('return this')();\n\
         const names = Object.getOwnPropertyNames(globalThis);\n\
         return {\n\
           deno: typeof (globalThis as any).Deno,\n\
           bootstrap: typeof (globalThis as any).__bootstrap,\n\
           sameGlobal: viaFunction === globalThis && viaTools === globalThis,\n\
           leaked: names.filter(n => /deno|bootstrap|op_|core/i.test(n)),\n\
           symbols: Object.getOwnPropertySymbols(globalThis).length,\n\
         };",
    )
    .await;
    assert_eq!(outcome.failure, None);
    assert_eq!(
        outcome.result,
        Some(
            json!({"deno": "undefined", "bootstrap": "undefined", "sameGlobal": true, "leaked": [], "symbols": 0})
        )
    );
}

#[tokio::test]
async fn op_panic_is_unreachable() {
    let rt = runtime(CodeBudgets::default());
    let bridge = Arc::new(FakeBridge::default());
    for program in [
        "Deno.core.ops.op_panic('x')",
        "(globalThis as any).__bootstrap.core.ops.op_panic('x')",
        "(function(){}).constructor('return Deno')().core.ops.op_panic('x')",
    ] {
        let failure = run_with(&rt, &bridge, program)
            .await
            .failure
            .expect(program);
        assert_eq!(
            failure.kind,
            FailureKind::Exception,
            "{program}: {failure:?}"
        );
        assert!(
            failure.message.contains("ReferenceError") || failure.message.contains("TypeError"),
            "{program}: {}",
            failure.message
        );
    }
    assert_eq!(
        run_with(&rt, &bridge, "return 'still serving'")
            .await
            .result,
        Some(json!("still serving"))
    );
    rt.shutdown().await;
}

#[tokio::test]
async fn the_installed_globals_cannot_be_replaced() {
    let outcome = run(
        "const attempts: string[] = [];\n\
         try { (globalThis as any).tools = 1; attempts.push('assigned'); } catch (e) { attempts.push(e.name); }\n\
         try { delete (globalThis as any).callTool; attempts.push('deleted'); } catch (e) { attempts.push(e.name); }\n\
         return [attempts, typeof tools, typeof callTool];",
    )
    .await;
    assert_eq!(outcome.failure, None);
    assert_eq!(
        outcome.result,
        Some(json!([["TypeError", "TypeError"], "object", "function"]))
    );
}

#[tokio::test]
async fn a_call_flood_fails_the_run_and_the_next_run_works() {
    let rt = runtime(CodeBudgets::default());
    let bridge = Arc::new(FakeBridge::default());
    let outcome = run_with(
        &rt,
        &bridge,
        "for (let i = 0; i < 20000; i++) tools.t.hang({}).catch(() => {}); await tools.t.hang({});",
    )
    .await;
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Exception);
    assert!(
        failure.message.contains("waiting to start"),
        "{}",
        failure.message
    );
    let started = bridge.records();
    assert_eq!(started.len(), 10);
    assert!(started.iter().all(|c| c.cancelled));
    assert_eq!(
        run_with(&rt, &bridge, "return 2").await.result,
        Some(json!(2))
    );
    rt.shutdown().await;
}

/// A "worker" that is a shell script speaking (or breaking) the protocol.
fn fake_worker(script: &str) -> CodeRuntime {
    CodeRuntime::new(
        WorkerCommand {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
        },
        CodeBudgets {
            max_output_bytes: 1000,
            max_wall_ms: 5000,
            ..CodeBudgets::default()
        },
    )
    .expect("this kernel confines runs")
}

async fn fake_run(script: &str) -> (mcp_gateway::code::RunOutcome, Arc<FakeBridge>) {
    let rt = fake_worker(script);
    let bridge = Arc::new(FakeBridge::default());
    let outcome = run_with(&rt, &bridge, "return 1").await;
    rt.shutdown().await;
    (outcome, bridge)
}

const READY: &str = r#"read init; echo '{"t":"ready"}'; read run;"#;

#[tokio::test]
async fn garbage_from_the_worker_is_died() {
    let (outcome, _) = fake_run(&format!("{READY} echo 'not json'; exec /bin/sleep 30")).await;
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Died);
    assert!(
        failure.message.contains("bridge protocol"),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn messages_with_forged_fields_are_died() {
    let (outcome, bridge) = fake_run(&format!(
        r#"{READY} echo '{{"t":"call","id":1,"tool":"mcp__t__echo","args":{{}},"reply_to":7}}'; exec /bin/sleep 30"#
    ))
    .await;
    assert_eq!(outcome.failure.unwrap().kind, FailureKind::Died);
    assert!(bridge.records().is_empty());
}

#[tokio::test]
async fn forged_call_ids_are_died_and_never_answered_twice() {
    let (outcome, bridge) = fake_run(&format!(
        r#"{READY} echo '{{"t":"call","id":1,"tool":"mcp__t__echo","args":{{"a":1}}}}'; echo '{{"t":"call","id":1,"tool":"mcp__t__echo","args":{{"a":2}}}}'; exec /bin/sleep 30"#
    ))
    .await;
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Died);
    assert!(
        failure.message.contains("call id 1, expected 2"),
        "{}",
        failure.message
    );
    assert!(bridge.records().len() <= 1);
}

#[tokio::test]
async fn a_message_longer_than_the_cap_is_died() {
    // 1000-byte output budget → 17 MiB message cap; send 20 MB without a newline.
    let (outcome, _) = fake_run(&format!(
        "{READY} /usr/bin/head -c 20000000 /dev/zero | /usr/bin/tr '\\0' a; exec /bin/sleep 30"
    ))
    .await;
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Died);
    assert!(failure.message.contains("exceeds"), "{}", failure.message);
}

#[tokio::test]
async fn speaking_before_ready_is_died() {
    let (outcome, _) = fake_run(r#"echo '{"t":"done","result":1}'; exec /bin/sleep 30"#).await;
    assert_eq!(outcome.failure.unwrap().kind, FailureKind::Died);
}

#[tokio::test]
async fn a_worker_that_exits_is_died_with_its_status() {
    let (outcome, _) = fake_run(&format!("{READY} exit 3")).await;
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Died);
    assert!(
        failure.message.contains("exit status: 3"),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn an_oversized_log_from_a_lying_worker_is_still_output() {
    let big = "q".repeat(5000);
    let (outcome, _) = fake_run(&format!(
        r#"{READY} echo '{{"t":"log","text":"small"}}'; echo '{{"t":"log","text":"{big}"}}'; exec /bin/sleep 30"#
    ))
    .await;
    assert_eq!(outcome.failure.unwrap().kind, FailureKind::Output);
    assert_eq!(outcome.logs, ["small"]);
}
