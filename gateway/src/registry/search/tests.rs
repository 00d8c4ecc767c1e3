use std::collections::BTreeMap;

use rmcp::model::Tool;
use serde_json::json;

use super::outline::{OUTLINE_BUDGET, outline};
use super::*;
use crate::config::{Config, ProfileConfig, ServerConfig};
use crate::registry::profile::Profiles;
use crate::registry::view::SessionView;
use crate::upstream::offer::Listed;

fn tool(server: &str, name: &str, description: &str, schema: Value) -> Arc<FederatedTool> {
    let definition = Tool::new(
        name.to_owned(),
        description.to_owned(),
        Arc::new(schema.as_object().cloned().unwrap_or_default()),
    );
    let config = ServerConfig::stdio("x".into(), Vec::new(), BTreeMap::new());
    Arc::new(FederatedTool::new(
        &format!("mcp__{server}__{name}"),
        &Arc::from(server),
        &config,
        &Listed::of_view(definition),
    ))
}

impl SearchIndex {
    /// A search by words alone.
    fn lexical(&self, query: &str, server: Option<&str>, limit: usize) -> Vec<Hit> {
        let (hits, ranking) = self.search(query, &[], server, limit);
        assert_eq!(ranking, Ranking::Lexical);
        hits
    }
}

fn path_schema() -> Value {
    json!({"type": "object", "properties": {"path": {"type": "string", "description": "Where the file is"}}})
}

fn catalog() -> Vec<Arc<FederatedTool>> {
    vec![
        tool(
            "fs",
            "read_text_file",
            "Read the complete contents of a file as text.",
            path_schema(),
        ),
        tool(
            "fs",
            "write_file",
            "Create a new file or overwrite an existing one.",
            path_schema(),
        ),
        tool(
            "fs",
            "list_directory",
            "Get a listing of all files and directories in a path.",
            path_schema(),
        ),
        tool(
            "git",
            "git_log",
            "Shows the commit logs",
            json!({"type": "object", "properties": {"max_count": {"type": "integer"}}}),
        ),
        tool(
            "git",
            "git_diff",
            "Shows differences between branches or commits",
            json!({}),
        ),
        tool(
            "memory",
            "create_entities",
            "Create multiple new entities in the knowledge graph",
            json!({
                "type": "object",
                "properties": {"entities": {"type": "array", "items": {"type": "object", "properties": {
                    "observations": {"type": "array", "description": "Facts about the person or thing"}
                }}}}
            }),
        ),
    ]
}

fn names(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.tool.original.as_str()).collect()
}

#[test]
fn names_count_more_than_descriptions_and_words_match_by_stem() {
    let index = SearchIndex::build(&catalog(), None);
    let hits = index.lexical("write a file", None, 3);
    assert_eq!(names(&hits)[0], "write_file", "{hits:?}");
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert_eq!(
        names(&index.lexical("directories", None, 1)),
        ["list_directory"]
    );
    assert_eq!(
        names(&index.lexical("committed logs", None, 1)),
        ["git_log"]
    );
}

#[test]
fn nested_parameter_descriptions_are_searched() {
    let index = SearchIndex::build(&catalog(), None);
    assert_eq!(
        names(&index.lexical("facts about a person", None, 1)),
        ["create_entities"]
    );
}

#[test]
fn a_server_narrows_and_a_limit_cuts() {
    let index = SearchIndex::build(&catalog(), None);
    let hits = index.lexical("file", Some("git"), 5);
    assert!(hits.iter().all(|h| &*h.tool.server == "git"), "{hits:?}");
    assert_eq!(index.lexical("file", None, 2).len(), 2);
    assert!(index.lexical("zebra unicorn", None, 5).is_empty());
}

#[test]
fn a_query_without_words_lists_tools_in_name_order() {
    let index = SearchIndex::build(&catalog(), None);
    assert_eq!(
        names(&index.lexical("the", Some("git"), 5)),
        ["git_diff", "git_log"]
    );
    assert_eq!(index.lexical("", None, 100).len(), 6);
}

#[test]
fn ties_are_broken_by_name_so_results_are_stable() {
    let tools: Vec<_> = ["b", "c", "a"]
        .iter()
        .map(|n| tool("s", &format!("tool_{n}"), "Same words", json!({})))
        .collect();
    let mut sorted = tools.clone();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let index = SearchIndex::build(&sorted, None);
    assert_eq!(
        names(&index.lexical("same", None, 3)),
        ["tool_a", "tool_b", "tool_c"]
    );
}

#[test]
fn hidden_tools_are_not_indexed_and_indexes_are_kept_per_catalog_and_profile() {
    let mut config = Config::default();
    config.profiles.insert(
        "nogit".into(),
        ProfileConfig {
            deny: vec!["mcp__git__*".into()],
            ..Default::default()
        },
    );
    let profiles = Profiles::new(&config);
    let nogit = profiles.get(Some("nogit")).unwrap();
    let everyone = profiles.get(None).unwrap();
    let catalog = Arc::new(Catalog {
        tools: catalog().into_iter().map(|t| (t.name.clone(), t)).collect(),
        ..Catalog::default()
    });
    let indexes = SearchIndexes::default();
    let view = |catalog: &Arc<Catalog>, profile: &Arc<Profile>| {
        SessionView::new(catalog.clone(), profile.clone())
    };
    let hidden = indexes.get(&view(&catalog, &nogit));
    assert_eq!(hidden.len(), 4);
    assert!(!hidden.servers().contains_key("git"));
    assert!(hidden.lexical("commit logs", None, 5).is_empty());
    assert!(
        Arc::ptr_eq(&hidden, &indexes.get(&view(&catalog, &nogit))),
        "kept"
    );
    assert_eq!(indexes.get(&view(&catalog, &everyone)).len(), 6);
    let changed = Arc::new(Catalog {
        tools: catalog
            .tools
            .iter()
            .take(2)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        ..Catalog::default()
    });
    assert_eq!(
        indexes.get(&view(&changed, &nogit)).len(),
        2,
        "rebuilt for a new catalog"
    );
}

#[test]
fn the_outline_gives_summaries_when_they_fit() {
    let index = SearchIndex::build(&catalog(), None);
    let text = outline(&index, 2000);
    assert!(
        text.contains("fs (3): list_directory (Get a listing of all files and directories in a path); read_text_file (Read the complete contents of a file as text);"),
        "{text}"
    );
    assert!(text.contains("git (2): git_diff (Shows differences between branches or commits); git_log (Shows the commit logs)\n"), "{text}");
    let names_only = outline(&index, 150);
    assert!(names_only.len() <= 150, "{names_only}");
    assert!(
        names_only.contains("fs (3): list_directory, read_text_file, write_file\n"),
        "{names_only}"
    );
}

#[test]
fn the_outline_of_thousands_of_tools_stays_in_budget() {
    let tools: Vec<_> = (0..5000)
        .map(|i| {
            tool(
                &format!("s{}", i % 10),
                &format!("tool_{i:04}"),
                "Does one thing.",
                json!({}),
            )
        })
        .collect();
    let mut sorted = tools;
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let index = SearchIndex::build(&sorted, None);
    let text = outline(&index, OUTLINE_BUDGET);
    assert!(text.len() <= OUTLINE_BUDGET, "{} bytes", text.len());
    assert_eq!(text.lines().count(), 10, "{text}");
    assert!(
        text.starts_with("s0 (500): tool_0000, tool_0010,"),
        "{text}"
    );
    assert!(text.contains(" more\n"), "{text}");
    let many_servers: Vec<_> = (0..1000)
        .map(|i| tool(&format!("server{i:04}"), "t", "x", json!({})))
        .collect();
    let text = outline(&SearchIndex::build(&many_servers, None), 500);
    assert!(text.len() <= 500, "{} bytes", text.len());
    assert!(text.ends_with("more servers\n"), "{text}");
}

#[tokio::test]
async fn with_every_vector_made_rankings_fuse_and_a_wordless_query_finds_tools() {
    use super::semantic::tests::{Letters, letters};
    let dir = tempfile::tempdir().unwrap();
    let semantic = Semantic::with_model(Arc::new(Letters::default()), dir.path().join("v"));
    let tools = catalog();
    let index = SearchIndex::build(&tools, Some(&semantic));
    assert!(index.semantic().is_none(), "no vectors yet");
    let meaning = letters("the commit history");
    let (_, ranking) = index.search("commit logs", std::slice::from_ref(&meaning), None, 3);
    assert_eq!(
        ranking,
        Ranking::Lexical,
        "words serve until the vectors are made"
    );
    semantic.want(tools.iter().map(|tool| Document::of(tool)).collect());
    semantic.settled().await;
    assert!(index.semantic().is_some());
    let (hits, ranking) = index.search("commit logs", std::slice::from_ref(&meaning), None, 3);
    assert_eq!(ranking, Ranking::Fused);
    assert_eq!(hits.len(), 3);
    assert_eq!(hits[0].tool.original, "git_log", "first in both rankings");
    // No word of any tool: nothing by words, the nearest by meaning.
    assert!(index.lexical("zebra unicorn", None, 5).is_empty());
    let (hits, _) = index.search(
        "zebra unicorn",
        std::slice::from_ref(&meaning),
        Some("git"),
        5,
    );
    assert!(!hits.is_empty() && hits.iter().all(|hit| &*hit.tool.server == "git"));
    // An empty query still lists a server's tools in name order.
    let (hits, ranking) = index.search(" ", std::slice::from_ref(&meaning), Some("git"), 5);
    assert_eq!(ranking, Ranking::Lexical);
    assert_eq!(names(&hits), ["git_diff", "git_log"]);
}
