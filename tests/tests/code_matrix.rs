//! Issue 13: code mode in every configuration. Each presentation mode (native, code,
//! both) × each downstream transport (stdio, streamable HTTP, legacy SSE) × each way the
//! tools a program sees can change between runs (one profile; two profiles with
//! different tools, alternating; the catalog changing under the program, through the
//! `dynamic` example's `list_changed`). Every cell runs a program (or, in native mode,
//! calls the tools directly, and checks that `run_code` is not offered) against real
//! tools of real example servers and checks their real results, through the real
//! gateway binary, whose runtime is multi-threaded and whose runs are real processes.

use mcp_gateway_tests::*;
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Native,
    Code,
    Both,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Code => "code",
            Mode::Both => "both",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Downstream {
    Stdio,
    StreamableHttp,
    Sse,
}

/// One gateway configuration (one mode) and the ways to reach it.
struct Target {
    mode: Mode,
    workspace: Workspace,
    /// Serves streamable HTTP and SSE; stdio cells start their own gateway per session.
    http: Gateway,
}

impl Target {
    /// kv and dynamic; profile `a` sees kv only, profile `b` dynamic only.
    fn new(mode: Mode) -> Target {
        let workspace = Workspace::new(&format!(
            "[gateway]\nmode = \"{}\"\n{}{}\
             [profiles.a]\nallow = [\"mcp__kv__*\"]\n\
             [profiles.b]\nallow = [\"mcp__dynamic__*\"]\n",
            mode.name(),
            example_server("kv", "kv"),
            example_server("dynamic", "dynamic"),
        ));
        let http = workspace.serve_http(&[]);
        Target {
            mode,
            workspace,
            http,
        }
    }

    /// One client session over `downstream`, in `profile` (the default one if `None`),
    /// running `script`.
    fn session(&self, downstream: Downstream, profile: Option<&str>, script: Value) -> Value {
        let suffix = profile.map_or(String::new(), |p| format!("/{p}"));
        let args = match downstream {
            Downstream::Stdio => {
                let extra: Vec<&str> = profile.map_or(Vec::new(), |p| vec!["--profile", p]);
                python_stdio_args(&self.workspace, &extra)
            }
            Downstream::StreamableHttp => self.http.client_args("http", &format!("/mcp{suffix}")),
            Downstream::Sse => self.http.client_args("sse", &format!("/sse{suffix}")),
        };
        python_client(&args, &script)
    }

    fn cell(&self, downstream: Downstream, what: &str) -> String {
        format!("{} × {downstream:?} × {what}", self.mode.name())
    }

    /// `kv.set` then `kv.get` of `value`, as a program or (native) as direct calls; the
    /// value read back.
    fn kv_round_trip(&self, downstream: Downstream, profile: Option<&str>, value: &str) -> Value {
        let key = format!("k-{downstream:?}");
        let script = match self.mode {
            Mode::Native => json!([
                {"action": "list_tools"},
                call("mcp__kv__set", json!({"key": key, "value": value})),
                call("mcp__kv__get", json!({"key": key})),
            ]),
            Mode::Code | Mode::Both => json!([
                {"action": "list_tools"},
                run(&format!(
                    "await tools.kv.set({{ key: {key:?}, value: {value:?} }});\n\
                     return (await tools.kv.get({{ key: {key:?} }})).value;"
                )),
            ]),
        };
        let session = self.session(downstream, profile, script);
        self.check_listing(&session);
        match self.mode {
            Mode::Native => action_result(&session, 2)["structuredContent"]["value"].clone(),
            Mode::Code | Mode::Both => program_result(&session, 1),
        }
    }

    /// dynamic's `hello` for `name`: its text.
    fn hello(&self, downstream: Downstream, profile: Option<&str>, name: &str) -> Value {
        let arguments = json!({"name": name});
        let script = match self.mode {
            Mode::Native => {
                json!([{"action": "list_tools"}, call("mcp__dynamic__hello", arguments)])
            }
            Mode::Code | Mode::Both => json!([
                {"action": "list_tools"},
                run(&format!(
                    "const r = await callTool(\"mcp__dynamic__hello\", {arguments});\n\
                     return r.content[0].text;"
                )),
            ]),
        };
        let session = self.session(downstream, profile, script);
        self.check_listing(&session);
        match self.mode {
            Mode::Native => json!(result_text(action_result(&session, 1))),
            Mode::Code | Mode::Both => program_result(&session, 1),
        }
    }

    /// Native mode lists tools and no `run_code`; code mode lists only `run_code`; both
    /// lists `run_code` among the tools.
    fn check_listing(&self, session: &Value) {
        let names = tool_names(action_result(session, 0));
        let has_run_code = names.iter().any(|n| n == "run_code");
        match self.mode {
            Mode::Native => assert!(!has_run_code, "native mode offers run_code: {names:?}"),
            Mode::Code => assert_eq!(names, ["run_code"], "code mode lists only run_code"),
            Mode::Both => assert!(has_run_code && names.len() > 1, "{names:?}"),
        }
    }

    /// In one session (a stdio gateway lives as long as its session): add tool `name` to
    /// dynamic, wait for the `list_changed` the gateway passes on (in code mode too: the
    /// SDK in run_code's description changed), then call the new tool; its structured
    /// result.
    fn add_and_call_tool(&self, downstream: Downstream, name: &str) -> Value {
        let arguments = json!({"n": 7});
        let added = format!("mcp__dynamic__{name}");
        let (add, call_added) = match self.mode {
            Mode::Native => (
                call("mcp__dynamic__add_tool", json!({"name": name})),
                call(&added, arguments),
            ),
            Mode::Code | Mode::Both => (
                run(&format!(
                    "return await callTool(\"mcp__dynamic__add_tool\", {{ name: {name:?} }});"
                )),
                // The new run's bindings must already include the tool.
                run(&format!(
                    "const r = await (tools.dynamic as any)[{name:?}]({arguments});\n\
                     return typeof r === \"string\" ? JSON.parse(r) : r;"
                )),
            ),
        };
        let session = self.session(
            downstream,
            None,
            json!([
                add,
                {"action": "wait_notification", "method": "notifications/tools/list_changed",
                 "timeout_ms": 20000},
                call_added,
            ]),
        );
        assert_ne!(
            action_result(&session, 0)["isError"],
            json!(true),
            "{session:#}"
        );
        match self.mode {
            Mode::Native => action_result(&session, 2)["structuredContent"].clone(),
            Mode::Code | Mode::Both => program_result(&session, 2),
        }
    }

    /// The three rows of this mode × `downstream`.
    fn check(&self, downstream: Downstream) {
        // One profile.
        let value = format!("one-{downstream:?}");
        assert_eq!(
            self.kv_round_trip(downstream, None, &value),
            json!(value),
            "{}",
            self.cell(downstream, "one profile")
        );

        // Two profiles with different tools, alternating.
        for round in 0..4u32 {
            let cell = self.cell(downstream, &format!("two profiles, round {round}"));
            if round.is_multiple_of(2) {
                let value = format!("a-{round}");
                assert_eq!(
                    self.kv_round_trip(downstream, Some("a"), &value),
                    json!(value),
                    "{cell}"
                );
            } else {
                let name = format!("b{round}");
                assert_eq!(
                    self.hello(downstream, Some("b"), &name),
                    json!(format!("Hello, {name}!")),
                    "{cell}"
                );
            }
        }

        // The catalog changes between runs.
        let cell = self.cell(downstream, "catalog changes");
        let name = format!("added_{downstream:?}").to_lowercase();
        assert_eq!(
            self.add_and_call_tool(downstream, &name),
            json!({"tool": name, "arguments": {"n": 7}}),
            "{cell}"
        );
        let value = format!("after-{downstream:?}");
        assert_eq!(
            self.kv_round_trip(downstream, None, &value),
            json!(value),
            "{cell}: the run after the change"
        );
    }
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"action": "call_tool", "name": name, "arguments": arguments})
}

fn run(code: &str) -> Value {
    call("run_code", json!({"code": code}))
}

/// The value a program returned, asserting the run succeeded.
fn program_result(session: &Value, index: usize) -> Value {
    let result = action_result(session, index);
    assert_ne!(
        result["isError"],
        json!(true),
        "the run failed: {session:#}"
    );
    result["structuredContent"]["result"].clone()
}

fn matrix(mode: Mode) {
    let target = Target::new(mode);
    for downstream in [
        Downstream::Stdio,
        Downstream::StreamableHttp,
        Downstream::Sse,
    ] {
        target.check(downstream);
    }
}

#[test]
fn native_mode_in_every_configuration() {
    matrix(Mode::Native);
}

#[test]
fn code_mode_in_every_configuration() {
    matrix(Mode::Code);
}

#[test]
fn both_mode_in_every_configuration() {
    matrix(Mode::Both);
}
