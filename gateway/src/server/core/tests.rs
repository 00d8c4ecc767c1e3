//! The session core on its own, with no transport: a test is a client holding the two
//! channels a transport would hold, the answers it delivers and the session's outbox.
//! The gateway behind it is real, with one upstream in the test process.

use std::sync::Arc;

use rmcp::model::ServerJsonRpcMessage;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::decode::decode_message;
use super::{STREAM_CAPACITY, Served, open, serving_stateless};
use crate::config::Config;
use crate::config::listen::ClientLimits;
use crate::gateway::Gateway;
use crate::pipeline::testing::{Heard, LIST_TTL_MS, Upstream, settled};
use crate::session::limits::{Owner, Quotas};
use crate::session::registry::SessionRefusal;
use crate::session::{Opening, Session, Transport};

/// A gateway federating `upstream` as `up`, once it is connected.
async fn gateway(upstream: &Upstream) -> Arc<Gateway> {
    let gateway = Gateway::start(config(upstream, true), CancellationToken::new()).await;
    settled(gateway.registry().first_attempts()).await;
    gateway
}

fn config(upstream: &Upstream, with_upstream: bool) -> Config {
    let servers = if with_upstream {
        format!(
            "[servers.up]\nurl = \"{}\"\nprotocol = \"2026-07-28\"\n",
            upstream.url
        )
    } else {
        String::new()
    };
    Config::from_toml(&format!("[gateway]\nmode = \"native\"\n{servers}"))
        .expect("a valid test configuration")
}

/// A client of one session, as a stdio transport would serve it.
struct Client {
    gateway: Arc<Gateway>,
    session: Arc<Session>,
    outbox: mpsc::Receiver<ServerJsonRpcMessage>,
    answers: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
    deliver: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    requests: TaskTracker,
}

impl Client {
    fn open(gateway: &Arc<Gateway>, identity: Option<&str>) -> Client {
        let (outbox, queued) = mpsc::channel(STREAM_CAPACITY);
        let (deliver, answers) = mpsc::unbounded_channel();
        let opening = Opening {
            profile: None,
            transport: Transport::Stdio,
            id: None,
            outbox,
            owner: Owner {
                identity: identity.map(str::to_owned),
                quotas: Quotas::new(ClientLimits::default()),
            },
            attachment: Box::new(()),
        };
        Client {
            gateway: gateway.clone(),
            session: open(gateway, opening).expect("the default profile"),
            outbox: queued,
            answers,
            deliver,
            requests: TaskTracker::new(),
        }
    }

    /// Sends one message, as its transport would take it.
    async fn send(&self, message: Value) {
        let message = decode_message(message.to_string().as_bytes()).expect("a valid message");
        let deliver = self.deliver.clone();
        let deliver = |served: Served| async move {
            let _ = deliver.send(served.message);
        };
        self.session
            .take(&self.gateway, message, &self.requests, deliver)
            .await;
    }

    /// The next answer delivered, as JSON.
    async fn answer(&mut self) -> Value {
        let answer = settled(self.answers.recv()).await.expect("an answer");
        serde_json::to_value(answer).expect("JSON")
    }

    /// The next message outside any request, as JSON.
    async fn outboxed(&mut self) -> Value {
        let message = settled(self.outbox.recv()).await.expect("a message");
        serde_json::to_value(message).expect("JSON")
    }

    async fn initialize(&mut self) {
        self.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "core-test", "version": "1"}
            }}),
        )
        .await;
        let answer = self.answer().await;
        assert_eq!(
            answer["result"]["protocolVersion"], "2025-11-25",
            "{answer}"
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    async fn call(&self, id: u64, tool: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": format!("mcp__up__{tool}"), "arguments": {}}}))
            .await;
    }
}

#[tokio::test]
async fn calls_run_side_by_side_and_one_cancelled_by_id_is_never_answered() {
    let mut upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let mut client = Client::open(&gateway, None);
    client.initialize().await;

    client.call(1, "hang").await;
    assert_eq!(upstream.heard().await, Heard::Started("hang".into()));
    // `take` returned while the first call hangs: the second is served beside it.
    client.call(2, "echo").await;
    let echoed = client.answer().await;
    assert_eq!(echoed["id"], 2);
    assert_eq!(echoed["result"]["content"][0]["text"], "echo");
    assert_eq!(upstream.heard().await, Heard::Started("echo".into()));

    client
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 1}}),
        )
        .await;
    assert_eq!(upstream.heard().await, Heard::Cancelled("hang".into()));
    client.requests.close();
    settled(client.requests.wait()).await;
    assert!(
        client.answers.try_recv().is_err(),
        "a cancelled request is not answered"
    );
}

#[tokio::test]
async fn a_request_before_initialize_is_refused_and_the_session_lives_on() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let mut client = Client::open(&gateway, None);
    client
        .send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}))
        .await;
    let refused = client.answer().await;
    assert_eq!(refused["id"], 7);
    assert!(refused["error"]["code"].is_i64(), "{refused}");

    client.initialize().await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}))
        .await;
    let listed = client.answer().await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(names, ["mcp__up__echo", "mcp__up__hang", "mcp__up__refuse"]);
}

/// A stateless request's `_meta`.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "core-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

#[tokio::test]
async fn a_merged_list_is_fresh_as_long_as_its_upstreams_say_and_private() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let mut client = Client::open(&gateway, None);
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}),
        )
        .await;
    let listed = client.answer().await;
    let ttl = listed["result"]["ttlMs"].as_u64().expect("a ttlMs");
    assert!(ttl > 0 && ttl <= LIST_TTL_MS, "{listed}");
    assert_eq!(listed["result"]["cacheScope"], "private", "{listed}");

    // A client of 2025-11-25 has no such fields.
    client.initialize().await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await;
    let listed = client.answer().await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    assert!(listed["result"].get("ttlMs").is_none(), "{listed}");
    assert!(listed["result"].get("cacheScope").is_none(), "{listed}");
}

#[tokio::test]
async fn a_stateless_retry_naming_no_parked_call_is_refused() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let mut client = Client::open(&gateway, None);
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "mcp__up__echo",
                "arguments": {},
                "requestState": "forged",
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "core-test", "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": {}
                }
            }}),
        )
        .await;
    let refused = client.answer().await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("requestState")),
        "{refused}"
    );
}

#[tokio::test]
async fn an_initialized_client_is_told_when_its_tools_change() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let mut client = Client::open(&gateway, None);
    client.initialize().await;
    gateway.apply(config(&upstream, false)).await;
    let told = client.outboxed().await;
    assert_eq!(told["method"], "notifications/tools/list_changed", "{told}");
}

#[tokio::test]
async fn the_registry_finds_a_session_for_its_owner_only_until_it_ends() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let client = Client::open(&gateway, Some("token:aaaa"));
    let id = client.session.id.clone();

    let found = gateway
        .sessions()
        .find(&id, Some("token:aaaa"))
        .expect("its owner's");
    assert!(Arc::ptr_eq(&found, &client.session));
    assert_eq!(
        gateway.sessions().find(&id, Some("token:bbbb")).err(),
        Some(SessionRefusal::NotYours)
    );
    assert_eq!(
        gateway.sessions().find(&id, None).err(),
        Some(SessionRefusal::NotYours)
    );
    assert!(
        gateway
            .sessions()
            .list()
            .iter()
            .any(|listed| listed.id == id)
    );

    gateway.sessions().end_session(&client.session);
    assert_eq!(
        gateway.sessions().find(&id, Some("token:aaaa")).err(),
        Some(SessionRefusal::Unknown)
    );
    assert!(
        gateway
            .sessions()
            .list()
            .iter()
            .all(|listed| listed.id != id)
    );
}

#[tokio::test]
async fn stateless_sessions_past_the_bound_end_the_idle_ones() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let quotas = Quotas::new(ClientLimits {
        stateless_sessions: std::num::NonZeroUsize::new(2).expect("non-zero"),
        ..ClientLimits::default()
    });
    let owner = |identity: &str| Owner {
        identity: Some(identity.to_owned()),
        quotas: quotas.clone(),
    };
    let first = serving_stateless(&gateway, None, owner("a")).expect("opened");
    let again = serving_stateless(&gateway, None, owner("a")).expect("found");
    assert!(Arc::ptr_eq(&first, &again), "one session per identity");
    let second = serving_stateless(&gateway, None, owner("b")).expect("opened");
    assert!(!Arc::ptr_eq(&first, &second));
    // A third identity: the two idle ones end to make room.
    let _third = serving_stateless(&gateway, None, owner("c")).expect("opened");
    assert!(first.running.closed.is_cancelled() && second.running.closed.is_cancelled());
    let reopened = serving_stateless(&gateway, None, owner("a")).expect("opened");
    assert!(!Arc::ptr_eq(&first, &reopened), "an ended one opens anew");
    assert_eq!(reopened.id, first.id, "under the same id");
}

#[tokio::test]
async fn task_methods_need_the_extension_and_the_removed_ones_are_not_found() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let mut client = Client::open(&gateway, None);
    let mut declaring = meta();
    declaring["io.modelcontextprotocol/clientCapabilities"] =
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let cases = [
        ("tasks/get", meta(), -32021),
        ("tasks/cancel", meta(), -32021),
        ("tasks/get", declaring.clone(), -32602),
        ("tasks/cancel", declaring.clone(), -32602),
        ("tasks/result", declaring.clone(), -32601),
        ("tasks/list", declaring, -32601),
    ];
    for (id, (method, meta, code)) in cases.into_iter().enumerate() {
        client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": method,
                "params": {"taskId": "nobody.1", "_meta": meta}}))
            .await;
        let answer = client.answer().await;
        assert_eq!(answer["error"]["code"], code, "{method}: {answer}");
    }
}

#[tokio::test]
async fn a_session_replaced_under_its_id_does_not_end_its_successor() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let open = || {
        let (outbox, _) = mpsc::channel(1);
        let opening = Opening {
            profile: None,
            transport: Transport::StreamableHttp,
            id: Some("restored"),
            outbox,
            owner: Owner {
                identity: None,
                quotas: Quotas::new(ClientLimits::default()),
            },
            attachment: Box::new(()),
        };
        open(&gateway, opening).expect("the default profile")
    };
    // Two requests restored the same session at once: the second took its id.
    let first = open();
    let second = open();
    gateway.sessions().end_session(&first);
    let found = gateway
        .sessions()
        .find("restored", None)
        .expect("the second one");
    assert!(Arc::ptr_eq(&found, &second));
    gateway.sessions().end_session(&second);
    assert!(gateway.sessions().find("restored", None).is_err());
}

/// What a client of 2025-11-25 said at `initialize` on another replica.
fn initialized_elsewhere() -> rmcp::model::ClientConfig {
    rmcp::model::ClientConfig::new(
        rmcp::model::ClientCapabilities::default(),
        rmcp::model::Implementation::new("core-test", "1"),
    )
}

#[tokio::test]
#[allow(
    deprecated,
    reason = "logging/setLevel is what clients on 2025 protocols use"
)]
async fn the_level_a_client_sets_is_its_sessions_as_the_relay_and_the_record_see_it() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let mut client = Client::open(&gateway, None);
    client.initialize().await;
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel",
            "params": {"level": "error"}}),
        )
        .await;
    let answer = client.answer().await;
    assert_eq!(answer["result"], json!({}), "{answer}");

    let id = client.session.id.clone();
    let listeners = &gateway.downstream().listeners;
    assert_eq!(listeners.level(&id), Some(rmcp::model::LoggingLevel::Error));
    assert_eq!(
        client.session.reach().level(),
        Some(rmcp::model::LoggingLevel::Error)
    );
    assert!(
        listeners.link(&id).is_some(),
        "the relay reaches its client"
    );
    assert_eq!(client.session.record().log_level.as_deref(), Some("error"));

    gateway.sessions().end_session(&client.session);
    assert_eq!(
        listeners.level(&id),
        None,
        "an ended session wants no level"
    );
    assert!(listeners.link(&id).is_none());
}

#[tokio::test]
async fn a_session_restored_under_an_ended_ones_id_is_the_one_the_relay_reaches() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let opening = |outbox| Opening {
        profile: None,
        transport: Transport::StreamableHttp,
        id: Some("restored"),
        outbox,
        owner: Owner {
            identity: None,
            quotas: Quotas::new(ClientLimits::default()),
        },
        attachment: Box::new(()),
    };
    // Two requests restored the same session at once: the second took its id.
    let (outbox, _first_outbox) = mpsc::channel(1);
    let first = open(&gateway, opening(outbox)).expect("the default profile");
    first.restore(&gateway, initialized_elsewhere()).await;
    let (outbox, _second_outbox) = mpsc::channel(1);
    let second = open(&gateway, opening(outbox)).expect("the default profile");
    second.restore(&gateway, initialized_elsewhere()).await;

    gateway.sessions().end_session(&first);
    let listeners = &gateway.downstream().listeners;
    assert!(
        listeners.link("restored").is_some(),
        "the relay still reaches the session that lives on"
    );
    gateway.sessions().end_session(&second);
    assert!(listeners.link("restored").is_none());
}
