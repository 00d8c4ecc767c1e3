//! The pipeline's own behaviour, run through real stages registered with
//! [`PipelineBuilder`] and a built-in tool of the test's: the order of the stages, what a
//! denial or a guard's refusal leaves out, cancellation before and during dispatch, and
//! how contexts are attached.

use std::sync::Mutex;

use rmcp::model::{JsonObject, Tool};
use tokio::sync::Notify;

use super::testing::{call, failure, failure_code, registry, session, settings, settled};
use super::*;
use crate::session::Session;

/// What ran, in order: each test stage's hooks and the tool write here.
#[derive(Clone, Default)]
struct Journal(Arc<Mutex<Vec<String>>>);

impl Journal {
    fn write(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// A plugin of every stage under one name: each hook writes `<hook>:<name>` in the
/// journal and decides as it was told.
struct Stage {
    name: &'static str,
    journal: Journal,
    gate: GateDecision,
    guard: Result<(), String>,
    post: PostDecision,
}

impl Stage {
    fn new(name: &'static str, journal: &Journal) -> Self {
        Self {
            name,
            journal: journal.clone(),
            gate: GateDecision::Pass,
            guard: Ok(()),
            post: PostDecision::Pass,
        }
    }

    fn deciding(mut self, gate: GateDecision) -> Arc<Self> {
        self.gate = gate;
        Arc::new(self)
    }

    fn refusing(mut self, reason: &str) -> Arc<Self> {
        self.guard = Err(reason.to_owned());
        Arc::new(self)
    }

    fn posting(mut self, post: PostDecision) -> Arc<Self> {
        self.post = post;
        Arc::new(self)
    }

    fn write(&self, hook: &str) {
        self.journal.write(format!("{hook}:{}", self.name));
    }
}

impl Gate for Stage {
    fn decide<'a>(&'a self, _: &'a Invocation) -> BoxFuture<'a, GateDecision> {
        self.write("gate");
        Box::pin(std::future::ready(self.gate.clone()))
    }
}

impl Guard for Stage {
    fn check<'a>(&'a self, _: &'a Invocation) -> BoxFuture<'a, Result<(), String>> {
        self.write("guard");
        Box::pin(std::future::ready(self.guard.clone()))
    }
}

impl Around for Stage {
    fn name(&self) -> &'static str {
        self.name
    }

    /// Hands a signal of its own (a child of the caller's) to the rest of the chain.
    fn around<'a>(
        &'a self,
        _: &'a Invocation,
        signal: CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            self.write("around-in");
            let outcome = next.run(signal.child_token()).await;
            self.write("around-out");
            outcome
        })
    }
}

impl PostExecute for Stage {
    fn post<'a>(
        &'a self,
        _: &'a Invocation,
        _: &'a ToolOutcome,
        _: Prepared,
    ) -> BoxFuture<'a, PostDecision> {
        self.write("post");
        Box::pin(std::future::ready(self.post.clone()))
    }
}

impl Finalize for Stage {
    fn finalize(&self, _content: &mut Vec<Block>) {
        self.write("finalize");
    }
}

impl ResultObserver for Stage {
    fn call_started(&self, _: &Invocation) {
        self.write("started");
    }

    fn step(&self, _: &Invocation, step: &Step<'_>) {
        let stage = match step {
            Step::Gate(_) => "gate",
            Step::Asked(_) => "ask",
            Step::Guards(_) => "guards",
            Step::Validated(_) => "validate",
            Step::Dispatched { .. } => "dispatch",
            Step::Post(_) => "post",
        };
        self.write(&format!("observed {stage}"));
    }

    fn result(&self, _: &Invocation, _: Option<&ToolError>, _: &ToolResult) {
        self.write("result");
    }
}

/// A built-in tool that writes `dispatch` in the journal and answers as told; given
/// `started`, it first says it started and waits for its signal to be cancelled.
struct Journaled {
    journal: Journal,
    answer: Result<ToolResult, ToolError>,
    started: Option<Arc<Notify>>,
}

impl BuiltinTool for Journaled {
    fn definition(&self, _: &Session) -> Tool {
        Tool::new(
            "journaled",
            "writes in the journal",
            Arc::new(JsonObject::new()),
        )
    }
}

impl Executor for Journaled {
    fn call<'a>(
        &'a self,
        _: &'a Invocation,
        signal: CancellationToken,
        _: &'a Context,
    ) -> BoxFuture<'a, Result<ToolResult, ToolError>> {
        Box::pin(async move {
            self.journal.write("dispatch".into());
            if let Some(started) = &self.started {
                started.notify_one();
                signal.cancelled().await;
                self.journal.write("dispatch saw the cancellation".into());
            }
            self.answer.clone()
        })
    }
}

fn done() -> ToolResult {
    ToolResult::success(vec![Block::text("done")])
}

/// The journaled tool answering "done".
fn tool(journal: &Journal) -> Target {
    Target::Builtin(Arc::new(Journaled {
        journal: journal.clone(),
        answer: Ok(done()),
        started: None,
    }))
}

fn texts(result: &ToolResult) -> Vec<&str> {
    result.texts().collect()
}

async fn build(builder: PipelineBuilder) -> Pipeline {
    builder.build(registry("").await, settings())
}

/// Every stage kind, registered in the reverse of pipeline order, runs in pipeline
/// order; stages of one kind run in the order they were registered (the first around
/// wrapper outermost).
#[tokio::test]
async fn the_stages_run_in_the_seed_order() {
    let journal = Journal::default();
    let a = Arc::new(Stage::new("a", &journal));
    let b = Arc::new(Stage::new("b", &journal));
    let pipeline = build(
        PipelineBuilder::default()
            .observer(a.clone())
            .observer(b.clone())
            .finalize(a.clone())
            .finalize(b.clone())
            .post(a.clone())
            .post(b.clone())
            .around(a.clone())
            .around(b.clone())
            .guard(a.clone())
            .guard(b.clone())
            .gate(a)
            .gate(b),
    )
    .await;

    let result = pipeline.run(&call(&session("s"), tool(&journal))).await;

    assert_eq!(texts(&result), ["done"]);
    assert_eq!(failure(&result), None);
    #[rustfmt::skip]
    let expected = [
        "started:a", "started:b",
        "gate:a", "gate:b", "observed gate:a", "observed gate:b",
        "guard:a", "guard:b", "observed guards:a", "observed guards:b",
        "around-in:a", "around-in:b",
        "dispatch", "observed dispatch:a", "observed dispatch:b",
        "around-out:b", "around-out:a",
        "post:a", "post:b",
        "finalize:a", "finalize:b",
        "result:a", "result:b",
    ];
    assert_eq!(journal.lines(), expected);
}

/// The first gate that decides wins, a later one cannot overturn a denial, and a
/// denied call goes no further than post-execute and finalize.
#[tokio::test]
async fn a_denied_call_is_never_dispatched() {
    let journal = Journal::default();
    let a = Arc::new(Stage::new("a", &journal));
    let deny = GateDecision::Deny {
        reason: "not today".into(),
    };
    let pipeline = build(
        PipelineBuilder::default()
            .gate(a.clone())
            .gate(Stage::new("b", &journal).deciding(deny))
            .gate(Stage::new("c", &journal).deciding(GateDecision::Allow))
            .guard(a.clone())
            .around(a.clone())
            .post(a.clone())
            .finalize(a.clone())
            .observer(a),
    )
    .await;

    let result = pipeline.run(&call(&session("s"), tool(&journal))).await;

    assert_eq!(
        failure(&result),
        Some(("DENIED".into(), "not today".into()))
    );
    #[rustfmt::skip]
    let expected = [
        "started:a", "gate:a", "gate:b", "observed gate:a",
        "post:a", "finalize:a", "result:a",
    ];
    assert_eq!(journal.lines(), expected);
}

/// A guard's refusal is final: later guards are not asked, nothing is dispatched, and
/// a post-execute stage that replaces content cannot turn it into a success.
#[tokio::test]
async fn a_guard_refusal_stands() {
    let journal = Journal::default();
    let a = Stage::new("a", &journal)
        .posting(PostDecision::ReplaceContent(vec![Block::text("all fine")]));
    let pipeline = build(
        PipelineBuilder::default()
            .gate(Stage::new("gate", &journal).deciding(GateDecision::Allow))
            .guard(a.clone())
            .guard(Stage::new("b", &journal).refusing("over budget"))
            .guard(Arc::new(Stage::new("c", &journal)))
            .around(a.clone())
            .post(a.clone())
            .finalize(a.clone())
            .observer(a),
    )
    .await;

    let result = pipeline.run(&call(&session("s"), tool(&journal))).await;

    assert_eq!(
        failure(&result),
        Some(("DENIED".into(), "over budget".into()))
    );
    #[rustfmt::skip]
    let expected = [
        "started:a", "gate:gate", "observed gate:a",
        "guard:a", "guard:b", "observed guards:a",
        "post:a", "observed post:a", "finalize:a", "result:a",
    ];
    assert_eq!(journal.lines(), expected);
}

/// A call cancelled before it reaches the pipeline runs no policy and no dispatch;
/// it is still finalized and reported, as ABORTED_BEFORE_DISPATCH.
#[tokio::test]
async fn a_call_cancelled_before_it_starts_runs_no_policy() {
    let journal = Journal::default();
    let a = Arc::new(Stage::new("a", &journal));
    let pipeline = build(
        PipelineBuilder::default()
            .gate(a.clone())
            .guard(a.clone())
            .around(a.clone())
            .post(a.clone())
            .finalize(a.clone())
            .observer(a),
    )
    .await;
    let invocation = call(&session("s"), tool(&journal));
    invocation.cancel.cancel();

    let result = pipeline.run(&invocation).await;

    assert_eq!(
        failure_code(&result).as_deref(),
        Some("ABORTED_BEFORE_DISPATCH")
    );
    assert_eq!(journal.lines(), ["started:a", "finalize:a", "result:a"]);
}

/// A gate that cancels the call it decides on: what a client does by cancelling
/// while it is being asked.
struct CancelsTheCall;

impl Gate for CancelsTheCall {
    fn decide<'a>(&'a self, invocation: &'a Invocation) -> BoxFuture<'a, GateDecision> {
        invocation.cancel.cancel();
        Box::pin(std::future::ready(GateDecision::Allow))
    }
}

/// Cancelled while the gate decides: the guards and dispatch do not run, and the
/// result is ABORTED_BEFORE_DISPATCH even though the gate allowed the call.
#[tokio::test]
async fn a_call_cancelled_at_the_gate_is_aborted_before_dispatch() {
    let journal = Journal::default();
    let a = Arc::new(Stage::new("a", &journal));
    let pipeline = build(
        PipelineBuilder::default()
            .gate(Arc::new(CancelsTheCall))
            .guard(a.clone())
            .around(a.clone())
            .post(a.clone())
            .finalize(a.clone())
            .observer(a),
    )
    .await;

    let result = pipeline.run(&call(&session("s"), tool(&journal))).await;

    assert_eq!(
        failure_code(&result).as_deref(),
        Some("ABORTED_BEFORE_DISPATCH")
    );
    #[rustfmt::skip]
    let expected = [
        "started:a", "observed gate:a", "post:a", "finalize:a", "result:a",
    ];
    assert_eq!(journal.lines(), expected);
}

/// The caller's cancellation reaches the tool through a wrapper's own signal; a
/// success that comes back after it becomes ABORTED, a failure keeps its own code.
#[tokio::test]
async fn a_call_cancelled_during_dispatch_is_aborted() {
    let failed = ToolError::new(ErrorCode::UpstreamError, "it broke");
    for (answer, code) in [(Ok(done()), "ABORTED"), (Err(failed), "UPSTREAM_ERROR")] {
        let journal = Journal::default();
        let started = Arc::new(Notify::new());
        let waits = Target::Builtin(Arc::new(Journaled {
            journal: journal.clone(),
            answer,
            started: Some(started.clone()),
        }));
        let pipeline =
            build(PipelineBuilder::default().around(Arc::new(Stage::new("a", &journal)))).await;
        let invocation = call(&session("s"), waits);

        let cancel_once_started = async {
            started.notified().await;
            invocation.cancel.cancel();
        };
        let both = futures::future::join(pipeline.run(&invocation), cancel_once_started);
        let (result, ()) = settled(both).await;

        assert_eq!(failure_code(&result).as_deref(), Some(code));
        #[rustfmt::skip]
        let expected = [
            "around-in:a", "dispatch", "dispatch saw the cancellation", "around-out:a",
        ];
        assert_eq!(journal.lines(), expected);
    }
}

/// Contexts a post-execute stage attaches come after the content, the gateway's own
/// failure text included, and `_meta` says where each is and who attached it.
#[tokio::test]
async fn attached_contexts_follow_the_content_with_their_provenance() {
    let source = ContextSource {
        kind: "plugin",
        plugin: "test",
    };
    let context = AdditionalContext {
        source: source.clone(),
        text: "remember this".into(),
    };
    let deny = GateDecision::Deny {
        reason: "no".into(),
    };
    for (gate, first) in [(GateDecision::Allow, "done"), (deny, "Error [DENIED]: no")] {
        let journal = Journal::default();
        let attach = PostDecision::Attach(vec![context.clone()]);
        let pipeline = build(
            PipelineBuilder::default()
                .gate(Stage::new("gate", &journal).deciding(gate))
                .post(Stage::new("a", &journal).posting(attach)),
        )
        .await;

        let result = pipeline.run(&call(&session("s"), tool(&journal))).await;

        assert_eq!(texts(&result), [first, "remember this"]);
        let provenance = &result.meta().unwrap()[CONTEXTS_META_KEY];
        assert_eq!(
            provenance,
            &json!([{"contentIndex": 1, "source": {"kind": "plugin", "plugin": "test"}}])
        );
    }
}

/// A name that resolves to nothing is TOOL_NOT_FOUND, decided before the gate.
#[tokio::test]
async fn an_unknown_tool_is_not_found() {
    let journal = Journal::default();
    let a = Arc::new(Stage::new("a", &journal));
    let pipeline = build(PipelineBuilder::default().gate(a.clone()).observer(a)).await;
    let mut invocation = call(&session("s"), tool(&journal));
    invocation.target = None;

    let result = pipeline.run(&invocation).await;

    assert_eq!(failure_code(&result).as_deref(), Some("TOOL_NOT_FOUND"));
    assert_eq!(journal.lines(), ["started:a", "result:a"]);
}
