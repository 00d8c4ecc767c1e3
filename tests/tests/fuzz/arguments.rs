//! Deep, wide and huge tool arguments, over stdio and through `mcp-gateway call`: the
//! gateway refuses them with INVALID_ARGS (or serves them when they are valid), and an
//! answer too big for one line is still an answer.

use std::process::Command;

use mcp_gateway_tests::{Workspace, error_code, example_server, gateway_bin, result_text};
use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::input::{garbage, nested};
use crate::stdio::{StdioGateway, kv_workspace, log_tail, real_round_trip};
use crate::{fail, run_property};

/// Arguments to `mcp__kv__get`: deep (up to serde_json's 128-level parse limit and past
/// it), wide and huge; the kv tool wants `{key: string}`.
fn deep_or_huge_arguments() -> BoxedStrategy<Value> {
    prop_oneof![
        (1usize..140, any::<bool>()).prop_map(|(depth, objects)| nested(
            depth,
            objects,
            json!("k")
        )),
        (1usize..140, any::<bool>())
            .prop_map(|(depth, objects)| json!({ "key": nested(depth, objects, json!("k")) })),
        (0usize..3_000_000).prop_map(|n| json!({ "key": "k".repeat(n) })),
        (0usize..200_000).prop_map(|n| json!({ "key": vec!["k"; n] })),
        (0usize..50_000).prop_map(|n| {
            let wide: Map<String, Value> = (0..n).map(|i| (format!("k{i}"), json!(i))).collect();
            Value::Object(wide)
        }),
        garbage(),
    ]
    .boxed()
}

/// Whether `value` nests deeper than `limit` (arrays and objects).
fn deeper_than(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 0)];
    while let Some((value, depth)) = stack.pop() {
        if depth > limit {
            return true;
        }
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    false
}

/// What a call with `arguments` must give: a result, INVALID_ARGS when they break the
/// schema or nest deeper than 64, or a JSON-RPC error when they are not an object.
fn check_kv_get_answer(arguments: &Value, answer: &Value) -> Result<(), TestCaseError> {
    if !arguments.is_object() {
        prop_assert!(
            answer.get("error").is_some() || error_code(&answer["result"]) == Some("INVALID_ARGS"),
            "non-object arguments: {}",
            answer
        );
        return Ok(());
    }
    let result = answer
        .get("result")
        .ok_or_else(|| fail(format!("no result: {answer}")))?;
    // The schema is `{key: string}`, required, other properties allowed.
    let valid = arguments["key"].is_string();
    if valid {
        prop_assert!(result["isError"] != true, "a valid call failed: {}", result);
        prop_assert_eq!(&result["structuredContent"]["key"], &arguments["key"]);
    } else {
        prop_assert_eq!(error_code(result), Some("INVALID_ARGS"), "{}", result);
        if deeper_than(arguments, 64) {
            prop_assert!(result_text(result).contains("nested deeper"), "{}", result);
        }
    }
    Ok(())
}

#[test]
fn deep_and_huge_arguments_over_stdio_are_refused_or_served() {
    run_property(16, vec(deep_or_huge_arguments(), 1..6), |calls| {
        let workspace = kv_workspace("");
        let mut gateway = StdioGateway::start(&workspace);
        for arguments in &calls {
            let call = json!({"name": "mcp__kv__get", "arguments": arguments});
            // The frame adds two levels; past serde_json's 128 the line is unreadable and,
            // like any line that is not JSON, goes unanswered: only liveness is checked.
            if deeper_than(arguments, 120) {
                let frame =
                    json!({"jsonrpc": "2.0", "id": "deep", "method": "tools/call", "params": call});
                gateway.send(frame.to_string().as_bytes());
                continue;
            }
            let answer = gateway
                .request("tools/call", call)
                .map_err(|e| fail(format!("{e}\ngateway log: {}", log_tail(&workspace))))?;
            check_kv_get_answer(arguments, &answer)?;
        }
        real_round_trip(&mut gateway, 0).map_err(fail)?;
        gateway.close().map_err(fail)
    });
}

#[test]
fn deep_arguments_through_the_call_command_are_refused_or_served() {
    let arguments = prop_oneof![
        (1usize..140, any::<bool>())
            .prop_map(|(depth, objects)| json!({ "key": nested(depth, objects, json!("k")) })),
        // Command lines are capped at 128 KiB per argument.
        (0usize..100_000).prop_map(|n| json!({ "key": "k".repeat(n) })),
        garbage(),
    ];
    let workspace = kv_workspace("");
    run_property(16, arguments, |arguments| {
        let output = Command::new(gateway_bin())
            // `--args=…`, so that `-1` is a value, not an option.
            .args([
                "call",
                "mcp__kv__get",
                &format!("--args={arguments}"),
                "--config",
            ])
            .arg(workspace.config())
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        prop_assert!(!stderr.contains("panicked"), "{}", stderr);
        let code = output.status.code();
        prop_assert!(
            code.is_some(),
            "killed by a signal: {:?} {}",
            output.status,
            stderr
        );
        if deeper_than(&arguments, 124) && !deeper_than(&arguments, 130) {
            return Ok(()); // at serde_json's limit, give or take a level: either may happen
        }
        if !arguments.is_object() || deeper_than(&arguments, 130) {
            // Refused before the call: not JSON for serde_json, or not an object.
            prop_assert_eq!(code, Some(1), "{}", stderr);
            prop_assert!(stderr.contains("--args"), "{}", stderr);
            return Ok(());
        }
        let result: Value = serde_json::from_slice(&output.stdout)
            .map_err(|e| fail(format!("stdout is not JSON ({e}); stderr: {stderr}")))?;
        prop_assert_eq!(code, Some(if result["isError"] == true { 2 } else { 0 }));
        check_kv_get_answer(&arguments, &json!({ "result": result }))
    });
}

/// Found by the huge-argument cases: an upstream answer longer than rmcp's default 16 MiB
/// line limit was dropped by the gateway's reader with only a log line, so the call was
/// never answered (forever without a `timeout_ms`, else a misleading TOOL_TIMEOUT). kv
/// echoes the key twice, so a 9 MB key makes an 18 MB answer, which must come back (cut
/// to `max_result_bytes`) or as an error.
#[test]
fn regression_an_oversized_upstream_answer_is_not_silently_dropped() {
    let workspace = Workspace::new(&format!(
        "{}timeout_ms = 20000\n",
        example_server("kv", "kv")
    ));
    let mut gateway = StdioGateway::start(&workspace);
    let key = "k".repeat(9_000_000);
    let answer = gateway
        .request(
            "tools/call",
            json!({"name": "mcp__kv__get", "arguments": {"key": key}}),
        )
        .unwrap();
    let code = error_code(&answer["result"]);
    assert_ne!(
        code,
        Some("TOOL_TIMEOUT"),
        "the answer was dropped: {}",
        log_tail(&workspace)
    );
    real_round_trip(&mut gateway, 0).unwrap();
    gateway.close().unwrap();
}
