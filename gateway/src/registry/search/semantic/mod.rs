//! Semantic ranking: tools and queries as sentence-embedding vectors, compared by cosine
//! similarity. BM25 finds a tool when the query shares its words; an agent asks "is
//! anything still waiting to be committed" of a tool that "shows the working tree
//! status". A sentence-embedding model places both near each other: a folder such as
//! all-MiniLM-L6-v2's (`[search] model`, run in process by [`bert`]), or an
//! OpenAI-compatible embeddings endpoint (`[search] embeddings_url`, [`endpoint`]).
//!
//! Cost stays off the request path: each tool's [`Document`] is embedded once, keyed by
//! its hash in a vectors file per model ([`store`], kept on disk), by a background task
//! fed with every new catalog ([`Semantic::want`]); start-up and list changes never wait
//! for the model, a changed tool is the only one embedded again, and until every tool of
//! an index has its vector the index ranks lexically. A model that fails (an endpoint
//! down or slow) is asked again after a wait, and searches rank by words meanwhile. A
//! query costs one short model run or request.

#[cfg(feature = "semantic")]
mod bert;
mod endpoint;
pub mod store;

use std::path::Path;
#[cfg(test)]
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::terms;
use crate::config::SearchConfig;
use crate::observe::metrics::SEARCH_TOOL_EMBEDDINGS;
use crate::registry::FederatedTool;
pub use store::{Key, VectorStore};

/// Tools embedded per model run (or endpoint request): long enough to use the matrix
/// kernels well, short enough that a query waiting beside the batch is not held up long.
const BATCH: usize = 16;

/// The first wait before an endpoint that did not answer is asked again; it doubles up to
/// [`MAX_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_secs(1);
const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);

/// After a query could not be embedded, queries rank by words alone this long without
/// asking the model again: a slow endpoint costs one search its timeout, not every search.
const QUERY_PAUSE: Duration = Duration::from_secs(10);

/// Why a model could not be loaded or run.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct EmbedError(pub String);

/// What a text is to a retrieval model: a query, or a document to be found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Query = 0,
    Document = 1,
}

/// A sentence-embedding model: texts to unit-length vectors.
pub trait Embedder: Send + Sync {
    /// The length of every vector.
    fn dimension(&self) -> usize;
    /// One vector per text, in order.
    fn embed(
        self: Arc<Self>,
        texts: Vec<String>,
        role: Role,
    ) -> BoxFuture<'static, Result<Vec<Vec<f32>>, EmbedError>>;
}

/// A tool as the model reads it, and the hash that keys its vector.
#[derive(Debug, Clone)]
pub struct Document {
    pub key: Key,
    pub text: String,
}

impl Document {
    /// `tool`'s name in words, server, title, description and parameters with theirs.
    pub fn of(tool: &FederatedTool) -> Document {
        let definition = &tool.definition;
        let mut text = format!(
            "{} ({})",
            terms::words(&tool.original).join(" "),
            tool.server
        );
        let title = definition
            .title
            .as_deref()
            .or_else(|| definition.annotations.as_ref()?.title.as_deref());
        for part in [title, definition.description.as_deref()]
            .into_iter()
            .flatten()
        {
            text.push_str(". ");
            text.push_str(part.trim());
        }
        if let Some(Value::Object(properties)) = definition.input_schema.get("properties") {
            text.push_str(". Parameters:");
            for (name, property) in properties {
                text.push(' ');
                text.push_str(&terms::words(name).join(" "));
                if let Some(about) = property.get("description").and_then(Value::as_str) {
                    text.push_str(" (");
                    text.push_str(about.trim());
                    text.push(')');
                }
            }
        }
        Document {
            key: Sha256::digest(text.as_bytes()).into(),
            text,
        }
    }
}

/// The model and its vectors, once loaded.
struct Loaded {
    model: Arc<dyn Embedder>,
    store: VectorStore,
}

/// Where the background task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The model is being read, or its endpoint asked for the first time.
    Loading,
    Ready,
    /// The model failed (an endpoint that did not answer, a batch it could not embed):
    /// asked again after a wait, ranking lexical meanwhile for the tools without a vector.
    Unreachable,
    /// The model could not be loaded: ranking stays lexical.
    Failed,
}

/// The task's state, and how many documents asked for it has not gone through yet.
type Progress = (State, usize);

/// Why a model is not loaded, and whether asking again may help (an endpoint that is
/// down may come up; a model folder that does not load will not).
struct Unloaded {
    error: EmbedError,
    retry: bool,
}

/// Loads a model and its vectors; called again after a wait while it fails with `retry`.
type Loading = Box<dyn Fn() -> BoxFuture<'static, Result<Loaded, Unloaded>> + Send + Sync>;

/// The model, its vectors, and the task that makes them.
pub struct Semantic {
    loaded: OnceLock<Loaded>,
    /// Put before query texts, and before document texts.
    prefixes: [String; 2],
    queue: mpsc::UnboundedSender<Vec<Document>>,
    progress: watch::Sender<Progress>,
    /// Until when queries skip the model, after one failed.
    query_pause: Mutex<Option<Instant>>,
}

impl Semantic {
    /// Starts loading `config`'s model (a folder, or an endpoint) in the background, if it
    /// names one; the task then embeds what [`Semantic::want`] asks for until `shutdown`.
    pub fn start(config: &SearchConfig, shutdown: CancellationToken) -> Option<Arc<Semantic>> {
        let vectors_dir = config.vectors_dir();
        let loading: Loading = if let Some(model) = config.model.clone() {
            let prefix = config.document_prefix.clone();
            Box::new(move || {
                let (model, vectors_dir, prefix) =
                    (model.clone(), vectors_dir.clone(), prefix.clone());
                Box::pin(async move {
                    tokio::task::spawn_blocking(move || load(&model, &vectors_dir, &prefix))
                        .await
                        .map_err(|e| EmbedError(e.to_string()))
                        .and_then(|loaded| loaded)
                        .map_err(|error| Unloaded {
                            error,
                            retry: false,
                        })
                })
            })
        } else if config.embeddings_url.is_some() {
            let config = config.clone();
            Box::new(move || {
                let (config, vectors_dir) = (config.clone(), vectors_dir.clone());
                Box::pin(async move {
                    let (endpoint, identity) =
                        endpoint::EmbeddingsEndpoint::connect(&config, PROBE)
                            .await
                            .map_err(|error| Unloaded { error, retry: true })?;
                    let path = store::path_in(&vectors_dir, &identity);
                    let dimension = endpoint.dimension();
                    let store =
                        tokio::task::spawn_blocking(move || VectorStore::open(&path, dimension))
                            .await
                            .map_err(|e| Unloaded {
                                error: EmbedError(e.to_string()),
                                retry: false,
                            })?;
                    Ok(Loaded {
                        model: Arc::new(endpoint),
                        store,
                    })
                })
            })
        } else {
            return None;
        };
        let prefixes = [config.query_prefix.clone(), config.document_prefix.clone()];
        Some(Semantic::spawn(loading, prefixes, shutdown))
    }

    /// `embedder`, its vectors kept at `path`: for tests of what is embedded when.
    #[cfg(test)]
    pub fn with_model(embedder: Arc<dyn Embedder>, path: PathBuf) -> Arc<Semantic> {
        let loading: Loading = Box::new(move || {
            let (embedder, path) = (embedder.clone(), path.clone());
            Box::pin(async move {
                let store = VectorStore::open(&path, embedder.dimension());
                Ok(Loaded {
                    model: embedder,
                    store,
                })
            })
        });
        Semantic::spawn(loading, Default::default(), CancellationToken::new())
    }

    fn spawn(
        loading: Loading,
        prefixes: [String; 2],
        shutdown: CancellationToken,
    ) -> Arc<Semantic> {
        let (queue, jobs) = mpsc::unbounded_channel();
        let semantic = Arc::new(Semantic {
            loaded: OnceLock::new(),
            prefixes,
            queue,
            progress: watch::Sender::new((State::Loading, 0)),
            query_pause: Mutex::new(None),
        });
        tokio::spawn(semantic.clone().run(loading, jobs, shutdown));
        semantic
    }

    /// Asks for the vectors of `documents` that are not made yet; returns at once.
    pub fn want(&self, documents: Vec<Document>) {
        let count = documents.len();
        self.progress.send_modify(|(_, pending)| *pending += count);
        // Sent while loading too: the task takes them up once loaded.
        let _ = self.queue.send(documents);
    }

    /// The vectors of `keys`, in order, when every one is made.
    pub fn vectors(&self, keys: &[Key]) -> Option<Vec<Arc<[f32]>>> {
        let store = &self.loaded.get()?.store;
        keys.iter().map(|key| store.get(key)).collect()
    }

    /// The vectors of a query ([`query_texts`]: as written, and with its particulars
    /// masked when it has some), when the model is loaded and answers (an endpoint within
    /// its timeout); none otherwise, and the search ranks by words.
    pub async fn embed_query(&self, query: &str) -> Vec<Vec<f32>> {
        let Some(loaded) = self.loaded.get() else {
            return Vec::new();
        };
        let paused = *self.query_pause.lock().unwrap_or_else(|p| p.into_inner());
        if paused.is_some_and(|until| Instant::now() < until) {
            return Vec::new();
        }
        let prefix = &self.prefixes[Role::Query as usize];
        let texts = query_texts(query)
            .into_iter()
            .map(|text| format!("{prefix}{text}"))
            .collect();
        match loaded.model.clone().embed(texts, Role::Query).await {
            Ok(vectors) => vectors,
            Err(e) => {
                tracing::warn!(
                    "search query not embedded, searches rank by words only for {} s: {e}",
                    QUERY_PAUSE.as_secs()
                );
                *self.query_pause.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(Instant::now() + QUERY_PAUSE);
                Vec::new()
            }
        }
    }

    /// Resolves once the model failed or is unreachable, or is loaded with nothing left to
    /// embed.
    pub async fn settled(&self) {
        let mut progress = self.progress.subscribe();
        let _ = progress
            .wait_for(|&(state, pending)| match state {
                State::Loading => false,
                State::Ready => pending == 0,
                State::Unreachable | State::Failed => true,
            })
            .await;
    }

    /// Loads the model (asking an endpoint again while it does not answer), then embeds
    /// each job's documents that have no vector yet; a batch the model failed is tried
    /// again after a wait.
    async fn run(
        self: Arc<Self>,
        loading: Loading,
        mut jobs: mpsc::UnboundedReceiver<Vec<Document>>,
        shutdown: CancellationToken,
    ) {
        let mut wait = FIRST_RETRY_WAIT;
        let loaded = loop {
            let attempt = tokio::select! {
                () = shutdown.cancelled() => return,
                attempt = loading() => attempt,
            };
            match attempt {
                Ok(loaded) => break loaded,
                Err(Unloaded {
                    error,
                    retry: false,
                }) => {
                    tracing::error!(
                        "the search model is not loaded, ranking by words only: {error}"
                    );
                    self.set_state(State::Failed);
                    return;
                }
                Err(Unloaded { error, .. }) => {
                    tracing::warn!(
                        "the embeddings endpoint does not answer, ranking by words only; asking \
                         again in {} s: {error}",
                        wait.as_secs()
                    );
                    self.set_state(State::Unreachable);
                    if !pause(&mut wait, &shutdown).await {
                        return;
                    }
                }
            }
        };
        let model = loaded.model.clone();
        let _ = self.loaded.set(loaded);
        self.set_state(State::Ready);
        let mut wait = FIRST_RETRY_WAIT;
        loop {
            let documents = tokio::select! {
                () = shutdown.cancelled() => return,
                job = jobs.recv() => match job {
                    Some(documents) => documents,
                    None => return,
                },
            };
            let count = documents.len();
            let left = self.embed_missing(&model, documents, &shutdown).await;
            if left.is_empty() {
                wait = FIRST_RETRY_WAIT;
                self.set_state(State::Ready);
            } else {
                tracing::warn!(
                    "{} tools not embedded, ranked by words only; trying again in {} s",
                    left.len(),
                    wait.as_secs()
                );
                self.set_state(State::Unreachable);
                if !pause(&mut wait, &shutdown).await {
                    return;
                }
                self.want(left);
            }
            self.progress
                .send_modify(|(_, pending)| *pending = pending.saturating_sub(count));
        }
    }

    fn set_state(&self, to: State) {
        self.progress.send_if_modified(|(state, _)| {
            let changed = *state != to;
            *state = to;
            changed
        });
    }

    /// Embeds the documents without a vector, [`BATCH`] at a time, shortest first (less
    /// padding); returns those of the first batch that failed and after.
    async fn embed_missing(
        &self,
        model: &Arc<dyn Embedder>,
        mut documents: Vec<Document>,
        shutdown: &CancellationToken,
    ) -> Vec<Document> {
        let Some(loaded) = self.loaded.get() else {
            return Vec::new();
        };
        documents.sort_by_key(|d| d.key);
        documents.dedup_by(|a, b| a.key == b.key);
        documents.retain(|d| loaded.store.get(&d.key).is_none());
        documents.sort_by_key(|d| d.text.len());
        let prefix = &self.prefixes[Role::Document as usize];
        for (index, batch) in documents.chunks(BATCH).enumerate() {
            if shutdown.is_cancelled() {
                return Vec::new();
            }
            let texts = batch
                .iter()
                .map(|d| format!("{prefix}{}", d.text))
                .collect();
            match model.clone().embed(texts, Role::Document).await {
                Ok(vectors) => {
                    let made: Vec<(Key, Vec<f32>)> =
                        batch.iter().map(|d| d.key).zip(vectors).collect();
                    SEARCH_TOOL_EMBEDDINGS.inc_by(made.len() as u64);
                    loaded.store.insert(made);
                }
                Err(e) => {
                    tracing::warn!("tools not embedded: {e}");
                    return documents.split_off(index * BATCH);
                }
            }
        }
        Vec::new()
    }
}

/// The texts a query is embedded as: as written, and, when it names particulars, with
/// them masked — a file name becomes "a file", a number "a number", a capitalised name
/// after the first word "something". An agent writes the task with its arguments in it
/// ("link Frank to Globex as an employee", "stage README.md"); a tool describes the task
/// alone, and a small model reads "Frank" or "README" as meaning. Each tool is then ranked
/// by the closer of the two.
pub fn query_texts(query: &str) -> Vec<String> {
    let masked: Vec<String> = query
        .split_whitespace()
        .enumerate()
        .map(|(index, token)| {
            let core = token.trim_matches(|c: char| !c.is_alphanumeric());
            match particular(core, index == 0) {
                Some(mask) => token.replacen(core, mask, 1),
                None => token.to_owned(),
            }
        })
        .collect();
    let masked = masked.join(" ");
    if masked == query.split_whitespace().collect::<Vec<_>>().join(" ") {
        vec![query.to_owned()]
    } else {
        vec![query.to_owned(), masked]
    }
}

/// What a word of a query stands for when it is a particular rather than part of the
/// task: see [`query_texts`].
fn particular(word: &str, first: bool) -> Option<&'static str> {
    let initial = word.chars().next()?;
    let file = word.rsplit_once('.').is_some_and(|(name, extension)| {
        !name.is_empty() && extension.starts_with(|c: char| c.is_alphabetic())
    });
    if file {
        Some("a file")
    } else if initial.is_ascii_digit() {
        Some("a number")
    } else if !first && initial.is_uppercase() && word.chars().any(char::is_lowercase) {
        Some("something")
    } else {
        None
    }
}

/// Waits `wait` (or until `shutdown`: then false), and doubles it up to [`MAX_RETRY_WAIT`].
async fn pause(wait: &mut Duration, shutdown: &CancellationToken) -> bool {
    let waited = tokio::select! {
        () = shutdown.cancelled() => false,
        () = tokio::time::sleep(*wait) => true,
    };
    *wait = (*wait * 2).min(MAX_RETRY_WAIT);
    waited
}

/// The text of the first request to an endpoint, which tells the vectors' width.
const PROBE: &str = "search_tools: find the tools for a task";

/// Loads the model folder `dir` and its vectors file in `vectors_dir`.
fn load(dir: &Path, vectors_dir: &Path, document_prefix: &str) -> Result<Loaded, EmbedError> {
    let model = load_model(dir)?;
    let path = store::path_in(vectors_dir, &identity(dir, document_prefix)?);
    let store = VectorStore::open(&path, model.dimension());
    Ok(Loaded { model, store })
}

#[cfg(feature = "semantic")]
fn load_model(dir: &Path) -> Result<Arc<dyn Embedder>, EmbedError> {
    Ok(Arc::new(bert::Bert::load(dir)?))
}

#[cfg(not(feature = "semantic"))]
fn load_model(_dir: &Path) -> Result<Arc<dyn Embedder>, EmbedError> {
    Err(EmbedError(crate::config::search::UNSUPPORTED.into()))
}

/// What names a model's vectors: its configuration, its tokenizer, the size of its weights,
/// how [`Document`]s are written and cut, and the prefix put before them. A new model, or
/// a new version of the document format, starts a new vectors file.
fn identity(dir: &Path, document_prefix: &str) -> Result<String, EmbedError> {
    /// Changed whenever [`Document::of`] or the model's input length changes.
    const FORMAT: &[u8] = b"document v1, 128 tokens";
    let mut hash = Sha256::new();
    hash.update(FORMAT);
    for file in ["config.json", "tokenizer.json"] {
        let bytes = std::fs::read(dir.join(file))
            .map_err(|e| EmbedError(format!("{}: {e}", dir.join(file).display())))?;
        hash.update(Sha256::digest(&bytes));
    }
    let weights = std::fs::metadata(dir.join("model.safetensors"))
        .map_err(|e| EmbedError(format!("model.safetensors: {e}")))?;
    hash.update(weights.len().to_le_bytes());
    if !document_prefix.is_empty() {
        hash.update(document_prefix.as_bytes());
    }
    // Vectors pooled by the mean (the only pooling once) keep their name.
    #[cfg(feature = "semantic")]
    if bert::Pooling::of(dir)? == bert::Pooling::Cls {
        hash.update(b"first-token pooling");
    }
    let digest = hash.finalize();
    Ok(digest[..8].iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Texts as counts of their letters, at unit length; counts the texts it embedded.
    #[derive(Default)]
    pub(crate) struct Letters {
        pub embedded: AtomicUsize,
    }

    impl Embedder for Letters {
        fn dimension(&self) -> usize {
            26
        }

        fn embed(
            self: Arc<Self>,
            texts: Vec<String>,
            _role: Role,
        ) -> BoxFuture<'static, Result<Vec<Vec<f32>>, EmbedError>> {
            self.embedded.fetch_add(texts.len(), Ordering::SeqCst);
            let vectors = texts.iter().map(|text| letters(text)).collect();
            Box::pin(async move { Ok(vectors) })
        }
    }

    pub(crate) fn letters(text: &str) -> Vec<f32> {
        let mut vector = [0f32; 26];
        for c in text.bytes().filter(u8::is_ascii_lowercase) {
            vector[usize::from(c - b'a')] += 1.0;
        }
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        vector.iter().map(|x| x / norm).collect()
    }

    fn document(text: &str) -> Document {
        Document {
            key: Sha256::digest(text.as_bytes()).into(),
            text: text.to_owned(),
        }
    }

    #[tokio::test]
    async fn only_new_documents_are_embedded_and_a_restart_reads_them_from_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.vectors");
        let model = Arc::new(Letters::default());
        let semantic = Semantic::with_model(model.clone(), path.clone());
        semantic.want(vec![document("abc"), document("def"), document("abc")]);
        semantic.settled().await;
        assert_eq!(model.embedded.load(Ordering::SeqCst), 2);
        semantic.want(vec![document("abc"), document("xyz")]);
        semantic.settled().await;
        assert_eq!(model.embedded.load(Ordering::SeqCst), 3, "only xyz");
        let keys = [document("xyz").key, document("abc").key];
        let vectors = semantic.vectors(&keys).unwrap();
        assert_eq!(&*vectors[0], &letters("xyz")[..]);
        assert!(semantic.vectors(&[document("new").key]).is_none());

        let again = Arc::new(Letters::default());
        let restarted = Semantic::with_model(again.clone(), path);
        restarted.want(vec![document("abc"), document("def"), document("xyz")]);
        restarted.settled().await;
        assert_eq!(again.embedded.load(Ordering::SeqCst), 0);
        assert_eq!(restarted.embed_query("xyz").await, [letters("xyz")]);
    }

    /// [`Letters`] behind a switch: while it is off, every call fails, as an endpoint
    /// that is down does.
    struct Flaky {
        up: std::sync::atomic::AtomicBool,
        letters: Arc<Letters>,
    }

    impl Embedder for Flaky {
        fn dimension(&self) -> usize {
            26
        }

        fn embed(
            self: Arc<Self>,
            texts: Vec<String>,
            role: Role,
        ) -> BoxFuture<'static, Result<Vec<Vec<f32>>, EmbedError>> {
            if self.up.load(Ordering::SeqCst) {
                self.letters.clone().embed(texts, role)
            } else {
                Box::pin(async { Err(EmbedError("connection refused".into())) })
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_batch_is_embedded_on_a_later_try_and_failed_queries_pause() {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(Flaky {
            up: false.into(),
            letters: Arc::default(),
        });
        let semantic = Semantic::with_model(model.clone(), dir.path().join("v"));
        semantic.want(vec![document("abc"), document("def")]);
        semantic.settled().await;
        assert_eq!(semantic.progress.borrow().0, State::Unreachable);
        assert!(semantic.vectors(&[document("abc").key]).is_none());
        assert!(semantic.embed_query("abc").await.is_empty(), "words alone");
        model.up.store(true, Ordering::SeqCst);
        assert!(
            semantic.embed_query("abc").await.is_empty(),
            "queries pause after a failure"
        );
        tokio::time::sleep(QUERY_PAUSE).await;
        assert_eq!(semantic.embed_query("abc").await, [letters("abc")]);
        let mut progress = semantic.progress.subscribe();
        progress
            .wait_for(|&(state, pending)| state == State::Ready && pending == 0)
            .await
            .unwrap();
        let keys = [document("abc").key, document("def").key];
        assert_eq!(semantic.vectors(&keys).unwrap().len(), 2);
        assert_eq!(
            model.letters.embedded.load(Ordering::SeqCst),
            3,
            "2 tools, 1 query"
        );
    }

    #[tokio::test]
    async fn a_model_that_does_not_load_leaves_search_lexical() {
        let config = SearchConfig {
            model: Some("/nonexistent".into()),
            ..SearchConfig::default()
        };
        let semantic = Semantic::start(&config, CancellationToken::new()).unwrap();
        semantic.want(vec![document("abc")]);
        semantic.settled().await;
        assert!(semantic.embed_query("abc").await.is_empty());
        assert!(semantic.vectors(&[]).is_none());
    }

    #[test]
    fn queries_are_also_read_with_their_particulars_masked() {
        assert_eq!(
            query_texts("show the commit history"),
            ["show the commit history"]
        );
        assert_eq!(
            query_texts("Link Frank to Globex, then stage README.md and 3 files"),
            [
                "Link Frank to Globex, then stage README.md and 3 files",
                "Link something to something, then stage a file and a number files"
            ]
        );
        assert_eq!(
            query_texts("what time is it in UTC"),
            ["what time is it in UTC"]
        );
        assert_eq!(query_texts("rename v2. to ."), ["rename v2. to ."]);
    }

    #[test]
    fn documents_name_the_tool_its_words_and_parameters() {
        let tool = rmcp::model::Tool::new(
            "git_diff_unstaged",
            "Shows changes in the working directory that are not yet staged",
            Arc::new(
                serde_json::json!({"type": "object", "properties": {
                    "repoPath": {"type": "string", "description": "The repository"}}})
                .as_object()
                .cloned()
                .unwrap(),
            ),
        );
        let config = crate::config::ServerConfig::stdio("x".into(), Vec::new(), Default::default());
        let tool = FederatedTool::new(
            "mcp__git__git_diff_unstaged",
            &Arc::from("git"),
            &config,
            &crate::upstream::offer::Listed::of_view(tool),
        );
        let document = Document::of(&tool);
        assert_eq!(
            document.text,
            "git diff unstaged (git). Shows changes in the working directory that are not yet \
             staged. Parameters: repo path (The repository)"
        );
        assert_eq!(document.key, Document::of(&tool).key);
    }
}
