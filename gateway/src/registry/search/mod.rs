//! Tool search: the catalog at a fraction of the tokens. With `catalog = "search"` a
//! client lists only `search_tools` (and the pinned tools), and finds the rest by asking in
//! its own words; this module ranks the tools one session may see against such a query.
//!
//! Ranking is BM25F: each tool is a document with fields of different weight — its name
//! split into words, its server, its title, its description, and the names, titles and
//! descriptions of its parameters and results (nested ones too) — whose term frequencies are length-normalised per field,
//! combined, then saturated once (Robertson & Zaragoza, "The Probabilistic Relevance
//! Framework: BM25 and Beyond", 2009). Words are compared as stems, and a query also
//! looks for common synonyms of its words (`terms`).
//!
//! With a sentence-embedding model configured ([`semantic`]), the tools are also ranked
//! by the cosine similarity of their vectors to the query's (the better of the query as
//! written and the query with its particulars masked: [`semantic::query_texts`]), and the
//! two scores are fused: the cosine as a z-score over the tools in scope, plus the BM25F
//! score relative to the query's best match ([`LEXICAL_WEIGHT`]). The z-score puts every
//! model on one scale (all-MiniLM-L6-v2's cosines spread from 0 to 0.7, e5's crowd
//! between 0.7 and 0.9); meaning decides, and shared words lift the tool that is named
//! outright. A query that shares no word with any tool still finds the nearest in
//! meaning. Until every tool of the index has its vector, ranking is lexical alone.
//!
//! An index is built once per catalog and profile ([`SearchIndexes`]) from the tools that
//! profile sees, so a hidden tool is never in results, counts or term statistics. A new
//! catalog (an upstream's `list_changed`, a reload) builds a new one on first use; a query
//! only adds up precomputed postings (and, with a model, compares one vector per tool).

pub mod outline;
pub mod semantic;
mod terms;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::profile::Profile;
use super::view::SessionView;
use super::{Catalog, FederatedTool};
use crate::observe::metrics::SEARCH_INDEX_BUILDS;
use semantic::{Document, Key, Semantic};

/// BM25's term-frequency saturation.
const K1: f32 = 1.2;

/// What words count beside meaning: a tool's fused score is the z-score of its cosine
/// similarity to the query (over the tools in scope) plus this much of its BM25F score
/// relative to the query's best. Chosen on the fitted tasks (`TASKS`, `TUNING_TASKS` of
/// tests/tests/search.rs), never on the held-out ones, for both all-MiniLM-L6-v2 and e5:
/// 1.0 ranked best of 0.5 to 1.5; adding a share of the raw cosine instead (what this
/// was first) favours words too much with a model whose cosines crowd together, and
/// reciprocal rank fusion ranked worse, since a word shared by chance ranks a tool as
/// high as a close meaning does.
const LEXICAL_WEIGHT: f32 = 1.0;

/// Schema levels below `properties` whose parameter names and descriptions are indexed.
const MAX_SCHEMA_DEPTH: usize = 4;

/// The fields of a tool document: how much a match counts, and how much a long field is
/// discounted (BM25's `b`).
#[derive(Debug, Clone, Copy)]
enum Field {
    /// The tool's own name, split into words.
    Name,
    /// The upstream server's name.
    Server,
    Title,
    Description,
    /// Property names, titles and descriptions of the input and output schemas.
    Schemas,
}

impl Field {
    const ALL: [Field; 5] = [
        Field::Name,
        Field::Server,
        Field::Title,
        Field::Description,
        Field::Schemas,
    ];

    fn weight(self) -> f32 {
        match self {
            Field::Name => 3.0,
            Field::Server => 1.0,
            Field::Title => 2.0,
            Field::Description => 1.0,
            Field::Schemas => 0.5,
        }
    }

    fn length_discount(self) -> f32 {
        match self {
            Field::Name | Field::Server | Field::Title => 0.3,
            Field::Description | Field::Schemas => 0.75,
        }
    }
}

/// One document's share of one term, with the term's IDF already applied.
#[derive(Debug, Clone, Copy)]
struct Posting {
    tool: u32,
    score: f32,
}

/// A ranked match.
#[derive(Debug, Clone)]
pub struct Hit {
    pub tool: Arc<FederatedTool>,
    pub score: f32,
}

/// How a search was ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranking {
    /// By words (BM25F) alone: no model is configured, or it is not ready.
    Lexical,
    /// Words and meaning, fused.
    Fused,
}

impl Ranking {
    /// As `search_tools` reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            Ranking::Lexical => "lexical",
            Ranking::Fused => "lexical+semantic",
        }
    }
}

/// The tools one profile sees, ranked by query.
#[derive(Default)]
pub struct SearchIndex {
    /// In federated-name order.
    tools: Vec<Arc<FederatedTool>>,
    postings: HashMap<String, Vec<Posting>>,
    outline: OnceLock<String>,
    meaning: Option<Meaning>,
}

/// The semantic side of an index: the keys of its tools' vectors, and the vectors once
/// every one is made.
struct Meaning {
    semantic: Arc<Semantic>,
    /// In the order of [`SearchIndex::tools`].
    keys: Vec<Key>,
    vectors: OnceLock<Vec<Arc<[f32]>>>,
}

impl SearchIndex {
    /// Indexes `tools`, by meaning too when `semantic` is given.
    pub fn build<'a>(
        tools: impl IntoIterator<Item = &'a Arc<FederatedTool>>,
        semantic: Option<&Arc<Semantic>>,
    ) -> SearchIndex {
        let mut tools: Vec<Arc<FederatedTool>> = tools.into_iter().cloned().collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        // Term frequencies per field, and each field's length, per tool.
        let documents: Vec<[Vec<String>; 5]> = tools.iter().map(|t| fields(t)).collect();
        let mut average_length = [0f32; 5];
        for document in &documents {
            for (total, field) in average_length.iter_mut().zip(document) {
                *total += field.len() as f32;
            }
        }
        for total in &mut average_length {
            *total /= documents.len().max(1) as f32;
        }
        // BM25F: per-field normalised frequencies, weighted and summed before saturation.
        let mut weighted: HashMap<&str, Vec<(u32, f32)>> = HashMap::new();
        for (index, document) in documents.iter().enumerate() {
            let mut frequencies: HashMap<&str, f32> = HashMap::new();
            for ((field, terms), average) in Field::ALL.iter().zip(document).zip(average_length) {
                let b = field.length_discount();
                let norm = 1.0 - b + b * terms.len() as f32 / average.max(1.0);
                for term in terms {
                    *frequencies.entry(term.as_str()).or_default() += field.weight() / norm;
                }
            }
            for (term, frequency) in frequencies {
                weighted
                    .entry(term)
                    .or_default()
                    .push((index as u32, frequency));
            }
        }
        let n = tools.len() as f32;
        let postings = weighted
            .into_iter()
            .map(|(term, documents)| {
                let df = documents.len() as f32;
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                let mut postings: Vec<Posting> = documents
                    .into_iter()
                    .map(|(tool, tf)| Posting {
                        tool,
                        score: idf * tf * (K1 + 1.0) / (K1 + tf),
                    })
                    .collect();
                postings.sort_unstable_by_key(|p| p.tool);
                (term.to_owned(), postings)
            })
            .collect();
        let meaning = semantic.map(|semantic| Meaning {
            semantic: semantic.clone(),
            keys: tools.iter().map(|tool| Document::of(tool).key).collect(),
            vectors: OnceLock::new(),
        });
        SEARCH_INDEX_BUILDS.inc();
        SearchIndex {
            tools,
            postings,
            outline: OnceLock::new(),
            meaning,
        }
    }

    /// The model that ranks this index by meaning, once every tool has its vector.
    pub fn semantic(&self) -> Option<&Arc<Semantic>> {
        let meaning = self.meaning.as_ref()?;
        if meaning.vectors.get().is_none() {
            let vectors = meaning.semantic.vectors(&meaning.keys)?;
            let _ = meaning.vectors.set(vectors);
        }
        Some(&meaning.semantic)
    }

    /// The catalog at a glance within [`outline::OUTLINE_BUDGET`]: made once per index.
    pub fn outline(&self) -> &str {
        self.outline
            .get_or_init(|| outline::outline(self, outline::OUTLINE_BUDGET))
    }

    /// How many tools the index holds.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The indexed tools, in federated-name order.
    pub fn tools(&self) -> &[Arc<FederatedTool>] {
        &self.tools
    }

    /// Tool counts by server.
    pub fn servers(&self) -> BTreeMap<&str, usize> {
        let mut servers = BTreeMap::new();
        for tool in &self.tools {
            *servers.entry(&*tool.server).or_default() += 1;
        }
        servers
    }

    /// The best `limit` matches for `query`, best first (ties by name), only of `server`
    /// when given, and how they were ranked: by words alone, or fused with their
    /// similarity to `meanings` (the query's vectors, [`semantic::Semantic::embed_query`])
    /// when there are some and every tool has its vector. A query with no searchable word
    /// matches every tool equally, so it lists tools in name order: `{"query": "",
    /// "server": "git"}` shows what `git` has.
    pub fn search(
        &self,
        query: &str,
        meanings: &[Vec<f32>],
        server: Option<&str>,
        limit: usize,
    ) -> (Vec<Hit>, Ranking) {
        let query_terms = terms::query_terms(query);
        let in_scope: Vec<usize> = (0..self.tools.len())
            .filter(|&index| server.is_none_or(|s| *self.tools[index].server == *s))
            .collect();
        let lexical = self.lexical_scores(&query_terms);
        let cosines = Some(meanings)
            .filter(|meanings| !meanings.is_empty() && !query.trim().is_empty())
            .and_then(|meanings| self.cosines(meanings));
        let (mut hits, ranking): (Vec<(usize, f32)>, _) = match cosines {
            Some(cosines) => {
                // BM25 scores have no fixed scale: the best match of this query is 1.
                let best = in_scope.iter().map(|&i| lexical[i]).fold(0f32, f32::max);
                let lexical = |i: usize| if best > 0.0 { lexical[i] / best } else { 0.0 };
                // Nor have cosines across models: each as a z-score over the tools in scope.
                let n = in_scope.len().max(1) as f32;
                let mean = in_scope.iter().map(|&i| cosines[i]).sum::<f32>() / n;
                let spread = (in_scope
                    .iter()
                    .map(|&i| (cosines[i] - mean).powi(2))
                    .sum::<f32>()
                    / n)
                    .sqrt()
                    .max(1e-6);
                let hits = in_scope
                    .iter()
                    .map(|&i| {
                        (
                            i,
                            (cosines[i] - mean) / spread + LEXICAL_WEIGHT * lexical(i),
                        )
                    })
                    .collect();
                (hits, Ranking::Fused)
            }
            None => {
                let hits = in_scope
                    .iter()
                    .map(|&i| (i, lexical[i]))
                    .filter(|&(_, score)| score > 0.0 || query_terms.is_empty())
                    .collect();
                (hits, Ranking::Lexical)
            }
        };
        // Tools are in name order, so a stable sort by score breaks ties by name.
        hits.sort_by(|a, b| b.1.total_cmp(&a.1));
        hits.truncate(limit);
        let hits = hits
            .into_iter()
            .map(|(index, score)| Hit {
                tool: self.tools[index].clone(),
                score,
            })
            .collect();
        (hits, ranking)
    }

    /// Each tool's BM25F score for `query_terms`.
    fn lexical_scores(&self, query_terms: &[(String, f32)]) -> Vec<f32> {
        let mut scores = vec![0f32; self.tools.len()];
        for (term, weight) in query_terms {
            for posting in self.postings.get(term).into_iter().flatten() {
                scores[posting.tool as usize] += weight * posting.score;
            }
        }
        scores
    }

    /// Each tool's best cosine similarity to one of `meanings`, when every tool has its
    /// vector (they and `meanings` are unit length, so it is their dot product).
    fn cosines(&self, meanings: &[Vec<f32>]) -> Option<Vec<f32>> {
        self.semantic()?;
        let vectors = self.meaning.as_ref()?.vectors.get()?;
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        let cosines = vectors
            .iter()
            .map(|vector| {
                meanings
                    .iter()
                    .map(|meaning| dot(vector, meaning))
                    .fold(f32::MIN, f32::max)
            })
            .collect();
        Some(cosines)
    }
}

/// The terms of each field of `tool`, in [`Field::ALL`] order.
fn fields(tool: &FederatedTool) -> [Vec<String>; 5] {
    let definition = &tool.definition;
    let title = definition
        .title
        .as_deref()
        .or_else(|| definition.annotations.as_ref()?.title.as_deref())
        .unwrap_or_default();
    let mut schemas = Vec::new();
    push_properties(
        &Value::Object((*definition.input_schema).clone()),
        0,
        &mut schemas,
    );
    if let Some(output) = &definition.output_schema {
        push_properties(&Value::Object((**output).clone()), 0, &mut schemas);
    }
    [
        terms::terms(&tool.original),
        terms::terms(&tool.server),
        terms::terms(title),
        terms::terms(definition.description.as_deref().unwrap_or_default()),
        schemas,
    ]
}

/// The names, titles and descriptions of a schema's properties, nested ones included down
/// to [`MAX_SCHEMA_DEPTH`].
fn push_properties(schema: &Value, depth: usize, out: &mut Vec<String>) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    let Some(schema) = schema.as_object() else {
        return;
    };
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            terms::push_terms(name, out);
            for key in ["title", "description"] {
                if let Some(text) = property.get(key).and_then(Value::as_str) {
                    terms::push_terms(text, out);
                }
            }
            push_properties(property, depth + 1, out);
        }
    }
    if let Some(items) = schema.get("items") {
        push_properties(items, depth + 1, out);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for variant in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            push_properties(variant, depth + 1, out);
        }
    }
}

/// One index per profile, rebuilt when the catalog or the profile changes and never per
/// query.
#[derive(Default)]
pub struct SearchIndexes {
    by_profile: std::sync::Mutex<HashMap<String, CachedIndex>>,
    /// The model that ranks by meaning too, if one is configured.
    semantic: Option<Arc<Semantic>>,
}

struct CachedIndex {
    catalog: Arc<Catalog>,
    profile: Arc<Profile>,
    index: Arc<SearchIndex>,
}

impl SearchIndexes {
    /// Indexes ranked by words, and by meaning when `semantic` is given.
    pub fn new(semantic: Option<Arc<Semantic>>) -> SearchIndexes {
        SearchIndexes {
            by_profile: Default::default(),
            semantic,
        }
    }

    /// The index of the tools `view` shows.
    pub fn get(&self, view: &SessionView) -> Arc<SearchIndex> {
        let (catalog, profile) = (view.catalog(), view.profile());
        let mut by_profile = self.by_profile.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cached) = by_profile.get(&profile.name)
            && Arc::ptr_eq(&cached.catalog, catalog)
            && Arc::ptr_eq(&cached.profile, profile)
        {
            return cached.index.clone();
        }
        let index = Arc::new(SearchIndex::build(view.tools(), self.semantic.as_ref()));
        by_profile.insert(
            profile.name.clone(),
            CachedIndex {
                catalog: catalog.clone(),
                profile: profile.clone(),
                index: index.clone(),
            },
        );
        index
    }
}

#[cfg(test)]
mod tests;
