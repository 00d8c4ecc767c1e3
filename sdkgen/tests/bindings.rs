//! The bindings run in node: the generated JavaScript is valid, and with a fake `hostCall`
//! a tool with an output schema resolves to structuredContent, one without to its joined
//! text, an error result rejects with a ToolCallError carrying the gateway's code, and a
//! hostile program cannot reach past the real tools. The bindings are evaluated in a fresh
//! `vm` context (only the language's intrinsics, as in the run_code isolate), whose globals
//! are then vandalised to show the bindings captured what they need.

mod common;

use std::process::Command;

use common::{Scratch, node, real_tools, run, text};
use sdkgen::{Options, generate};

/// Checks run against the real tools' bindings; `BINDINGS` is replaced by the expression.
const SCRIPT: &str = r#"
"use strict";
const vm = require("node:vm");
const assert = require("node:assert/strict");

const calls = [];
const results = {
  "mcp__everything__get-structured-content": {
    content: [{ type: "text", text: "{\"temperature\":22}" }],
    structuredContent: { temperature: 22, conditions: "Sunny", humidity: 40 },
  },
  "mcp__everything__echo": {
    content: [
      { type: "text", text: "Echo: hi" },
      { type: "image", data: "AAAA", mimeType: "image/png" },
      { type: "text", text: "second line" },
    ],
  },
  "mcp__filesystem__read_text_file": {
    content: [{ type: "text", text: "Error: access denied by policy" }],
    isError: true,
    _meta: { "mcp-gateway/error": { code: "DENIED", name: "DeniedError", message: "denied by rule no-secrets" } },
  },
  "mcp__memory__read_graph": {
    content: [{ type: "text", text: "upstream exploded" }, { type: "text", text: "twice" }],
    isError: true,
  },
  "mcp__filesystem__list_directory": {
    content: [{ type: "text", text: "[FILE] a" }],
    structuredContent: { content: "[FILE] a" },
  },
  "mcp__filesystem__create_directory": { content: [{ type: "text", text: "created" }] },
};
const hostCall = (name, args) => {
  calls.push([name, args]);
  if (name === "mcp__everything__get-sum") return Promise.reject(Object.assign(new Error("run aborted"), { code: "ABORTED" }));
  return Promise.resolve(results[name]);
};

const context = vm.createContext({});
const factory = vm.runInContext(BINDINGS, context);
assert.equal(typeof factory, "function");
const { tools, callTool, ToolCallError } = factory(hostCall);
// The same tools with two pending servers, one of which ("memory") is known after all.
const later = factory(hostCall, [["late", "mcp__late__"], ["memory", "mcp__memory__"]]);
const RealmError = vm.runInContext("Error", context);
// The runtime removes what the program must not see; the program may replace the rest.
vm.runInContext("Object = null; Array = null; String = null; Error = null; Promise = null;", context);

const rejection = async (promise) => {
  try { await promise; } catch (e) { return e; }
  assert.fail("expected a rejection");
};

(async () => {
  // structuredContent for a tool with an output schema, joined text for one without.
  const weather = await tools.everything["get-structured-content"]({ location: "Chicago" });
  assert.deepEqual({ ...weather }, { temperature: 22, conditions: "Sunny", humidity: 40 });
  assert.equal(await tools.everything.echo({ message: "hi" }), "Echo: hi\nsecond line");
  assert.deepEqual(calls[1], ["mcp__everything__echo", { message: "hi" }]);
  assert.equal((await tools.filesystem.list_directory({ path: "/" })).content, "[FILE] a");
  // A tool that declares an output schema but sends no structuredContent fails loudly.
  const missing = await rejection(tools.filesystem.create_directory({ path: "/d" }));
  assert.equal(missing.code, "OUTPUT_INVALID");
  // No arguments are sent as {}.
  await rejection(tools.memory.read_graph());
  // (compared as JSON: the {} comes from the bindings' realm)
  assert.equal(JSON.stringify(calls[calls.length - 1]), '["mcp__memory__read_graph",{}]');

  // isError: ToolCallError with the gateway's code and message, or TOOL_ERROR and the text.
  const denied = await rejection(tools.filesystem.read_text_file({ path: "/etc/shadow" }));
  assert.ok(denied instanceof ToolCallError, "a ToolCallError");
  assert.equal(denied.name, "ToolCallError");
  assert.equal(denied.code, "DENIED");
  assert.equal(denied.tool, "mcp__filesystem__read_text_file");
  assert.equal(denied.message, "denied by rule no-secrets");
  const failed = await rejection(tools.memory.read_graph({}));
  assert.ok(failed instanceof ToolCallError);
  assert.equal(failed.code, "TOOL_ERROR");
  assert.equal(failed.message, "upstream exploded\ntwice");
  // A rejected host call becomes a ToolCallError too.
  const aborted = await rejection(tools.everything["get-sum"]({ a: 1, b: 2 }));
  assert.ok(aborted instanceof ToolCallError);
  assert.equal(aborted.code, "ABORTED");
  assert.equal(aborted.message, "run aborted");

  // callTool: the whole result; errors still reject; only real tools reach the host.
  const whole = await callTool("mcp__everything__echo", { message: "x" });
  assert.equal(whole.content.length, 3);
  assert.equal(whole.content[1].type, "image");
  const viaName = await rejection(callTool("mcp__filesystem__read_text_file", { path: "/x" }));
  assert.equal(viaName.code, "DENIED");
  const before = calls.length;
  for (const name of ["mcp__nope__x", "__proto__", "constructor", "toString", 42, undefined]) {
    const notFound = await rejection(callTool(name, {}));
    assert.ok(notFound instanceof ToolCallError);
    assert.equal(notFound.code, "TOOL_NOT_FOUND");
  }
  assert.equal(calls.length, before, "an unknown name reached the host");

  // Nothing but the real tools, frozen, without prototypes.
  assert.equal(Object.getPrototypeOf(tools), null);
  assert.equal(Object.getPrototypeOf(tools.memory), null);
  assert.deepEqual(Object.keys(tools), ["everything", "filesystem", "memory"]);
  assert.equal(Object.keys(tools.memory).length, 9);
  assert.equal(tools.memory.constructor, undefined);
  assert.equal(tools.__proto__, undefined);
  assert.equal(tools.nope, undefined);
  assert.ok(Object.isFrozen(tools) && Object.isFrozen(tools.everything));
  assert.ok(Object.isFrozen(tools.everything.echo) && Object.isFrozen(callTool));
  assert.ok(Object.isFrozen(ToolCallError) && Object.isFrozen(ToolCallError.prototype));
  assert.throws(() => { "use strict"; tools.memory.read_graph = async () => "forged"; });
  assert.throws(() => { "use strict"; tools.evil = {}; });
  const made = new ToolCallError("t", "C", "m");
  assert.ok(made instanceof RealmError);
  assert.equal(made.tool, "t");
  assert.throws(() => { "use strict"; made.code = "OTHER"; });

  // A pending server: any tool name reaches the host under the server's prefix, and the
  // host's answer (here its unavailability) rejects as a ToolCallError.
  results["mcp__late__set"] = {
    content: [{ type: "text", text: "down" }],
    isError: true,
    _meta: { "mcp-gateway/error": { code: "UPSTREAM_UNAVAILABLE", message: "upstream `late` is unavailable: starting" } },
  };
  const down = await rejection(later.tools.late.set({ key: "a" }));
  assert.ok(down instanceof later.ToolCallError);
  assert.equal(down.code, "UPSTREAM_UNAVAILABLE");
  assert.equal(JSON.stringify(calls[calls.length - 1]), '["mcp__late__set",{"key":"a"}]');
  results["mcp__late__get"] = { content: [{ type: "text", text: "1" }] };
  assert.equal(await later.tools.late.get({}), "1");
  assert.equal(later.tools.late.then, undefined);
  assert.equal(Object.keys(later.tools.memory).length, 9, "a known server keeps its tools");
  assert.throws(() => { "use strict"; later.tools.late.set = null; });
  console.log("bindings ok");
})().catch((e) => { console.error(e); process.exit(1); });
"#;

#[test]
fn bindings_run_in_node_with_a_fake_host() {
    let sdk = generate(&real_tools(), &Options::default());
    let dir = Scratch::new("node-bindings");
    let script = SCRIPT.replace("BINDINGS", &format!("{:?}", sdk.bindings));
    let file = dir.write("check.js", &script);
    let output = run(Command::new(node()).arg(&file));
    let report = text(&output);
    assert!(output.status.success(), "bindings check failed:\n{report}");
    assert!(report.contains("bindings ok"), "{report}");
}

#[test]
fn bindings_for_odd_names_and_no_tools_evaluate() {
    let odd = common::load(&common::manifest_dir().join("tests/golden/odd-names.json"));
    let dir = Scratch::new("node-odd");
    for (label, tools) in [("odd", odd), ("empty", Vec::new())] {
        let sdk = generate(&tools, &Options::default());
        let script = format!(
            "const vm = require('node:vm');\n\
             const api = vm.runInContext({:?}, vm.createContext({{}}))(async () => ({{ content: [] }}));\n\
             const servers = Object.keys(api.tools).sort();\n\
             const count = servers.reduce((n, s) => n + Object.keys(api.tools[s]).length, 0);\n\
             console.log(JSON.stringify([servers, count, typeof api.tools.class?.['__proto__']]));",
            sdk.bindings
        );
        let file = dir.write(&format!("{label}.js"), &script);
        let output = run(Command::new(node()).arg(&file));
        let report = text(&output);
        assert!(output.status.success(), "{label}: {report}");
        let expected = match label {
            "odd" => r#"[["class","my server"],8,"function"]"#,
            _ => r#"[[],0,"undefined"]"#,
        };
        assert_eq!(report.trim(), expected, "{label}");
    }
}
