//! One contract, checked against both stores: the memory one, and a real `redis-server`
//! (installed by scripts/install-cluster-deps) started on a free port for the test.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::*;

fn config() -> ClusterConfig {
    ClusterConfig {
        key_prefix: format!("test-{}", uuid::Uuid::new_v4().simple()),
        max_events_per_stream: 3,
        ..ClusterConfig::default()
    }
}

async fn contract(state: &dyn SharedState) {
    // Sessions: created by their owner, read back, ended everywhere.
    assert_eq!(state.touch_session("s1").await.unwrap(), None);
    state.set_owner("s1", Some("token:0")).await.unwrap();
    state
        .set_handshake("s1", r#"{"protocolVersion":"x"}"#)
        .await
        .unwrap();
    let record = state.touch_session("s1").await.unwrap().unwrap();
    assert_eq!(record.owner.as_deref(), Some("token:0"));
    assert_eq!(
        record.handshake.as_deref(),
        Some(r#"{"protocolVersion":"x"}"#)
    );
    state.set_owner("s2", None).await.unwrap();
    assert_eq!(
        state.touch_session("s2").await.unwrap().unwrap().owner,
        None
    );

    // The limiter admits exactly `limit` calls in a window.
    let window = Duration::from_secs(60);
    let mut admitted = 0;
    for _ in 0..7 {
        admitted += state.admit_call("s1", 5, window).await.unwrap() as u32;
    }
    assert_eq!(admitted, 5);
    assert!(
        state.admit_call("s2", 5, window).await.unwrap(),
        "per session"
    );

    // Chains grow while the key repeats and restart when it changes.
    let counts = [
        state.extend_chain("s1", "a").await.unwrap(),
        state.extend_chain("s1", "a").await.unwrap(),
        state.extend_chain("s1", "b").await.unwrap(),
        state.extend_chain("s1", "b").await.unwrap(),
    ];
    assert_eq!(counts, [1, 2, 1, 2]);

    // The log level joins an existing record, and creates none.
    state.set_log_level("s1", "warning").await.unwrap();
    let record = state.touch_session("s1").await.unwrap().unwrap();
    assert_eq!(record.log_level.as_deref(), Some("warning"));
    assert_eq!(record.owner.as_deref(), Some("token:0"));
    state.set_log_level("stdio-session", "debug").await.unwrap();
    assert_eq!(state.touch_session("stdio-session").await.unwrap(), None);

    // Events of a standalone stream reach subscribers (Redis subscribes in the
    // background: record until the subscription is there).
    let mut published = state.published();
    let standalone = format!("{}:s1:common", state.replica());
    let (id, received) = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let id = state.record_event(&standalone, "{}".into(), Some("s1"));
            if let Ok(Ok(received)) =
                tokio::time::timeout(Duration::from_millis(200), published.recv()).await
            {
                return (id, received);
            }
        }
    })
    .await
    .expect("a published event never arrived");
    assert_eq!(
        received,
        Published {
            origin: state.replica().to_owned(),
            session: "s1".into(),
            event: StoredEvent {
                id,
                payload: "{}".into()
            },
        }
    );

    // Ending a session forgets its record, its window and its chain.
    state.end_session("s1").await.unwrap();
    assert_eq!(state.touch_session("s1").await.unwrap(), None);
    assert!(state.admit_call("s1", 1, window).await.unwrap());
    assert_eq!(state.extend_chain("s1", "b").await.unwrap(), 1);

    // Events: unique ids, replay after an id (of what was recorded just before),
    // bounded count per stream.
    let mut ids = Vec::new();
    for payload in ["e1", "e2", "e3", "e4"] {
        ids.push(state.record_event("s2:common", payload.into(), None));
    }
    let other = state.record_event("s2:7", "x".into(), None);
    assert!(!ids.contains(&other));
    let after_second: Vec<_> = state
        .events_after(&ids[1])
        .await
        .unwrap()
        .events
        .into_iter()
        .map(|e| (e.id, e.payload))
        .collect();
    assert_eq!(
        after_second,
        [
            (ids[2].clone(), "e3".to_owned()),
            (ids[3].clone(), "e4".to_owned())
        ]
    );
    let kept = state.events_after(&event_id("s2:common", 0)).await.unwrap();
    assert_eq!(kept.events.len(), 3, "only the last 3 are kept: {kept:?}");
    // The memory store says the first was dropped; Redis cannot tell.
    assert_eq!(kept.dropped, !state.is_shared());
    // A reserved id stores nothing, and later events sort after it.
    let reserved = state.reserve_event_id("s2:common");
    assert_eq!(
        state.events_after(&ids[3]).await.unwrap(),
        Replay::default()
    );
    let later = state.record_event("s2:common", "e5".into(), None);
    let after_reserved = state.events_after(&reserved).await.unwrap().events;
    assert_eq!(
        after_reserved
            .iter()
            .map(|e| (e.id.clone(), e.payload.clone()))
            .collect::<Vec<_>>(),
        [(later, "e5".to_owned())]
    );
    assert_eq!(
        state.events_after("no-such-id").await.unwrap(),
        Replay::default()
    );

    // Records: kept as given, listed by prefix (wildcards in it are plain), forgotten.
    assert_eq!(state.get_record("oauth/a*/x").await.unwrap(), None);
    state
        .put_record("oauth/a*/x", vec![0, 159, 1], None)
        .await
        .unwrap();
    state
        .put_record("oauth/a*/y", b"y".to_vec(), None)
        .await
        .unwrap();
    state
        .put_record("oauth/ab/z", b"z".to_vec(), None)
        .await
        .unwrap();
    assert_eq!(
        state.get_record("oauth/a*/x").await.unwrap(),
        Some(vec![0, 159, 1])
    );
    assert_eq!(
        state.record_keys("oauth/a*/").await.unwrap(),
        ["oauth/a*/x", "oauth/a*/y"]
    );
    state.delete_record("oauth/a*/x").await.unwrap();
    assert_eq!(
        state.record_keys("oauth/a*/").await.unwrap(),
        ["oauth/a*/y"]
    );
    // Taken once: the second taker gets nothing.
    assert_eq!(
        state.take_record("oauth/a*/y").await.unwrap(),
        Some(b"y".to_vec())
    );
    assert_eq!(state.take_record("oauth/a*/y").await.unwrap(), None);
    // A record with a lifetime lapses.
    let brief = Some(Duration::from_millis(1));
    state
        .put_record("brief", b"b".to_vec(), brief)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(state.get_record("brief").await.unwrap(), None);
    assert_eq!(state.take_record("brief").await.unwrap(), None);

    // A lock is held by one holder until it lets go or its lease lapses.
    let lease = Duration::from_secs(30);
    assert!(state.try_lock("refresh", "r1", lease).await.unwrap());
    assert!(!state.try_lock("refresh", "r2", lease).await.unwrap());
    state.unlock("refresh", "r2").await.unwrap();
    assert!(
        !state.try_lock("refresh", "r2", lease).await.unwrap(),
        "not r2's to let go"
    );
    state.unlock("refresh", "r1").await.unwrap();
    assert!(
        state
            .try_lock("refresh", "r2", Duration::from_millis(1))
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        state.try_lock("refresh", "r1", lease).await.unwrap(),
        "the lease lapsed"
    );
    // A task record is kept for its TTL, replaced by a later write, gone once the TTL ran
    // out (a real wait: Redis keeps the time).
    assert_eq!(state.get_task("t1").await.unwrap(), None);
    let ttl = Duration::from_secs(60);
    let roomy = TaskBound {
        max_tasks: 100,
        max_bytes: 1 << 20,
        remembered: 10,
    };
    for record in ["working", "done"] {
        let kept = state
            .put_task(task("t1", Some("token:0"), record, ttl, false), roomy)
            .await;
        assert_eq!(kept.unwrap(), TaskKept::Kept);
    }
    assert_eq!(
        state.get_task("t1").await.unwrap(),
        Some(StoredTask::Record("done".into()))
    );
    let brief = task("t2", None, "brief", Duration::from_millis(1), false);
    state.put_task(brief, roomy).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while state.get_task("t2").await.unwrap().is_some() {
        assert!(std::time::Instant::now() < deadline, "t2 outlived its TTL");
        tokio::task::yield_now().await;
    }
    // Messages left in a mailbox are taken once, in order, and each is news.
    let mut news = state.new_messages();
    assert!(state.take_messages("task:t1").await.unwrap().is_empty());
    state
        .send_message("task:t1", "a".into(), ttl)
        .await
        .unwrap();
    state
        .send_message("task:t1", "b".into(), ttl)
        .await
        .unwrap();
    assert_eq!(state.take_messages("task:t1").await.unwrap(), ["a", "b"]);
    assert!(state.take_messages("task:t1").await.unwrap().is_empty());
    let heard = tokio::time::timeout(Duration::from_secs(5), news.recv()).await;
    assert_eq!(heard.ok().and_then(Result::ok).as_deref(), Some("task:t1"));
    assert!(state.is_ready());
}

/// A task entry of `owner` holding `record`.
fn task<'a>(
    id: &'a str,
    owner: Option<&'a str>,
    record: &str,
    ttl: Duration,
    settled: bool,
) -> TaskEntry<'a> {
    TaskEntry {
        id,
        owner,
        record: record.to_owned(),
        ttl,
        settled,
    }
}

/// What one identity keeps of its tasks stays within its bound: settled tasks are dropped
/// oldest first (and their ids remembered, as many as the bound says, to their owner
/// alone), running ones never, and a new running task is refused while running ones
/// fill the bound; another identity's tasks are untouched.
async fn task_bound(state: &dyn SharedState) {
    let ttl = Duration::from_secs(60);
    let alice = Some("token:alice");
    let bob = Some("token:bob");
    let entry = |id: &'static str, owner, settled| task(id, owner, "r", ttl, settled);
    let cost = entry("a1", alice, false).bytes();
    let bound = TaskBound {
        max_tasks: 3,
        max_bytes: 100 * cost,
        remembered: 2,
    };
    let put = |task: TaskEntry<'static>| async move { state.put_task(task, bound).await.unwrap() };
    let record = |id| async move { state.get_task(id).await.unwrap() };
    let dropped = |owner: Option<&str>| {
        Some(StoredTask::Dropped {
            owner: owner.map(str::to_owned),
        })
    };

    assert_eq!(put(entry("b1", bob, true)).await, TaskKept::Kept);
    for id in ["a1", "a2", "a3"] {
        assert_eq!(put(entry(id, alice, false)).await, TaskKept::Kept);
    }
    // Three running: no room for a fourth, and nothing is dropped for it.
    assert_eq!(put(entry("a4", alice, false)).await, TaskKept::Refused);
    assert_eq!(record("a4").await, None);
    assert_eq!(record("a1").await, Some(StoredTask::Record("r".into())));
    // Settled, a1 makes room for a4: the oldest settled goes.
    assert_eq!(put(entry("a1", alice, true)).await, TaskKept::Kept);
    assert_eq!(put(entry("a4", alice, false)).await, TaskKept::Kept);
    assert_eq!(record("a1").await, dropped(alice));
    // A running task's record changes in place, whatever the bound.
    assert_eq!(put(entry("a2", alice, false)).await, TaskKept::Kept);
    // Settling and starting more drops the settled, oldest first.
    assert_eq!(put(entry("a3", alice, true)).await, TaskKept::Kept);
    assert_eq!(put(entry("a2", alice, true)).await, TaskKept::Kept);
    assert_eq!(put(entry("a5", alice, false)).await, TaskKept::Kept);
    assert_eq!(record("a2").await, dropped(alice));
    assert_eq!(record("a3").await, Some(StoredTask::Record("r".into())));
    // Only the last two dropped ids are remembered.
    assert_eq!(put(entry("a6", alice, false)).await, TaskKept::Kept);
    assert_eq!(record("a3").await, dropped(alice));
    assert_eq!(record("a1").await, None, "forgotten");
    // Bob's one settled task was never in the way.
    assert_eq!(record("b1").await, Some(StoredTask::Record("r".into())));

    // Bytes bound alike: a settled record past the budget pushes out older ones.
    let carol = Some("token:carol");
    let big = "x".repeat(1000);
    let bytes = task("c1", carol, &big, ttl, true).bytes();
    let bound = TaskBound {
        max_tasks: 100,
        max_bytes: 2 * bytes,
        remembered: 10,
    };
    for id in ["c1", "c2", "c3"] {
        let kept = state
            .put_task(task(id, carol, &big, ttl, true), bound)
            .await;
        assert_eq!(kept.unwrap(), TaskKept::Kept);
    }
    assert_eq!(record("c1").await, dropped(carol));
    assert_eq!(record("c2").await, Some(StoredTask::Record(big.clone())));
    // A running one that does not fit beside the running ones is refused.
    let running = state.put_task(task("c4", carol, &big, ttl, false), bound);
    assert_eq!(running.await.unwrap(), TaskKept::Kept);
    let running = state.put_task(task("c5", carol, &big, ttl, false), bound);
    assert_eq!(running.await.unwrap(), TaskKept::Kept);
    let running = state.put_task(task("c6", carol, &big, ttl, false), bound);
    assert_eq!(running.await.unwrap(), TaskKept::Refused);
    assert_eq!(record("c3").await, dropped(carol));
    assert_eq!(record("c4").await, Some(StoredTask::Record(big.clone())));
}

#[tokio::test]
async fn memory_state_keeps_the_contract() {
    contract(&memory::MemoryState::new(&config())).await;
}

#[tokio::test]
async fn memory_state_bounds_what_each_identity_keeps_of_its_tasks() {
    task_bound(&memory::MemoryState::new(&config())).await;
}

#[tokio::test]
async fn memory_state_drops_the_oldest_events_of_any_stream_past_its_byte_bound() {
    byte_bound(&memory::MemoryState::new(&bounded_config())).await;
}

/// Room for three events of 1000 bytes, with what keeping each costs in either store.
fn bounded_config() -> ClusterConfig {
    ClusterConfig {
        max_event_bytes: 3 * 1200,
        ..config()
    }
}

/// The oldest events of any stream are dropped past `max_event_bytes` (as
/// [`bounded_config`] sets it), and a replay from before one says so.
async fn byte_bound(state: &dyn SharedState) {
    let payload = "x".repeat(1000);
    let a0 = state.reserve_event_id("r:a:1");
    let b0 = state.reserve_event_id("r:b:1");
    let a1 = state.record_event("r:a:1", payload.clone(), None);
    state.record_event("r:b:1", payload.clone(), None);
    state.record_event("r:a:1", payload.clone(), None);
    // Three kept: every replay is whole.
    let replay = state.events_after(&a0).await.unwrap();
    assert_eq!((replay.events.len(), replay.dropped), (2, false));
    state.record_event("r:b:1", payload.clone(), None);
    // The fourth pushed out the oldest of all, a's first.
    let replay = state.events_after(&a0).await.unwrap();
    assert_eq!((replay.events.len(), replay.dropped), (1, true));
    let replay = state.events_after(&a1).await.unwrap();
    assert_eq!(
        (replay.events.len(), replay.dropped),
        (1, false),
        "after it"
    );
    let replay = state.events_after(&b0).await.unwrap();
    assert_eq!((replay.events.len(), replay.dropped), (2, false));
    // An event larger than the whole bound is not kept, and pushes out nothing.
    let huge = state.record_event("r:c:1", "y".repeat(4000), None);
    let (stream, sequence) = parse_event_id(&huge).unwrap();
    let replay = state
        .events_after(&event_id(stream, sequence - 1))
        .await
        .unwrap();
    assert_eq!((replay.events.len(), replay.dropped), (0, true));
    let replay = state.events_after(&b0).await.unwrap();
    assert_eq!((replay.events.len(), replay.dropped), (2, false));
}

/// A `redis-server` on a free loopback port, killed when dropped.
struct RedisServer(Child, u16);

impl RedisServer {
    fn start() -> RedisServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is missing: run scripts/install-cluster-deps");
        RedisServer(child, port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn redis_state_keeps_the_contract_and_notices_redis_going_away() {
    let mut server = RedisServer::start();
    let url = format!("redis://127.0.0.1:{}/0", server.1);
    let state = redis::RedisState::open(&url, &config()).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !state.is_ready() {
        assert!(tokio::time::Instant::now() < deadline, "never connected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    contract(&state).await;
    let bounded = redis::RedisState::open(&url, &bounded_config()).unwrap();
    while !bounded.is_ready() {
        assert!(tokio::time::Instant::now() < deadline, "never connected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    byte_bound(&bounded).await;
    task_bound(&state).await;

    // "s2" was read lately and may be answered from this replica's copy; "s9" needs Redis.
    let _ = server.0.kill();
    let _ = server.0.wait();
    let failed = state.touch_session("s9").await;
    assert!(
        matches!(failed, Err(StateError::Unavailable(_))),
        "{failed:?}"
    );
    assert!(!state.is_ready());
    let failed = state.touch_session("s2").await;
    assert!(
        matches!(failed, Err(StateError::Unavailable(_))),
        "an unready state serves no copy: {failed:?}"
    );
}

#[test]
fn a_bad_url_is_refused() {
    let refused = redis::RedisState::open("http://nope", &config());
    assert!(matches!(refused, Err(StateError::Unavailable(_))));
}
