//! Issue 8, part 2: load. Many calls at concurrency 64 over streamable HTTP (rmcp clients,
//! several sessions), 1% of them to `mcp__slow__crash`, which kills its server mid-call
//! while `slow` keeps being restarted. Every call must get exactly one response — counted
//! on the wire, per request id — and none may hang; afterwards the gateway's open file
//! descriptors, threads, child processes and RSS come back near where they started.
//!
//! The reduced form (2,000 calls) runs by default; `MCP_GATEWAY_LOAD_FULL=1` runs the full
//! 20,000. Either prints its figures (duration, calls/s, outcomes, resources before and
//! after) to stderr: `cargo test --test load -- --nocapture`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_gateway_tests::*;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonRpcMessage, RequestId};
use rmcp::service::{RoleClient, RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use serde_json::{Value, json};

/// Calls in flight at any moment.
const CONCURRENCY: usize = 64;

/// Client sessions the calls are spread over: more than the descriptor slack allowed
/// afterwards, so that anything a finished session keeps open shows.
const SESSIONS: usize = 16;

/// One call in this many goes to `mcp__slow__crash`.
const CRASH_EVERY: usize = 100;

/// A call that has not come back by then is a hang.
const CALL_DEADLINE: Duration = Duration::from_secs(60);

fn total_calls() -> usize {
    if std::env::var("MCP_GATEWAY_LOAD_FULL").is_ok_and(|v| v == "1") {
        20_000
    } else {
        2_000
    }
}

/// Request ids sent and responses received on one session's wire.
#[derive(Default)]
struct Wire {
    sent: HashMap<RequestId, usize>,
    answered: HashMap<RequestId, usize>,
}

/// A transport that counts, per request id, what went out and what came back.
struct Counted<T> {
    inner: T,
    wire: Arc<Mutex<Wire>>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Counted<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(request) = &item {
            *self
                .wire
                .lock()
                .unwrap()
                .sent
                .entry(request.id.clone())
                .or_default() += 1;
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await;
        let id = match &message {
            Some(JsonRpcMessage::Response(response)) => Some(response.id.clone()),
            Some(JsonRpcMessage::Error(error)) => error.id.clone(),
            _ => None,
        };
        if let Some(id) = id {
            *self.wire.lock().unwrap().answered.entry(id).or_default() += 1;
        }
        message
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

type Client = RunningService<RoleClient, ()>;

async fn connect(url: &str) -> (Client, Arc<Mutex<Wire>>) {
    let wire = Arc::new(Mutex::new(Wire::default()));
    let transport = Counted {
        inner: StreamableHttpClientTransport::from_uri(url.to_owned()),
        wire: wire.clone(),
    };
    (().serve(transport).await.unwrap(), wire)
}

/// What the `index`-th call is: 1% crash `slow`, a fifth wait on it briefly, the rest use kv.
fn nth_call(index: usize) -> (&'static str, Value) {
    if index % CRASH_EVERY == CRASH_EVERY / 2 {
        ("mcp__slow__crash", json!({}))
    } else if index.is_multiple_of(5) {
        (
            "mcp__slow__wait",
            json!({"ms": 2, "label": index.to_string()}),
        )
    } else if index.is_multiple_of(2) {
        (
            "mcp__kv__set",
            json!({"key": format!("k{}", index % 50), "value": index.to_string()}),
        )
    } else {
        ("mcp__kv__get", json!({"key": format!("k{}", index % 50)}))
    }
}

/// How one call ended.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Ending {
    /// A result; the gateway error code if it is a gateway failure.
    Result(Option<String>),
    /// rmcp reported an error instead of a result (a JSON-RPC error or a transport fault).
    ClientError(String),
    /// No answer within [`CALL_DEADLINE`].
    Hung,
}

/// The gateway's resources at one moment.
#[derive(Debug, Clone, Copy)]
struct Resources {
    fds: usize,
    tasks: u64,
    threads: u64,
    children: usize,
    rss_mib: u64,
}

impl Resources {
    fn of(gateway: &Gateway) -> Resources {
        let pid = gateway.pid();
        Resources {
            fds: open_fds(pid),
            tasks: metric(gateway, "mcp_gateway_runtime_alive_tasks"),
            threads: thread_count(pid),
            children: descendants(pid).len(),
            rss_mib: rss_mib(pid),
        }
    }

    /// Near `start`: a few descriptors, tasks and threads of slack (an idle keep-alive
    /// connection and its task, a blocking-pool thread not yet retired), the same number of
    /// children, and RSS
    /// within 64 MiB or half again of the start, whichever is more (the allocator keeps
    /// some of what a burst used).
    fn near(&self, start: &Resources) -> bool {
        self.fds <= start.fds + 4
            && self.tasks <= start.tasks + 4
            && self.threads <= start.threads + 8
            && self.children == start.children
            && self.rss_mib <= start.rss_mib + (start.rss_mib / 2).max(64)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_call_gets_one_answer_under_load_with_crashes() {
    let calls = total_calls();
    let workspace = Workspace::new(&format!(
        "{}{}",
        example_server("kv", "kv"),
        example_server("slow", "slow")
    ));
    let gateway = workspace.serve_http(&[]);
    let pid = gateway.pid();
    let url = gateway.url("/mcp");
    assert!(
        eventually(Duration::from_secs(30), || {
            let health = health(&gateway);
            health["upstreams"]["kv"]["state"] == "ready"
                && health["upstreams"]["slow"]["state"] == "ready"
        }),
        "{}",
        gateway.log_text()
    );

    // Warm up once (first session, first calls), then take the starting level.
    let (warm, _) = connect(&url).await;
    for index in 1..=4 {
        let (tool, arguments) = nth_call(index);
        let mut params = CallToolRequestParams::new(tool);
        params.arguments = arguments.as_object().cloned();
        warm.peer().call_tool(params).await.unwrap();
    }
    warm.cancel().await.unwrap();
    // run_code's template and runner start in the background: the starting level is
    // taken once the runner waits for its run.
    assert!(
        eventually(Duration::from_secs(60), || health(&gateway)["code_runner"]
            == "ready"),
        "run_code's runner never got ready: {}",
        gateway.log_text()
    );
    let start = Resources::of(&gateway);

    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        sessions.push(connect(&url).await);
    }
    let peers: Vec<_> = sessions
        .iter()
        .map(|(client, _)| client.peer().clone())
        .collect();
    let next = Arc::new(AtomicUsize::new(0));
    let endings = Arc::new(Mutex::new(Vec::with_capacity(calls)));
    let began = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..CONCURRENCY {
        let peer = peers[worker % SESSIONS].clone();
        let next = next.clone();
        let endings = endings.clone();
        workers.spawn(async move {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= calls {
                    break;
                }
                let (tool, arguments) = nth_call(index);
                let mut params = CallToolRequestParams::new(tool);
                params.arguments = arguments.as_object().cloned();
                let ending = match tokio::time::timeout(CALL_DEADLINE, peer.call_tool(params)).await
                {
                    Ok(Ok(result)) => {
                        let result = serde_json::to_value(&result).unwrap();
                        Ending::Result(error_code(&result).map(str::to_owned))
                    }
                    Ok(Err(error)) => Ending::ClientError(error.to_string()),
                    Err(_) => Ending::Hung,
                };
                endings.lock().unwrap().push((tool, ending));
            }
        });
    }
    while let Some(joined) = workers.join_next().await {
        joined.unwrap();
    }
    let elapsed = began.elapsed();
    let during = Resources::of(&gateway);

    let endings = std::mem::take(&mut *endings.lock().unwrap());
    let mut tally: BTreeMap<(&str, Ending), usize> = BTreeMap::new();
    for (tool, ending) in &endings {
        *tally.entry((tool, ending.clone())).or_default() += 1;
    }
    eprintln!(
        "{calls} calls at concurrency {CONCURRENCY} over {SESSIONS} sessions in {elapsed:.1?} \
         ({:.0} calls/s)",
        calls as f64 / elapsed.as_secs_f64()
    );
    for ((tool, ending), count) in &tally {
        eprintln!("  {tool:<18} {ending:?}: {count}");
    }

    assert_eq!(endings.len(), calls, "every call ended");
    for (tool, ending) in &endings {
        match (*tool, ending) {
            (_, Ending::Hung) => panic!("a call to {tool} hung: {tally:?}"),
            (_, Ending::ClientError(e)) => panic!("a call to {tool} got no result: {e}: {tally:?}"),
            ("mcp__slow__crash", Ending::Result(code)) => {
                assert_eq!(code.as_deref(), Some("UPSTREAM_UNAVAILABLE"), "{tally:?}")
            }
            ("mcp__slow__wait", Ending::Result(code)) => assert!(
                code.is_none() || code.as_deref() == Some("UPSTREAM_UNAVAILABLE"),
                "{tally:?}"
            ),
            (_, Ending::Result(code)) => assert_eq!(*code, None, "kv never fails: {tally:?}"),
        }
    }
    for (index, (_, wire)) in sessions.iter().enumerate() {
        let wire = wire.lock().unwrap();
        let unanswered = wire
            .sent
            .keys()
            .filter(|id| !wire.answered.contains_key(*id))
            .count();
        let twice = wire.sent.values().filter(|&&n| n != 1).count()
            + wire.answered.values().filter(|&&n| n != 1).count();
        let stray = wire
            .answered
            .keys()
            .filter(|id| !wire.sent.contains_key(*id))
            .count();
        assert_eq!(
            (unanswered, twice, stray),
            (0, 0, 0),
            "session {index}: requests without an answer, ids used or answered twice, answers \
             to nothing"
        );
    }
    let crashes = calls / CRASH_EVERY;
    assert!(
        eventually(Duration::from_secs(30), || {
            let slow = &health(&gateway)["upstreams"]["slow"];
            slow["state"] == "ready" && slow["restarts"].as_u64() >= Some(1)
        }),
        "slow came back after {crashes} crashes: {}",
        health(&gateway)
    );

    for (client, _) in sessions {
        client.cancel().await.unwrap();
    }
    let settled = eventually(Duration::from_secs(30), || {
        Resources::of(&gateway).near(&start)
    });
    let end = Resources::of(&gateway);
    eprintln!("resources at start {start:?}, after the calls {during:?}, settled {end:?}");
    assert!(
        settled,
        "the gateway's resources came back near {start:?}: {end:?}; open: {:#?}",
        fd_kinds(pid)
    );
}

/// What a process's descriptors point at (a file's name, or the kind of a pipe, socket or
/// anonymous inode), with counts.
fn fd_kinds(pid: i32) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Ok(target) = std::fs::read_link(entry.path()) {
            let kind = match target.file_name() {
                Some(name) if target.is_absolute() => name.to_string_lossy().into_owned(),
                _ => target
                    .to_string_lossy()
                    .split(':')
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            };
            *kinds.entry(kind).or_default() += 1;
        }
    }
    kinds
}
