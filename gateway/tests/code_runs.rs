//! What a program sees and what a run returns: results, logs, tool calls, concurrency,
//! images, and the failures a program can cause by itself.

mod common;

use std::sync::Arc;

use common::{FakeBridge, run, run_with, runtime};
use mcp_gateway::code::{Bindings, FailureKind};
use mcp_gateway::config::CodeBudgets;
use serde_json::json;

#[tokio::test]
async fn return_one() {
    let outcome = run("return 1").await;
    assert_eq!(outcome.failure, None);
    assert_eq!(outcome.result, Some(json!(1)));
    assert!(outcome.logs.is_empty());
}

#[tokio::test]
async fn typescript_with_top_level_await_returns_json_and_logs_in_order() {
    let outcome = run("interface Row { n: number }\n\
         const rows: Row[] = [{ n: 1 }, { n: 2 }];\n\
         console.log('start', rows.length);\n\
         const echoed = await tools.t.echo({ rows });\n\
         console.warn({ nested: [1, 'two', null] });\n\
         console.error(undefined, 3n, NaN);\n\
         return { total: echoed.rows.reduce((a: number, r: Row) => a + r.n, 0), neg: -0 };")
    .await;
    assert_eq!(outcome.failure, None);
    assert_eq!(outcome.result, Some(json!({"total": 3, "neg": 0})));
    assert_eq!(
        outcome.logs,
        ["start 2", r#"{"nested":[1,"two",null]}"#, "undefined 3 NaN"]
    );
}

#[tokio::test]
async fn undefined_completion_has_no_result() {
    let outcome = run("console.log('only logs')").await;
    assert_eq!(outcome.failure, None);
    assert_eq!(outcome.result, None);
    assert_eq!(outcome.logs, ["only logs"]);
}

#[tokio::test]
async fn completions_that_are_not_lossless_json_are_exceptions() {
    for (program, says) in [
        ("return NaN", "is NaN"),
        ("return { f: () => 1 }", "the result.f is a function"),
        ("return [1, undefined]", "the result[1] is undefined"),
        ("return 10n", "BigInt"),
        ("const a: any = {}; a.self = a; return a", "cycle"),
        ("return new Map()", "Map, not a plain object"),
        ("return { when: new Date(0) }", "the result.when is a Date"),
        ("return Infinity", "is Infinity"),
    ] {
        let outcome = run(program).await;
        let failure = outcome.failure.expect(program);
        assert_eq!(failure.kind, FailureKind::Exception, "{program}");
        assert!(
            failure.message.contains(says),
            "{program}: {}",
            failure.message
        );
    }
}

#[tokio::test]
async fn a_thrown_error_reports_the_models_line_and_column() {
    let outcome =
        run("const a: number = 1;\nconsole.log('before');\n\n  throw new Error('boom ' + a);")
            .await;
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Exception);
    assert!(
        failure.message.starts_with("Error: boom 1"),
        "{}",
        failure.message
    );
    assert!(failure.message.contains("4:"), "{}", failure.message);
    assert!(
        !failure.message.contains("program.js"),
        "{}",
        failure.message
    );
    assert_eq!(outcome.logs, ["before"]);
}

#[tokio::test]
async fn a_thrown_string_is_an_exception() {
    let failure = run("throw 'plain'").await.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Exception);
    assert_eq!(failure.message, "Uncaught plain");
}

#[tokio::test]
async fn enum_is_a_parse_failure_before_any_worker_is_used() {
    // A worker that cannot start: reaching it would make the run `died`.
    let rt = mcp_gateway::code::CodeRuntime::new(
        mcp_gateway::code::WorkerCommand {
            program: "/nonexistent/worker".into(),
            args: vec![],
        },
        CodeBudgets::default(),
    )
    .expect("this kernel confines runs");
    let outcome = run_with(
        &rt,
        &Arc::new(FakeBridge::default()),
        "let x = 1;\nenum Color { Red, Green }\nreturn x;",
    )
    .await;
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Parse);
    assert!(
        failure.message.starts_with("2:1: `enum`"),
        "{}",
        failure.message
    );
    rt.shutdown().await;
}

#[tokio::test]
async fn syntax_only_the_engine_refuses_is_a_parse_failure_at_the_models_place() {
    // Decorator-style `accessor` fields strip cleanly but QuickJS has no parser for them.
    let outcome = run("const a = 1;\n  class A { accessor x = 1 }\nreturn a").await;
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Parse);
    assert_eq!(
        failure.message,
        "SyntaxError: Unexpected identifier 'x'\n    at <anonymous> (2:22)"
    );
}

#[tokio::test]
async fn type_only_imports_are_erased_and_value_imports_are_parse_failures() {
    let outcome = run("import type { Row } from './rows';\n\
         export type Id = string;\n\
         const id: Id = 'a';\n\
         return id;")
    .await;
    assert_eq!(outcome.failure, None);
    assert_eq!(outcome.result, Some(json!("a")));
    for (program, says) in [
        (
            "const a = 1;\nimport fs from 'fs';\nreturn a;",
            "2:1: `import` declarations are not supported in run_code",
        ),
        (
            "const a = 1;\nexport { a };",
            "2:1: `export` declarations are not supported in run_code",
        ),
        (
            "const a = 1;\nconst b = \u{fffd};",
            "2:11: unexpected U+FFFD",
        ),
    ] {
        let failure = run(program).await.failure.expect(program);
        assert_eq!(failure.kind, FailureKind::Parse, "{program}");
        assert!(failure.message.starts_with(says), "{}", failure.message);
    }
}

#[tokio::test]
async fn a_failed_tool_call_is_a_tool_call_error_in_the_program() {
    let outcome = run("try { await tools.t.fail({}); return 'no'; }\n\
         catch (e) { return [e instanceof ToolCallError, e.tool, e.message]; }")
    .await;
    assert_eq!(outcome.failure, None);
    assert_eq!(
        outcome.result,
        Some(json!([true, "mcp__t__fail", "Error: denied by policy"]))
    );
}

#[tokio::test]
async fn arguments_that_are_not_json_never_reach_the_bridge() {
    let bridge = Arc::new(FakeBridge::default());
    let rt = runtime(CodeBudgets::default());
    let outcome = run_with(
        &rt,
        &bridge,
        "try { await callTool('mcp__t__echo', { n: NaN }); } catch (e) { return String(e); }",
    )
    .await;
    assert_eq!(
        outcome.result,
        Some(json!(
            "TypeError: the arguments.n is NaN, which is not JSON"
        ))
    );
    assert!(bridge.records().is_empty());
    rt.shutdown().await;
}

#[tokio::test]
async fn images_are_attached_and_removed_from_what_the_program_sees() {
    let outcome = run("const r = await tools.t.raw({}); return r.content;").await;
    assert_eq!(outcome.failure, None);
    assert_eq!(
        outcome.result,
        Some(json!([{"type": "text", "text": "a chart"}]))
    );
    assert_eq!(
        outcome.attachments,
        [json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"})]
    );
}

#[tokio::test]
async fn safe_calls_overlap_up_to_the_limit_and_each_gets_its_own_result() {
    let bridge = Arc::new(FakeBridge::default());
    let rt = runtime(CodeBudgets {
        max_parallel_sub_calls: 4,
        ..CodeBudgets::default()
    });
    let outcome = run_with(
        &rt,
        &bridge,
        "const r = await Promise.all([40, 10, 30, 20, 5, 15, 25, 35].map(ms => tools.t.slow({ ms })));\n\
         return r.map(x => x.slept);",
    )
    .await;
    assert_eq!(outcome.failure, None);
    assert_eq!(outcome.result, Some(json!([40, 10, 30, 20, 5, 15, 25, 35])));
    assert_eq!(bridge.max_overlap(), 4);
    rt.shutdown().await;
}

#[tokio::test]
async fn one_parallel_call_means_serial() {
    let bridge = Arc::new(FakeBridge::default());
    let rt = runtime(CodeBudgets {
        max_parallel_sub_calls: 1,
        ..CodeBudgets::default()
    });
    let outcome = run_with(
        &rt,
        &bridge,
        "await Promise.all([1, 2, 3].map(ms => tools.t.slow({ ms })));",
    )
    .await;
    assert_eq!(outcome.failure, None);
    assert_eq!(bridge.records().len(), 3);
    assert_eq!(bridge.max_overlap(), 1);
    rt.shutdown().await;
}

#[tokio::test]
async fn exclusive_calls_are_barriers_in_program_order() {
    let bridge = Arc::new(FakeBridge::default());
    let rt = runtime(CodeBudgets::default());
    let outcome = run_with(
        &rt,
        &bridge,
        "await Promise.all([tools.t.slow({ ms: 30 }), tools.t.slow({ ms: 10 }), tools.t.write({ ms: 10 }), tools.t.slow({ ms: 1 })]);",
    )
    .await;
    assert_eq!(outcome.failure, None);
    let calls = bridge.records();
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(
        tools,
        [
            "mcp__t__slow",
            "mcp__t__slow",
            "mcp__t__write",
            "mcp__t__slow"
        ]
    );
    let end = |i: usize| calls[i].ended.unwrap();
    // The write starts after both earlier calls ended; the later read after the write.
    assert!(calls[2].started >= end(0) && calls[2].started >= end(1));
    assert!(calls[3].started >= end(2));
    rt.shutdown().await;
}

#[tokio::test]
async fn unfinished_calls_are_cancelled_when_the_run_settles() {
    let bridge = Arc::new(FakeBridge::default());
    let rt = runtime(CodeBudgets::default());
    let outcome = run_with(
        &rt,
        &bridge,
        "tools.t.hang({}).catch(() => {}); return 'left it running';",
    )
    .await;
    assert_eq!(outcome.result, Some(json!("left it running")));
    let calls = bridge.records();
    assert_eq!(calls.len(), 1);
    assert!(calls[0].cancelled, "the hanging call was not cancelled");
    rt.shutdown().await;
}

#[tokio::test]
async fn an_infinite_loop_is_stopped_by_the_compute_budget() {
    let rt = runtime(CodeBudgets {
        compute_ms: 300,
        ..CodeBudgets::default()
    });
    let outcome = run_with(
        &rt,
        &Arc::new(FakeBridge::default()),
        "console.log('spinning'); for (;;) {}",
    )
    .await;
    assert_eq!(outcome.failure.unwrap().kind, FailureKind::Compute);
    assert_eq!(outcome.logs, ["spinning"]);
    rt.shutdown().await;
}

#[tokio::test]
async fn waiting_on_a_tool_is_not_compute_and_is_stopped_by_the_wall_budget() {
    let bridge = Arc::new(FakeBridge::default());
    // The compute budget is a third of the wall budget: a run whose waiting counted as
    // compute would hit it first. Both are far above what a run needs to reach its call,
    // even on a loaded machine.
    let rt = runtime(CodeBudgets {
        compute_ms: 1_000,
        max_wall_ms: 3_000,
        ..CodeBudgets::default()
    });
    let outcome = run_with(&rt, &bridge, "await tools.t.hang({});").await;
    assert_eq!(outcome.failure.unwrap().kind, FailureKind::Wall);
    let records = bridge.records();
    assert_eq!(records.len(), 1, "the program called the tool once");
    assert!(records[0].cancelled);
    rt.shutdown().await;
}

#[tokio::test]
async fn a_promise_nothing_can_settle_fails_at_once() {
    let failure = run("await new Promise(() => {}); return 1;")
        .await
        .failure
        .unwrap();
    assert_eq!(failure.kind, FailureKind::Exception);
    assert!(
        failure.message.contains("nothing can settle"),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn a_memory_bomb_hits_the_heap_limit() {
    let rt = runtime(CodeBudgets {
        heap_mb: 64,
        ..CodeBudgets::default()
    });
    let outcome = run_with(
        &rt,
        &Arc::new(FakeBridge::default()),
        "const keep: string[] = []; for (let i = 0; ; i++) keep.push('x'.repeat(100000) + i);",
    )
    .await;
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Heap, "{}", failure.message);
    rt.shutdown().await;
}

#[tokio::test]
async fn a_typed_array_past_the_heap_limit_is_refused() {
    let rt = runtime(CodeBudgets {
        heap_mb: 64,
        ..CodeBudgets::default()
    });
    let outcome = run_with(
        &rt,
        &Arc::new(FakeBridge::default()),
        "const bytes = new Uint8Array(200 * 1024 * 1024);\n\
         for (let i = 0; i < bytes.length; i += 4096) bytes[i] = 1;\n\
         return bytes.length;",
    )
    .await;
    let failure = outcome.failure.expect("200 MiB fit in a 64 MiB heap");
    assert!(
        failure.message.contains("out of memory"),
        "{:?}: {}",
        failure.kind,
        failure.message
    );
    rt.shutdown().await;
}

#[tokio::test]
async fn a_log_flood_hits_the_output_budget_and_keeps_what_fit() {
    let rt = runtime(CodeBudgets {
        max_output_bytes: 100_000,
        ..CodeBudgets::default()
    });
    let outcome = run_with(
        &rt,
        &Arc::new(FakeBridge::default()),
        "for (let i = 0; ; i++) console.log('line ' + i + ' ' + 'x'.repeat(100));",
    )
    .await;
    assert_eq!(outcome.failure.unwrap().kind, FailureKind::Output);
    assert!(!outcome.logs.is_empty());
    assert_eq!(outcome.logs[0], format!("line 0 {}", "x".repeat(100)));
    let kept: usize = outcome.logs.iter().map(|l| l.len() + 3).sum();
    assert!(kept <= 100_000);
    rt.shutdown().await;
}

#[tokio::test]
async fn a_huge_thrown_value_becomes_a_fixed_output_diagnostic() {
    let rt = runtime(CodeBudgets {
        max_output_bytes: 100_000,
        ..CodeBudgets::default()
    });
    let outcome = run_with(
        &rt,
        &Arc::new(FakeBridge::default()),
        "throw new Error('y'.repeat(1000000));",
    )
    .await;
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Output);
    assert!(failure.message.len() < 200, "{}", failure.message);
    rt.shutdown().await;
}

#[tokio::test]
async fn a_result_over_the_output_budget_is_an_output_failure() {
    let rt = runtime(CodeBudgets {
        max_output_bytes: 1000,
        ..CodeBudgets::default()
    });
    let outcome = run_with(
        &rt,
        &Arc::new(FakeBridge::default()),
        "return 'z'.repeat(5000);",
    )
    .await;
    assert_eq!(outcome.failure.unwrap().kind, FailureKind::Output);
    assert_eq!(outcome.result, None);
    rt.shutdown().await;
}

#[tokio::test]
async fn timers_fire_in_order_and_can_be_cleared() {
    let outcome = run(
        "const seen: string[] = [];\n\
         const cleared = setTimeout(() => seen.push('cleared'), 5);\n\
         clearTimeout(cleared);\n\
         await new Promise<void>(done => { setTimeout(() => seen.push('b'), 20); setTimeout((x: string) => seen.push(x), 1, 'a'); setTimeout(done, 40); });\n\
         return seen;",
    )
    .await;
    assert_eq!(outcome.failure, None);
    assert_eq!(outcome.result, Some(json!(["a", "b"])));
}

#[tokio::test]
async fn timers_run_inside_the_wall_budget() {
    let rt = runtime(CodeBudgets {
        max_wall_ms: 300,
        ..CodeBudgets::default()
    });
    let outcome = run_with(
        &rt,
        &Arc::new(FakeBridge::default()),
        "await new Promise(r => setTimeout(r, 60000));",
    )
    .await;
    assert_eq!(outcome.failure.unwrap().kind, FailureKind::Wall);
    rt.shutdown().await;
}

#[tokio::test]
async fn runs_can_be_spawned_onto_other_tasks() {
    let rt = Arc::new(runtime(CodeBudgets::default()));
    let runs: Vec<_> = (0..3)
        .map(|i| {
            let rt = Arc::clone(&rt);
            tokio::spawn(async move {
                let bridge = Arc::new(FakeBridge::default());
                run_with(
                    &rt,
                    &bridge,
                    &format!("return (await tools.t.echo({{ i: {i} }})).i"),
                )
                .await
            })
        })
        .collect();
    for (i, handle) in runs.into_iter().enumerate() {
        assert_eq!(handle.await.unwrap().result, Some(json!(i)));
    }
    rt.shutdown().await;
}

/// Two sets of bindings (as two profiles, or a catalog before and after a change would
/// give), in turns, one run after another and several at once, on a multi-threaded
/// runtime with real worker processes: each run sees exactly its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_run_sees_its_own_bindings_whatever_ran_before() {
    let rt = Arc::new(runtime(CodeBudgets::default()));
    let names = "return Object.keys(tools.t).sort().join(',');";
    let fewer = Arc::new(common::BINDINGS.replace("image: bind(\"image\"),", ""));
    let expected = |round: usize| {
        if round.is_multiple_of(2) {
            "echo,fail,hang,image,raw,slow,write"
        } else {
            "echo,fail,hang,raw,slow,write"
        }
    };
    let bindings = move |round: usize| {
        Bindings::Script(if round.is_multiple_of(2) {
            common::BINDINGS.to_owned()
        } else {
            fewer.as_str().to_owned()
        })
    };
    let bridge = Arc::new(FakeBridge::default());
    // Each set twice in a row: the second run's process made its bindings ahead (those
    // of the run before), the first's did not.
    for round in (0..8).map(|run| run / 2) {
        let outcome = rt
            .run(names, &bindings(round), bridge.clone(), Default::default())
            .await;
        assert_eq!(
            outcome.result,
            Some(json!(expected(round))),
            "round {round}: {:?}",
            outcome.failure
        );
    }
    let concurrent: Vec<_> = (0..6)
        .map(|round| {
            let (rt, bridge, bindings) = (Arc::clone(&rt), bridge.clone(), bindings(round));
            tokio::spawn(async move { rt.run(names, &bindings, bridge, Default::default()).await })
        })
        .collect();
    for (round, run) in concurrent.into_iter().enumerate() {
        let outcome = run.await.unwrap();
        assert_eq!(
            outcome.result,
            Some(json!(expected(round))),
            "concurrent run {round}: {:?}",
            outcome.failure
        );
    }
    rt.shutdown().await;
}

/// A runner installs the last run's bindings before its run arrives, replaceable until
/// the program starts: by then they are sealed, for a run on such a runner (the second
/// here) as for one that installed its own (the first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_cannot_replace_or_delete_its_tool_bindings() {
    let rt = runtime(CodeBudgets::default());
    let bridge = Arc::new(FakeBridge::default());
    let program = "const before = tools;\n\
         const attempt = (change: () => unknown) => { try { change(); return 'changed'; } catch (e) { return (e as Error).name; } };\n\
         return {\n\
           redefine: attempt(() => Object.defineProperty(globalThis, 'tools', { value: {} })),\n\
           remove: attempt(() => delete (globalThis as any).callTool),\n\
           assign: attempt(() => { (globalThis as any).ToolCallError = null; }),\n\
           configurable: ['tools', 'callTool', 'ToolCallError']\n\
             .map((name) => Object.getOwnPropertyDescriptor(globalThis, name)!.configurable),\n\
           same: tools === before && typeof callTool === 'function' && typeof ToolCallError === 'function',\n\
         };";
    for round in 0..2 {
        let outcome = run_with(&rt, &bridge, program).await;
        assert_eq!(
            outcome.result,
            Some(json!({
                "redefine": "TypeError",
                "remove": "TypeError",
                "assign": "TypeError",
                "configurable": [false, false, false],
                "same": true,
            })),
            "round {round}: {:?}",
            outcome.failure
        );
    }
    rt.shutdown().await;
}
