//! Tool search (issue 15): what `tools/list` costs a model in each presentation, and what
//! a search costs at 5,000 tools.
//!
//! - `tools/list` characters (compact JSON) for the five reference servers (npm
//!   server-everything, server-filesystem, server-memory; PyPI mcp-server-time,
//!   mcp-server-git: 50 tools), native full vs native search vs code full vs code search;
//!   target: search ≤ 10% of native full.
//! - 5,000 tools from 10 upstreams: the listing in search mode (target < 8 KB) and
//!   `search_tools` p50, in process (the index alone) and through the gateway over stdio
//!   (target ≤ 2 ms).
//! - the same with the sentence-embedding model (issue 45; `--features semantic`): the
//!   time and memory to embed 5,000 tools, `search_tools` p50 (target ≤ 20 ms), the
//!   gateway's resident memory with the model loaded, the listing unchanged.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_gateway::config::{SearchConfig, ServerConfig};
use mcp_gateway::registry::FederatedTool;
use mcp_gateway::registry::search::semantic::{Document, Semantic};
use mcp_gateway::registry::search::{Ranking, SearchIndex};
use rmcp::model::Tool;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{
    Row, gateway_over_stdio, params, reps, row, rss_kb, server, summary_row, write_config,
};

/// Words the synthetic catalog's tool names and descriptions are made of.
const VERBS: [&str; 10] = [
    "read", "write", "list", "delete", "create", "update", "search", "send", "move", "archive",
];
const NOUNS: [&str; 10] = [
    "file", "issue", "user", "email", "invoice", "branch", "record", "image", "event", "ticket",
];

/// Queries for the 5,000-tool catalog, from one word to a sentence.
const QUERIES: [&str; 6] = [
    "invoice",
    "send an email to a user",
    "delete the old branch",
    "archive every closed ticket of last year",
    "search records by date",
    "tool",
];

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/peers")
}

fn peer(path: &str) -> String {
    let path = peers().join(path);
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-test-peers",
        path.display()
    );
    format!("{:?}", path.to_string_lossy())
}

/// `[servers.*]` for the five reference servers, their files under `dir`.
fn five_servers(dir: &Path) -> String {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    for args in [
        &["init", "-q"][..],
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
    ] {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .status()
            .expect("git");
        assert!(status.success());
    }
    format!(
        "[servers.everything]\ncommand = {}\nargs = [\"stdio\"]\n\
         [servers.filesystem]\ncommand = {}\nargs = [{:?}]\n\
         [servers.memory]\ncommand = {}\nenv = {{ MEMORY_FILE_PATH = {:?} }}\n\
         [servers.time]\ncommand = {}\nargs = [\"--local-timezone\", \"UTC\"]\n\
         [servers.git]\ncommand = {}\nargs = [\"--repository\", {:?}]\n",
        peer("node_modules/.bin/mcp-server-everything"),
        peer("node_modules/.bin/mcp-server-filesystem"),
        dir.to_string_lossy(),
        peer("node_modules/.bin/mcp-server-memory"),
        dir.join("memory.jsonl").to_string_lossy(),
        peer(".venv/bin/mcp-server-time"),
        peer(".venv/bin/mcp-server-git"),
        repo.to_string_lossy(),
    )
}

/// The compact JSON size of the gateway's `tools/list` with `gateway` settings.
async fn listing_chars(dir: &Path, gateway: &str, servers: &str) -> (usize, usize) {
    let config = write_config(dir, &format!("[gateway]\n{gateway}\n{servers}"));
    let client = gateway_over_stdio(&config).await.0;
    let tools = client.peer().list_all_tools().await.unwrap();
    client.cancel().await.unwrap();
    (serde_json::to_string(&tools).unwrap().len(), tools.len())
}

/// `tools/list` characters for the five servers in the four presentations.
pub async fn listing_sizes(dir: &Path, rows: &mut Vec<Row>) {
    let servers = five_servers(dir);
    let presentations = [
        ("native full", "mode = \"native\"\ncatalog = \"full\""),
        ("native search", "mode = \"native\"\ncatalog = \"search\""),
        ("code full", "mode = \"code\"\ncatalog = \"full\""),
        ("code search", "mode = \"code\"\ncatalog = \"search\""),
    ];
    let mut full = 0;
    for (label, settings) in presentations {
        let (chars, listed) = listing_chars(dir, settings, &servers).await;
        if full == 0 {
            full = chars;
        }
        let share = chars as f64 / full as f64;
        rows.push(summary_row(format!(
                "tools/list, five servers, {label}: {chars} characters, {listed} tools listed ({:.1}% of native full)",
                share * 100.0
            )));
    }
}

/// A synthetic tool: a name and description from the vocabulary, a few parameters.
fn synthetic(i: usize) -> (String, String) {
    let (verb, noun) = (VERBS[i % 10], NOUNS[(i / 10) % 10]);
    (
        format!("{verb}_{noun}_{i}"),
        format!("{verb} one {noun} (variant {i}); returns what changed"),
    )
}

/// The 5,000 synthetic tools, in federated-name order.
fn synthetic_catalog() -> Vec<Arc<FederatedTool>> {
    let config = ServerConfig::stdio("x".into(), Vec::new(), Default::default());
    let mut tools: Vec<Arc<FederatedTool>> = (0..5000)
        .map(|i| {
            let (name, description) = synthetic(i);
            let schema = json!({"type": "object", "properties": {
                "id": {"type": "string", "description": "which one"},
                "limit": {"type": "integer", "description": "how many at most"}
            }});
            let server: Arc<str> = Arc::from(format!("s{}", i % 10));
            let tool = Tool::new(
                name.clone(),
                description,
                Arc::new(schema.as_object().cloned().unwrap()),
            );
            Arc::new(FederatedTool::new(
                &format!("mcp__{server}__{name}"),
                &server,
                &config,
                &mcp_gateway::upstream::offer::Listed::of_view(tool),
            ))
        })
        .collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}

/// `[servers.*]` for 10 dynamic upstreams of 500 synthetic tools each.
pub fn dynamic_servers() -> String {
    let mut servers = String::new();
    for s in 0..10 {
        let names: Vec<String> = (0..500).map(|t| synthetic(s * 500 + t).0).collect();
        let env = serde_json::to_string(&names).unwrap();
        servers.push_str(&server(
            &format!("d{s}"),
            "dynamic",
            &format!("env = {{ DYNAMIC_TOOLS = {env:?} }}\n"),
        ));
    }
    servers
}

/// The 5,000-tool catalog in search mode: its listing, and `search_tools` latency.
pub async fn at_scale(dir: &Path, rows: &mut Vec<Row>) {
    // In process: the index alone.
    let tools = synthetic_catalog();
    let started = Instant::now();
    let index = SearchIndex::build(&tools, None);
    let build = started.elapsed();
    let samples: Vec<Duration> = (0..reps(3000))
        .map(|i| {
            let started = Instant::now();
            std::hint::black_box(index.search(QUERIES[i % QUERIES.len()], &[], None, 5));
            started.elapsed()
        })
        .collect();
    rows.push(row(
        &format!(
            "search index, 5,000 tools: one query (built once in {:.1} ms)",
            build.as_secs_f64() * 1e3
        ),
        samples,
        Vec::new(),
    ));

    // Through the gateway: 10 dynamic upstreams of 500 tools each.
    let servers = dynamic_servers();
    for (label, settings) in [
        ("native search", "catalog = \"search\""),
        ("code search", "mode = \"code\"\ncatalog = \"search\""),
    ] {
        let (chars, _) = listing_chars(dir, settings, &servers).await;
        rows.push(summary_row(format!(
            "tools/list, 5,000 tools / 10 upstreams, {label}: {chars} bytes (target < 8,192)"
        )));
    }
    let config = write_config(dir, &format!("[gateway]\ncatalog = \"search\"\n{servers}"));
    let client = gateway_over_stdio(&config).await.0;
    let ping = |i: usize| params("search_tools", json!({"query": QUERIES[i % QUERIES.len()]}));
    let mut samples = Vec::new();
    let mut baseline = Vec::new();
    for i in 0..reps(1000) {
        let started = Instant::now();
        let result = client.peer().call_tool(ping(i)).await.unwrap();
        samples.push(started.elapsed());
        assert_ne!(result.is_error, Some(true), "{result:?}");
        let started = Instant::now();
        client.peer().list_prompts(None).await.unwrap();
        baseline.push(started.elapsed());
    }
    rows.push(row(
        "search_tools through the gateway over stdio, 5,000 tools (vs prompts/list, the same round trip)",
        samples,
        baseline,
    ));
    client.cancel().await.unwrap();
}

/// Semantic search (issue 45) at 5,000 tools, with all-MiniLM-L6-v2 from the test peers:
/// the time and memory to embed the catalog, one query in process (its embedding
/// included), and through the gateway over stdio: `search_tools` p50 once the vectors are
/// made, the gateway's resident memory with and without the model, and the listing
/// (which the model must not change). Needs the `semantic` feature
/// (`cargo bench -p mcp-gateway --bench gateway --features semantic`).
pub async fn semantic_at_scale(dir: &Path, rows: &mut Vec<Row>) {
    if !cfg!(feature = "semantic") {
        rows.push(summary_row(
            "semantic search: not measured (this bench was built without --features semantic)"
                .into(),
        ));
        return;
    }
    let model = peers().join(".venv/models/all-MiniLM-L6-v2");
    assert!(
        model.join("model.safetensors").exists(),
        "{} is missing: run scripts/install-test-peers",
        model.display()
    );
    let tools = synthetic_catalog();
    let vectors = dir.join("tool-vectors");
    let _ = std::fs::remove_dir_all(&vectors);
    let config = SearchConfig {
        model: Some(model.clone()),
        vectors_dir: Some(vectors.clone()),
        ..SearchConfig::default()
    };
    let shutdown = CancellationToken::new();
    let before = rss_kb(std::process::id());
    let started = Instant::now();
    let semantic = Semantic::start(&config, shutdown.clone()).expect("a model is configured");
    semantic.want(tools.iter().map(|tool| Document::of(tool)).collect());
    semantic.settled().await;
    let took = started.elapsed();
    let grown = rss_kb(std::process::id()).saturating_sub(before);
    let index = SearchIndex::build(&tools, Some(&semantic));
    assert!(index.semantic().is_some(), "every tool has its vector");
    rows.push(summary_row(format!(
        "semantic search, 5,000 tools embedded in {:.1} s from a cold start (model load included), \
         {:.0} MB of resident memory for the model and vectors",
        took.as_secs_f64(),
        grown as f64 / 1024.0
    )));
    let mut samples: Vec<Duration> = Vec::new();
    for i in 0..reps(300) {
        let query = QUERIES[i % QUERIES.len()];
        let started = Instant::now();
        let meanings = semantic.embed_query(query).await;
        let (_, ranking) = index.search(query, &meanings, None, 5);
        samples.push(started.elapsed());
        assert_eq!(ranking, Ranking::Fused);
    }
    rows.push(row(
        "search index with the model, 5,000 tools: one query, its embedding included",
        samples,
        Vec::new(),
    ));
    shutdown.cancel();

    // Through the gateway, over stdio: without the model, then with it.
    let servers = dynamic_servers();
    let section = format!(
        "[search]\nmodel = {:?}\nvectors_dir = {:?}\n",
        model.to_string_lossy(),
        vectors.to_string_lossy()
    );
    let (without, _) = listing_chars(dir, "catalog = \"search\"", &servers).await;
    let (with, _) = listing_chars(dir, &format!("catalog = \"search\"\n{section}"), &servers).await;
    assert_eq!(with, without, "the model does not change the listing");
    let lexical = write_config(dir, &format!("[gateway]\ncatalog = \"search\"\n{servers}"));
    let (client, pid) = gateway_over_stdio(&lexical).await;
    let ask = |query: &str| params("search_tools", json!({"query": query}));
    client.peer().call_tool(ask("warm up")).await.unwrap();
    let rss_lexical = rss_kb(pid);
    client.cancel().await.unwrap();
    let fused = write_config(
        dir,
        &format!("[gateway]\ncatalog = \"search\"\n{servers}{section}"),
    );
    let (client, pid) = gateway_over_stdio(&fused).await;
    let started = Instant::now();
    let ranking = |result: &rmcp::model::CallToolResult| {
        result
            .structured_content
            .as_ref()
            .map(|s| s["ranking"].clone())
    };
    loop {
        let result = client.peer().call_tool(ask("warm up")).await.unwrap();
        if ranking(&result) == Some(json!("lexical+semantic")) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "the gateway never ranked by meaning"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ready = started.elapsed();
    let mut samples = Vec::new();
    for i in 0..reps(300) {
        let started = Instant::now();
        let result = client
            .peer()
            .call_tool(ask(QUERIES[i % QUERIES.len()]))
            .await
            .unwrap();
        samples.push(started.elapsed());
        assert_eq!(ranking(&result), Some(json!("lexical+semantic")));
    }
    let rss_model = rss_kb(pid);
    client.cancel().await.unwrap();
    rows.push(row(
        &format!(
            "search_tools with the model through the gateway over stdio, 5,000 tools \
             (ranked by meaning {:.1} s after start)",
            ready.as_secs_f64()
        ),
        samples,
        Vec::new(),
    ));
    rows.push(summary_row(format!(
        "gateway resident memory, 5,000 tools in search mode: {:.0} MB with the model loaded, \
         {:.0} MB without; listing {with} characters either way",
        rss_model as f64 / 1024.0,
        rss_lexical as f64 / 1024.0
    )));
}
