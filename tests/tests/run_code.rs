//! Issue 6: run_code end to end — TypeScript through the gateway, its tool calls through
//! the pipeline, every failure kind for real, hostile programs, cancellation and workers
//! that never outlive their run or the gateway.

use std::time::Duration;

use mcp_gateway_tests::*;
use serde_json::{Value, json};

fn run(code: &str) -> Value {
    json!({"action": "call_tool", "name": "run_code", "arguments": {"code": code}})
}

/// kv, slow (with its event log) and everything, in `both` mode, with `extra` settings.
fn workspace(extra: &str) -> Workspace {
    let workspace = Workspace::new(&format!(
        "[gateway]\nmode = \"both\"\n{}{}{extra}",
        example_server("kv", "kv"),
        npm_server("everything", "mcp-server-everything", &["stdio"]),
    ));
    let slow = format!(
        "{}env = {{ SLOW_EVENT_LOG = {} }}\n{}",
        example_server("slow", "slow"),
        toml_str(workspace.slow_event_log().to_string_lossy()),
        event_log_grant(&workspace.slow_event_log()),
    );
    let text = std::fs::read_to_string(workspace.config()).unwrap();
    std::fs::write(workspace.config(), format!("{slow}{text}")).unwrap();
    workspace
}

fn structured(run: &Value, index: usize) -> &Value {
    &action_result(run, index)["structuredContent"]
}

fn failure_kind(run: &Value, index: usize) -> String {
    let result = action_result(run, index);
    assert_eq!(error_code(result), Some("CODE_RUN_FAILED"), "{run:#}");
    result["_meta"]["mcp-gateway/error"]["detail"]["kind"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn programs_call_tools_of_several_servers_in_parallel() {
    let workspace = workspace("");
    let program = r#"
        await tools.kv.set({ key: "greeting", value: "hello" });
        const [sum, echoed, got] = await Promise.all([
          tools.everything["get-sum"]({ a: 20, b: 22 }),
          tools.everything.echo({ message: "hi" }),
          tools.kv.get({ key: "greeting" }),
        ]);
        console.log("sum", sum);
        return { sum, echoed, value: got.value };
    "#;
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([{"action": "list_tools"}, run(program)]),
    );
    let run_code = action_result(&run, 0)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "run_code")
        .cloned()
        .expect("run_code is listed in both mode");
    let description = run_code["description"].as_str().unwrap();
    assert!(
        description.contains("get-sum") && description.contains("declare"),
        "the SDK is in the description"
    );
    assert!(
        run_code["_meta"]["mcp-gateway/sdk"]["hash"].is_string(),
        "{run_code:#}"
    );
    let value = structured(&run, 1);
    assert!(
        value["result"]["sum"].as_str().unwrap().contains("42"),
        "{run:#}"
    );
    assert!(
        value["result"]["echoed"].as_str().unwrap().contains("hi"),
        "{run:#}"
    );
    assert_eq!(value["result"]["value"], "hello");
    assert!(
        value["logs"][0].as_str().unwrap().starts_with("sum"),
        "{run:#}"
    );
    let kinds: Vec<String> = workspace
        .session_events()
        .iter()
        .filter_map(|e| e["type"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| *k == "tool/code-dispatch-start")
            .count(),
        4,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| *k == "tool/code-dispatch").count(),
        4,
        "{kinds:?}"
    );
}

#[test]
fn every_failure_kind_for_real() {
    let workspace = workspace(
        "[code]\ncompute_ms = 1000\nmax_wall_ms = 8000\nmax_output_bytes = 100000\nheap_mb = 64\n",
    );
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([
            run("while (true) {}"),
            run("await tools.slow.sleep({ ms: 60000 });"),
            run("const a = []; while (true) a.push(new Array(100000).fill(1));"),
            run("for (;;) console.log('flood flood flood flood flood');"),
            run("enum Color { Red }\nreturn 1;"),
            run("const x = 1;\nthrow new Error('boom');"),
            run("await new Promise(() => {});"),
            run("return 40 + 2;"),
        ]),
    );
    assert_eq!(failure_kind(&run, 0), "compute");
    assert_eq!(failure_kind(&run, 1), "wall");
    assert_eq!(failure_kind(&run, 2), "heap");
    assert_eq!(failure_kind(&run, 3), "output");
    assert_eq!(failure_kind(&run, 4), "parse");
    assert!(
        result_text(action_result(&run, 4)).contains("1:1"),
        "line:column in the model's code: {run:#}"
    );
    assert_eq!(failure_kind(&run, 5), "exception");
    assert!(result_text(action_result(&run, 5)).contains("boom"));
    assert!(
        result_text(action_result(&run, 5)).contains("2:"),
        "{run:#}"
    );
    // A promise nothing can ever settle is reported at once, not after the wall budget.
    assert_eq!(failure_kind(&run, 6), "exception");
    assert_eq!(
        structured(&run, 7)["result"],
        42,
        "the gateway serves the next run: {run:#}"
    );
}

#[test]
fn a_gate_denied_call_is_a_tool_call_error_in_the_program() {
    let workspace = workspace(
        "[[policy]]\ntool = \"mcp__kv__delete\"\ndecision = \"deny\"\nreason = \"no deletes\"\n",
    );
    let program = r#"
        try {
          await tools.kv.delete({ key: "x" });
          return "not denied";
        } catch (e) {
          return { name: e.name, code: e.code, tool: e.tool, isToolCallError: e instanceof ToolCallError };
        }
    "#;
    let run = python_client(&python_stdio_args(&workspace, &[]), &json!([run(program)]));
    let caught = &structured(&run, 0)["result"];
    assert_eq!(caught["code"], "DENIED", "{run:#}");
    assert_eq!(caught["isToolCallError"], true, "{run:#}");
    assert_eq!(caught["tool"], "mcp__kv__delete", "{run:#}");
}

#[test]
fn a_program_cannot_call_run_code() {
    // `callTool` knows only the session's tools, but a server that has not come up keeps a
    // namespace in which every name is a call: with the upstream's own names (`prefix =
    // ""`), `tools.ghost.run_code` is a call of `run_code`.
    let workspace =
        workspace("[servers.ghost]\ncommand = \"/nonexistent/mcp-server\"\nprefix = \"\"\n");
    let program = r#"
        const attempts = {};
        for (const [way, attempt] of [
          ["callTool", () => callTool("run_code", { code: "return 'nested';" })],
          ["namespace", () => tools.ghost.run_code({ code: "return 'nested';" })],
        ]) {
          try {
            attempts[way] = { nested: await attempt() };
          } catch (e) {
            attempts[way] = { code: e.code, message: e.message };
          }
        }
        return attempts;
    "#;
    let run = python_client(&python_stdio_args(&workspace, &[]), &json!([run(program)]));
    let attempts = &structured(&run, 0)["result"];
    assert_eq!(attempts["callTool"]["code"], "TOOL_NOT_FOUND", "{run:#}");
    let namespace = &attempts["namespace"];
    assert_eq!(namespace["code"], "DENIED", "{run:#}");
    assert!(
        namespace["message"]
            .as_str()
            .unwrap()
            .contains("run_code cannot be called from a run_code program"),
        "{run:#}"
    );
}

#[test]
fn read_only_calls_overlap_and_exclusive_ones_are_barriers() {
    let workspace = workspace("[code]\nmax_parallel_sub_calls = 3\n");
    let program = r#"
        await Promise.all([1, 2, 3].map((i) => tools.slow.wait({ ms: 300, label: "r" + i })));
        await Promise.all([1, 2].map((i) => tools.slow.sleep({ ms: 200, label: "w" + i })));
        return "done";
    "#;
    let run = python_client(&python_stdio_args(&workspace, &[]), &json!([run(program)]));
    assert_eq!(structured(&run, 0)["result"], "done", "{run:#}");
    let events: Vec<Value> = std::fs::read_to_string(workspace.slow_event_log())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = |event: &str, label: &str| -> i64 {
        events
            .iter()
            .find(|e| e["event"] == event && e["label"] == label)
            .unwrap_or_else(|| panic!("no {event} for {label}: {events:?}"))["at_ms"]
            .as_i64()
            .unwrap()
    };
    let last_read_start = ["r1", "r2", "r3"]
        .iter()
        .map(|l| at("start", l))
        .max()
        .unwrap();
    let first_read_end = ["r1", "r2", "r3"]
        .iter()
        .map(|l| at("end", l))
        .min()
        .unwrap();
    assert!(
        last_read_start < first_read_end,
        "read-only calls overlapped: {events:?}"
    );
    let (w1, w2) = (("start", "w1"), ("start", "w2"));
    let (first, second) = if at(w1.0, w1.1) < at(w2.0, w2.1) {
        ("w1", "w2")
    } else {
        ("w2", "w1")
    };
    assert!(
        at("end", first) <= at("start", second),
        "exclusive calls ran one at a time: {events:?}"
    );
}

#[test]
fn hostile_programs_leave_the_gateway_serving() {
    let workspace = workspace("");
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([
            run("return typeof Deno + ',' + typeof __bootstrap + ',' + typeof globalThis.Deno;"),
            run("return (function(){}).constructor('return typeof Deno')();"),
            run("Deno.core.ops.op_panic('x');"),
            run("return tools.constructor.constructor('return typeof Deno')();"),
            run("await callTool('mcp__kv__nope', {});"),
            run("return await tools.kv.list({});"),
        ]),
    );
    assert_eq!(
        structured(&run, 0)["result"],
        "undefined,undefined,undefined",
        "{run:#}"
    );
    assert_eq!(structured(&run, 1)["result"], "undefined", "{run:#}");
    assert_eq!(failure_kind(&run, 2), "exception", "Deno is out of reach");
    let third = action_result(&run, 3);
    assert!(
        error_code(third).is_some() || third["structuredContent"]["result"] == "undefined",
        "{run:#}"
    );
    assert_eq!(
        failure_kind(&run, 4),
        "exception",
        "an unknown tool throws in the program"
    );
    assert!(
        structured(&run, 5)["result"]["keys"].is_array(),
        "still serving: {run:#}"
    );
}

#[test]
fn cancelling_a_run_kills_its_worker_and_aborts() {
    let workspace = workspace("");
    let gateway = workspace.serve_http(&[]);
    let args = gateway.client_args("http", "/mcp");
    let upstreams = || {
        descendants(gateway.pid())
            .into_iter()
            .filter(|&pid| !is_worker(pid))
            .count()
    };
    let before = upstreams();
    let run = python_client(
        &args,
        &json!([
            {"action": "call_tool", "name": "run_code", "arguments": {"code": "while (true) {}"}, "cancel_after_ms": 1000},
            run("return 'next';"),
        ]),
    );
    assert_eq!(run["results"][0]["cancelled"], true, "{run:#}");
    assert_eq!(structured(&run, 1)["result"], "next");
    let results: Vec<Value> = workspace
        .session_events()
        .into_iter()
        .filter(|e| e["type"] == "tool/result" && e["tool"] == "run_code")
        .collect();
    assert_eq!(results[0]["error"]["code"], "ABORTED", "{results:?}");
    // Only the template and the runner for the next run may be left, and every upstream
    // is still there.
    let workers = || {
        descendants(gateway.pid())
            .into_iter()
            .filter(|&pid| is_worker(pid))
            .count()
    };
    assert!(
        eventually(Duration::from_secs(5), || workers() <= 2),
        "a run's worker was left behind"
    );
    assert_eq!(upstreams(), before);
}

/// CPU time (user + system, in clock ticks) that process `pid` has used.
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(11) + field(12)
}

/// Whether `pid` is a run_code worker.
fn is_worker(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.contains("__code-worker"))
}

/// The gateway's worker process that is running a busy program (burning CPU).
fn busy_worker(gateway: i32) -> i32 {
    let mut found = None;
    assert!(
        eventually(Duration::from_secs(30), || {
            found = descendants(gateway)
                .into_iter()
                .find(|&pid| is_worker(pid) && cpu_ticks(pid) > 30);
            found.is_some()
        }),
        "no worker started running the program"
    );
    found.unwrap()
}

#[test]
fn a_worker_killed_from_outside_is_died_and_workers_die_with_the_gateway() {
    let workspace = workspace("[code]\ncompute_ms = 20000\n");
    let mut gateway = workspace.serve_http(&[]);
    let args = gateway.client_args("http", "/mcp");
    let client = std::thread::spawn({
        let args = args.clone();
        move || {
            python_client(
                &args,
                &json!([run("console.log('spinning'); while (true) {}")]),
            )
        }
    });
    let worker = busy_worker(gateway.pid());
    // SAFETY: killing the gateway's own worker process is the point of the test.
    unsafe { libc::kill(worker, libc::SIGKILL) };
    let killed = client.join().unwrap();
    assert_eq!(failure_kind(&killed, 0), "died", "{killed:#}");
    assert!(
        result_text(action_result(&killed, 0)).contains("spinning"),
        "logs before the kill are kept: {killed:#}"
    );

    let spinning =
        std::thread::spawn(move || python_client(&args, &json!([run("while (true) {}")])));
    busy_worker(gateway.pid());
    let all = descendants(gateway.pid());
    gateway.signal_and_wait(libc::SIGKILL, Duration::from_secs(10));
    assert!(
        eventually(Duration::from_secs(5), || all
            .iter()
            .all(|&pid| !alive(pid))),
        "workers and upstreams die with the gateway: {all:?}"
    );
    let _ = spinning.join();
}

#[test]
fn healthz_and_the_start_up_log_say_how_runs_are_confined() {
    let workspace = Workspace::new(&format!(
        "[gateway]\nmode = \"both\"\n{}",
        example_server("kv", "kv")
    ));
    let gateway = workspace.serve_http(&[]);
    let confinement = &health(&gateway)["code_confinement"];
    // run_code requires seccomp and Landlock by default: a kernel without them fails here.
    assert_eq!(confinement["rlimits"], true, "{confinement:#}");
    assert_eq!(confinement["no_new_privs"], true, "{confinement:#}");
    assert_eq!(confinement["seccomp"], true, "{confinement:#}");
    let abi = confinement["landlock_abi"].as_u64();
    assert!(abi.is_some(), "{confinement:#}");
    // Landlock before ABI 6 lacks network and signal scoping, which the log names.
    let partial = "this kernel lacks some of run_code's process confinement";
    let said = |text: &str| {
        eventually(Duration::from_secs(10), || {
            gateway.log_text().contains(text)
        })
    };
    if abi.is_some_and(|abi| abi < 6) {
        assert!(said(partial), "{}", gateway.log_text());
    } else {
        assert!(
            !gateway.log_text().contains(partial),
            "{}",
            gateway.log_text()
        );
    }
}
