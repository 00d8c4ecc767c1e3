//! Tasks of 2026-07-28 (`io.modelcontextprotocol/tasks`) through the gateway, with our
//! conformance example as the upstream, and raw stateless requests as the client (each
//! identity a bearer token of its own):
//!
//! - in front of a server of 2026-07-28 the server's tasks pass through: the handle under
//!   an id of the gateway's, `tasks/get` to the server's result, and to any other identity
//!   the task does not exist;
//! - in front of a server of 2025-11-25, which has no tasks, a call that runs long becomes
//!   a task of the gateway's own, polled to its result, answered through `tasks/update`
//!   when it asks its client something, and stopped by `tasks/cancel`;
//! - a task's question nobody answers within `[listen.limits] input_deadline_secs` fails
//!   the task and frees its upstream for other clients' calls (a stdio server of
//!   2025-11-25, `tests/servers/task_support.py`, whose requests nothing on the wire ties
//!   to a call, so calls of tools that ask take turns).

use mcp_gateway_tests::streamable::{self, TaskClient};
use std::time::Duration;

use mcp_gateway_tests::*;
use serde_json::json;

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789abc";

/// The gateway in front of the conformance example spoken to at `protocol`, with the
/// server's own names, and two identities.
fn gateway_config(upstream: &ListeningServer, protocol: &str) -> String {
    format!(
        "[listen]\ntokens = [\"{ALICE}\", \"{BOB}\"]\n\n{}",
        upstream.server_config(
            "conformance",
            &format!("prefix = \"\"\nrewrite_uris = false\nprotocol = \"{protocol}\"\n"),
        )
    )
}

#[test]
fn an_upstreams_task_passes_through_to_its_creator_only() {
    let upstream = ListeningServer::conformance();
    let workspace = Workspace::new(&gateway_config(&upstream, "2026-07-28"));
    let gateway = workspace.serve_http(&[]);
    let alice = TaskClient::new(gateway.address, Some(ALICE));
    let bob = TaskClient::new(gateway.address, Some(BOB));

    let discovered = alice.request("server/discover", json!({}));
    assert!(
        discovered["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{discovered}"
    );
    let created = alice.request(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0.2, "label": "through"}}),
    );
    let handle = &created["result"];
    assert_eq!(handle["resultType"], "task", "{created}");
    let id = handle["taskId"].as_str().expect("a task id");
    assert!(
        id.starts_with("conformance."),
        "namespaced by its upstream: {id}"
    );
    assert!(
        handle["ttlMs"].is_u64() && handle["createdAt"].is_string(),
        "{created}"
    );

    // A task id is no bearer: to Bob the task does not exist, whatever he asks of it.
    for method in ["tasks/get", "tasks/cancel"] {
        let refused = bob.request(method, json!({"taskId": id}));
        assert_eq!(refused["error"]["code"], -32602, "{method}: {refused}");
    }
    let undeclared = alice.request_as("tasks/get", json!({"taskId": id}), true);
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");

    let done = alice.poll(id, "completed");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["taskId"], id, "{done}");
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("through"), "{done}");
    for removed in ["tasks/result", "tasks/list"] {
        let answer = alice.request(removed, json!({"taskId": id}));
        assert_eq!(answer["error"]["code"], -32601, "{removed}: {answer}");
    }

    // Cancelled through the gateway, the upstream's task settles as cancelled.
    let long = alice.request(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": "stopped"}}),
    );
    let id = long["result"]["taskId"].as_str().expect("a task id");
    let ack = alice.request("tasks/cancel", json!({"taskId": id}));
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    assert_eq!(alice.poll(id, "cancelled")["status"], "cancelled");
}

#[test]
fn a_call_to_an_older_server_becomes_a_task_of_the_gateways() {
    let upstream = ListeningServer::conformance();
    let workspace = Workspace::new(&gateway_config(&upstream, "2025-11-25"));
    let gateway = workspace.serve_http(&[]);
    let alice = TaskClient::new(gateway.address, Some(ALICE));
    let bob = TaskClient::new(gateway.address, Some(BOB));

    // A quick call is answered as a call.
    let greeted = alice.request(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Ada"}}),
    );
    assert_eq!(
        greeted["result"]["content"][0]["text"], "Hello, Ada!",
        "{greeted}"
    );

    // A call that asks its client something becomes a task at once: the question is the
    // task's, answered with tasks/update, and the server's answer its result.
    let created = alice.request(
        "tools/call",
        json!({"name": "confirm_delete", "arguments": {"filename": "notes.txt"}}),
    );
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().expect("a task id");
    assert!(id.starts_with("gateway."), "{id}");
    assert_eq!(
        bob.request("tasks/get", json!({"taskId": id}))["error"]["code"],
        -32602
    );
    let asking = alice.poll(id, "input_required");
    let questions = asking["inputRequests"].as_object().expect("questions");
    assert_eq!(questions.len(), 1, "{asking}");
    let (key, question) = questions.iter().next().unwrap();
    assert_eq!(question["method"], "elicitation/create", "{asking}");
    let answers = json!({key: {"action": "accept", "content": {"confirm": true}}});
    let ack = alice.request(
        "tasks/update",
        json!({"taskId": id, "inputResponses": answers}),
    );
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = alice.poll(id, "completed");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "Deleted `notes.txt`",
        "{done}"
    );

    // A call that runs long becomes a task, which tasks/cancel stops.
    let created = alice.request(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 600, "label": "long"}}),
    );
    let id = created["result"]["taskId"].as_str().expect("a task id");
    assert_eq!(alice.poll(id, "working")["status"], "working");
    let ack = alice.request("tasks/cancel", json!({"taskId": id}));
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    assert_eq!(alice.poll(id, "cancelled")["status"], "cancelled");

    // A protocol error of the server's fails the task, and says why.
    let created = alice.request(
        "tools/call",
        json!({"name": "protocol_error_job", "arguments": {}}),
    );
    let id = created["result"]["taskId"].as_str().expect("a task id");
    let failed = alice.poll(id, "failed");
    assert_eq!(failed["status"], "failed", "{failed}");
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("protocol_error_job"), "{failed}");
    assert!(failed.get("result").is_none(), "{failed}");
}

/// Our conformance example declares what each of its task tools supports
/// (`execution.taskSupport`); in front of it at 2025-11-25 clients see the declarations,
/// and the gateway's own tasks follow them: `failing_job` (`required`) is refused to a
/// client without the tasks extension and is a task at once for one with it.
#[test]
fn the_conformance_examples_declarations_reach_clients_and_decide_the_gateways_tasks() {
    let upstream = ListeningServer::conformance();
    let workspace = Workspace::new(&gateway_config(&upstream, "2025-11-25"));
    let gateway = workspace.serve_http(&[]);
    let alice = TaskClient::new(gateway.address, Some(ALICE));

    let listed = alice.request("tools/list", json!({}));
    let support = |name: &str| {
        listed["result"]["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|tool| tool["name"] == name))
            .map(|tool| tool["execution"]["taskSupport"].clone())
            .unwrap_or_default()
    };
    for (tool, declared) in [
        ("greet", "forbidden"),
        ("slow_compute", "optional"),
        ("confirm_delete", "optional"),
        ("failing_job", "required"),
        ("test_tool_with_task", "required"),
    ] {
        assert_eq!(support(tool), declared, "{tool}: {listed}");
    }

    let call = json!({"name": "failing_job", "arguments": {}});
    let refused = alice.request_as("tools/call", call.clone(), true);
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    let created = alice.request("tools/call", call);
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().expect("a task id");
    let done = alice.poll(id, "completed");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], true, "{done}");
}

#[test]
fn a_long_run_code_run_becomes_a_task_of_the_gateways() {
    let workspace = Workspace::new(&format!(
        "[listen]\ntokens = [\"{ALICE}\"]\n\n[gateway]\nmode = \"both\"\n\n[tasks]\nanswer_within_ms = 100\n\n{}",
        example_server("slow", "slow"),
    ));
    let gateway = workspace.serve_http(&[]);
    let alice = TaskClient::new(gateway.address, Some(ALICE));
    let program = "await tools.slow.sleep({ ms: 1500 }); return { slept: true };";
    let created = alice.request(
        "tools/call",
        json!({"name": "run_code", "arguments": {"code": program}}),
    );
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().expect("a task id");
    let done = alice.poll(id, "completed");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["result"]["slept"], true,
        "{done}"
    );
}

#[test]
fn a_session_of_2025_gets_its_answer_whatever_it_declares() {
    let upstream = ListeningServer::conformance();
    let workspace = Workspace::new(&gateway_config(&upstream, "2026-07-28"));
    let gateway = workspace.serve_http(&[]);
    // Declaring the extension of 2026-07-28 at `initialize` makes no session a task taker.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "clientInfo": {"name": "old", "version": "1"},
        "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}});
    let (status, headers, body) =
        streamable::post(gateway.address, None, Some(ALICE), &initialize.to_string());
    assert_eq!(status, 200, "{body}");
    let session = streamable::header(&headers, "mcp-session-id").expect("a session");
    let (status, _, body) = streamable::post(
        gateway.address,
        Some(session),
        Some(ALICE),
        streamable::INITIALIZED,
    );
    assert_eq!(status, 202, "{body}");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "slow_compute", "arguments": {"seconds": 0.2, "label": "old"}}});
    let (status, _, body) = streamable::post(
        gateway.address,
        Some(session),
        Some(ALICE),
        &call.to_string(),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("slow_compute `old` done"), "{body}");
}

/// Over stdio nothing ties a server's question to a call, so while Alice's task waits for
/// her answer, Bob's call of a tool that asks waits for its turn on that server. Alice
/// never answers: past `input_deadline_secs` her task fails with `INPUT_EXPIRED` (its call
/// cancelled), and Bob's call goes on, asks him, and completes.
#[test]
fn an_unanswered_task_question_expires_and_frees_its_upstream() {
    let workspace = Workspace::new(&format!(
        "[listen]\ntokens = [\"{ALICE}\", \"{BOB}\"]\n\n[listen.limits]\ninput_deadline_secs = 1\n\n\
         [servers.tasks]\ncommand = {}\nargs = [{}]\nprefix = \"\"\n",
        toml_str(system_python().to_string_lossy()),
        toml_str(
            repo()
                .join("tests/servers/task_support.py")
                .to_string_lossy()
        ),
    ));
    let gateway = workspace.serve_http(&[]);
    let alice = TaskClient::new(gateway.address, Some(ALICE));
    let bob = TaskClient::new(gateway.address, Some(BOB));
    let delete = |client: &TaskClient, filename: &str| {
        let created = client.request(
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": filename}}),
        );
        assert_eq!(created["result"]["resultType"], "task", "{created}");
        created["result"]["taskId"]
            .as_str()
            .expect("a task id")
            .to_owned()
    };

    let abandoned = delete(&alice, "alice.txt");
    assert_eq!(
        alice.poll(&abandoned, "input_required")["status"],
        "input_required"
    );
    let waiting = delete(&bob, "bob.txt");

    let failed = alice.poll(&abandoned, "failed");
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["data"]["code"], "INPUT_EXPIRED", "{failed}");
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("input_deadline_secs"), "{failed}");

    let asking = bob.poll(&waiting, "input_required");
    assert_eq!(asking["status"], "input_required", "{asking}");
    let key = asking["inputRequests"]
        .as_object()
        .and_then(|questions| questions.keys().next().cloned())
        .expect("Bob's question");
    let answers = json!({key: {"action": "accept", "content": {"confirm": true}}});
    bob.request(
        "tasks/update",
        json!({"taskId": waiting, "inputResponses": answers}),
    );
    let done = bob.poll(&waiting, "completed");
    assert_eq!(
        done["result"]["content"][0]["text"], "Deleted `bob.txt`",
        "{done}"
    );
}

/// Rewrites the gateway's configuration by `edit` and waits until it reloaded.
fn reload(workspace: &Workspace, gateway: &Gateway, edit: impl FnOnce(String) -> String) {
    let before = gateway.log_text().matches("configuration reloaded").count();
    let config = std::fs::read_to_string(workspace.config()).unwrap();
    std::fs::write(workspace.config(), edit(config)).unwrap();
    // SAFETY: kill only sends a signal to our own child.
    unsafe { libc::kill(gateway.pid(), libc::SIGHUP) };
    assert!(
        eventually(Duration::from_secs(20), || {
            gateway.log_text().matches("configuration reloaded").count() > before
        }),
        "never reloaded: {}",
        gateway.log_text()
    );
}

#[test]
fn every_request_about_a_task_passes_the_gate_and_the_profile_again() {
    let upstream = ListeningServer::conformance();
    // Alice's token is bound to a profile that shows every tool, for now.
    let config = gateway_config(&upstream, "2026-07-28").replace(
        &format!("\"{ALICE}\""),
        &format!("{{ token = \"{ALICE}\", profile = \"narrow\" }}"),
    ) + "\n[profiles.narrow]\ndeny = []\n";
    let workspace = Workspace::new(&config);
    let gateway = workspace.serve_http(&[]);
    let alice = TaskClient::new(gateway.address, Some(ALICE));
    let created = alice.request(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 600, "label": "gated"}}),
    );
    let id = created["result"]["taskId"].as_str().expect("a task id");
    assert_eq!(alice.poll(id, "working")["status"], "working");

    // A rule that denies the call now refuses every request about its task.
    let rule = "[[policy]]\ntool = \"slow_compute\"\ndecision = \"deny\"\nreason = \"no more\"\n\n";
    reload(&workspace, &gateway, |config| format!("{rule}{config}"));
    for method in ["tasks/get", "tasks/cancel"] {
        let refused = alice.request(method, json!({"taskId": id}));
        assert_eq!(refused["error"]["code"], -32600, "{method}: {refused}");
        assert_eq!(
            refused["error"]["data"]["code"], "DENIED",
            "{method}: {refused}"
        );
    }

    // A profile that no longer shows the tool knows no task of it.
    reload(&workspace, &gateway, |config| {
        config
            .replace(rule, "")
            .replace("deny = []", "deny = [\"slow_compute\"]")
    });
    let unknown = alice.request("tasks/get", json!({"taskId": id}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[test]
fn past_its_quota_of_tasks_a_long_call_stays_a_call() {
    let upstream = ListeningServer::conformance();
    let config = gateway_config(&upstream, "2025-11-25").replace(
        "[listen]\n",
        "[listen.limits]\nmax_tasks_per_identity = 1\n\n[listen]\n",
    );
    let workspace = Workspace::new(&config);
    let gateway = workspace.serve_http(&[]);
    let alice = TaskClient::new(gateway.address, Some(ALICE));
    let first = alice.request(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 600, "label": "first"}}),
    );
    let id = first["result"]["taskId"].as_str().expect("a task id");
    // Alice has her one task: her next long call is answered when done, as a call.
    let second = alice.request(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "second"}}),
    );
    assert_eq!(second["result"]["resultType"], "complete", "{second}");
    let text = second["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("second"), "{second}");
    assert!(
        gateway.log_text().contains("TASK_LIMIT"),
        "{}",
        gateway.log_text()
    );
    // Once her task has settled, a long call becomes a task again.
    alice.request("tasks/cancel", json!({"taskId": id}));
    assert_eq!(alice.poll(id, "cancelled")["status"], "cancelled");
    let third = alice.request(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 600, "label": "third"}}),
    );
    assert_eq!(third["result"]["resultType"], "task", "{third}");
}

/// Whether `answer` is the refusal of a task id with the error code `code` (`data.code`).
fn task_refused(answer: &serde_json::Value, code: &str) -> bool {
    answer["error"]["code"] == -32602 && answer["error"]["data"]["code"] == code
}

/// The bound on what one identity keeps: 1,000 tasks of Alice's, each called with 256 KiB
/// of arguments, settle; she keeps at most `[tasks] max_kept_per_identity` (256) of them,
/// her dropped ones tell her so, Bob's task is untouched, and the gateway stays under the
/// resident memory docs/protocol-2026-07-28.md#tasks states.
#[test]
fn a_thousand_settled_tasks_stay_within_what_one_identity_keeps() {
    const TASKS: usize = 1000;
    const KEPT: usize = 256;
    const RUNNING: usize = 16;
    const CEILING_MIB: u64 = 128;
    let upstream = ListeningServer::conformance();
    let config = gateway_config(&upstream, "2025-11-25") + "\n[tasks]\nanswer_within_ms = 1\n";
    let workspace = Workspace::new(&config);
    let gateway = workspace.serve_http(&[]);
    let alice = TaskClient::new(gateway.address, Some(ALICE));
    let bob = TaskClient::new(gateway.address, Some(BOB));
    let payload = "x".repeat(256 * 1024);
    let call = |client: &TaskClient, label: &str| {
        let created = client.request(
            "tools/call",
            json!({"name": "slow_compute",
                   "arguments": {"seconds": 0.3, "label": label, "payload": payload}}),
        );
        assert_eq!(created["result"]["resultType"], "task", "{created}");
        created["result"]["taskId"]
            .as_str()
            .expect("a task id")
            .to_owned()
    };

    let bobs = call(&bob, "bob's");
    assert_eq!(bob.poll(&bobs, "completed")["status"], "completed");
    let before = rss_mib(gateway.pid());
    let peak = RssPeak::watch(gateway.pid());
    let mut ids: Vec<String> = Vec::new();
    for n in 0..TASKS {
        // A few at a time, well within the tasks one identity may run at once.
        if n >= RUNNING {
            alice.poll(&ids[n - RUNNING], "completed");
        }
        ids.push(call(&alice, &n.to_string()));
    }
    let last = alice.poll(&ids[TASKS - 1], "completed");
    assert_eq!(last["status"], "completed", "{last}");
    let peak = peak.stop();
    let after = rss_mib(gateway.pid());
    eprintln!("resident {before} MiB before, {after} MiB after, peak {peak} MiB");

    // Each of Alice's tasks is either kept (and completed) or dropped, and says so.
    let mut kept = 0;
    for (n, id) in ids.iter().enumerate() {
        let got = alice.request("tasks/get", json!({"taskId": id}));
        if got["result"]["status"] == "completed" {
            let text = got["result"]["result"]["content"][0]["text"].as_str();
            assert!(
                text.is_some_and(|text| text.contains(&format!("`{n}`"))),
                "{got}"
            );
            kept += 1;
        } else {
            assert!(task_refused(&got, "TASK_DROPPED"), "task {n}: {got}");
            assert!(
                got["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("TASK_DROPPED")),
                "{got}"
            );
        }
    }
    assert!((1..=KEPT).contains(&kept), "{kept} of Alice's tasks kept");
    let first = alice.request("tasks/get", json!({"taskId": ids[0]}));
    assert!(task_refused(&first, "TASK_DROPPED"), "{first}");
    // To Bob, Alice's dropped task is as unknown as any other of hers; his own is there.
    let foreign = bob.request("tasks/get", json!({"taskId": ids[0]}));
    assert!(task_refused(&foreign, "UNKNOWN_TASK"), "{foreign}");
    let his = bob.request("tasks/get", json!({"taskId": bobs}));
    assert_eq!(his["result"]["status"], "completed", "{his}");

    assert!(
        peak < CEILING_MIB,
        "resident memory reached {peak} MiB (from {before} MiB)"
    );
}

/// An upstream's task is kept no longer than `[tasks] ttl_ms` (its handle says so, though
/// the upstream asked for five minutes), and counts against what its identity keeps: while
/// running ones fill it, the next is refused with `TASKS_KEPT_LIMIT`; once one has been
/// seen settled, it is dropped to make room.
#[test]
fn an_upstreams_tasks_are_capped_and_bounded_like_the_gateways() {
    let upstream = ListeningServer::conformance();
    let config = gateway_config(&upstream, "2026-07-28")
        + "\n[tasks]\nttl_ms = 60000\nmax_kept_per_identity = 2\n";
    let workspace = Workspace::new(&config);
    let gateway = workspace.serve_http(&[]);
    let alice = TaskClient::new(gateway.address, Some(ALICE));
    let bob = TaskClient::new(gateway.address, Some(BOB));
    let long = |client: &TaskClient, label: &str| {
        client.request(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 600, "label": label}}),
        )
    };
    let first = long(&alice, "first");
    assert_eq!(first["result"]["ttlMs"], 60000, "capped: {first}");
    let first = first["result"]["taskId"].as_str().expect("a task id");
    let got = alice.request("tasks/get", json!({"taskId": first}));
    assert_eq!(got["result"]["ttlMs"], 60000, "{got}");
    let second = long(&alice, "second");
    let second = second["result"]["taskId"].as_str().expect("a task id");

    // Two running: a third is refused, and Bob is not concerned.
    let third = long(&alice, "third");
    assert_eq!(third["error"]["code"], -32029, "{third}");
    assert_eq!(
        third["error"]["data"]["code"], "TASKS_KEPT_LIMIT",
        "{third}"
    );
    assert_eq!(long(&bob, "bob's")["result"]["resultType"], "task");

    // The first, seen cancelled, makes room, and is dropped for the next.
    alice.request("tasks/cancel", json!({"taskId": first}));
    assert_eq!(alice.poll(first, "cancelled")["status"], "cancelled");
    let next = long(&alice, "next");
    assert_eq!(next["result"]["resultType"], "task", "{next}");
    let dropped = alice.request("tasks/get", json!({"taskId": first}));
    assert!(task_refused(&dropped, "TASK_DROPPED"), "{dropped}");
    let running = alice.request("tasks/get", json!({"taskId": second}));
    assert_eq!(running["result"]["status"], "working", "{running}");
}
