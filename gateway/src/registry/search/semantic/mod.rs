//! Semantic ranking: tools and queries as sentence-embedding vectors, compared by cosine
//! similarity. BM25 finds a tool when the query shares its words; an agent asks "is
//! anything still waiting to be committed" of a tool that "shows the working tree
//! status". A sentence-embedding model (`[search] model`, a folder such as
//! all-MiniLM-L6-v2's, run in process by [`bert`]) places both near each other.
//!
//! Cost stays off the request path: each tool's [`Document`] is embedded once, keyed by
//! its hash ([`store`], kept on disk), by a background task fed with every new catalog
//! ([`Semantic::want`]); start-up and list changes never wait for the model, a changed
//! tool is the only one embedded again, and until every tool of an index has its vector
//! the index ranks lexically. A query costs one short model run.

#[cfg(feature = "semantic")]
mod bert;
pub mod store;

use std::path::Path;
#[cfg(test)]
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::terms;
use crate::config::SearchConfig;
use crate::observe::metrics::SEARCH_TOOL_EMBEDDINGS;
use crate::registry::FederatedTool;
pub use store::{Key, VectorStore};

/// Tools embedded per model run: long enough to use the matrix kernels well, short
/// enough that a query waiting beside the batch is not held up long.
const BATCH: usize = 16;

/// Why a model could not be loaded or run.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct EmbedError(pub String);

/// A sentence-embedding model: texts to unit-length vectors.
pub trait Embedder: Send + Sync {
    /// The length of every vector.
    fn dimension(&self) -> usize;
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
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
    /// The model is being read.
    Loading,
    Ready,
    /// The model could not be loaded: ranking stays lexical.
    Failed,
}

/// The task's state, and how many documents asked for it has not gone through yet.
type Progress = (State, usize);

/// Loads a model and its vectors (on a blocking thread).
type Loading = Box<dyn FnOnce() -> Result<Loaded, EmbedError> + Send>;

/// The model, its vectors, and the task that makes them.
pub struct Semantic {
    loaded: OnceLock<Loaded>,
    queue: mpsc::UnboundedSender<Vec<Document>>,
    progress: watch::Sender<Progress>,
}

impl Semantic {
    /// Starts loading `config`'s model in the background, if it names one; the task then
    /// embeds what [`Semantic::want`] asks for until `shutdown`.
    pub fn start(config: &SearchConfig, shutdown: CancellationToken) -> Option<Arc<Semantic>> {
        let model = config.model.clone()?;
        let vectors_dir = config.vectors_dir();
        Some(Semantic::spawn(
            Box::new(move || load(&model, &vectors_dir)),
            shutdown,
        ))
    }

    /// `embedder`, its vectors kept at `path`: for tests of what is embedded when.
    #[cfg(test)]
    pub fn with_model(embedder: Arc<dyn Embedder>, path: PathBuf) -> Arc<Semantic> {
        let loading = move || {
            let store = VectorStore::open(&path, embedder.dimension());
            Ok(Loaded {
                model: embedder,
                store,
            })
        };
        Semantic::spawn(Box::new(loading), CancellationToken::new())
    }

    fn spawn(loading: Loading, shutdown: CancellationToken) -> Arc<Semantic> {
        let (queue, jobs) = mpsc::unbounded_channel();
        let semantic = Arc::new(Semantic {
            loaded: OnceLock::new(),
            queue,
            progress: watch::Sender::new((State::Loading, 0)),
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

    /// The vector of a query, when the model is loaded; a model run of a few
    /// milliseconds, so callers on the async runtime use [`Semantic::embed_query_async`].
    pub fn embed_query(&self, query: &str) -> Option<Vec<f32>> {
        let model = &self.loaded.get()?.model;
        match model.embed(&[query]) {
            Ok(mut vectors) => vectors.pop(),
            Err(e) => {
                tracing::warn!("search query not embedded, ranking by words only: {e}");
                None
            }
        }
    }

    /// [`Semantic::embed_query`] on a blocking thread.
    pub async fn embed_query_async(self: &Arc<Self>, query: &str) -> Option<Vec<f32>> {
        let (semantic, query) = (self.clone(), query.to_owned());
        tokio::task::spawn_blocking(move || semantic.embed_query(&query))
            .await
            .ok()
            .flatten()
    }

    /// Resolves once the model failed, or is loaded with nothing left to embed.
    pub async fn settled(&self) {
        let mut progress = self.progress.subscribe();
        let _ = progress
            .wait_for(|&(state, pending)| {
                state == State::Failed || (state == State::Ready && pending == 0)
            })
            .await;
    }

    /// Loads the model, then embeds each job's documents that have no vector yet.
    async fn run(
        self: Arc<Self>,
        loading: Loading,
        mut jobs: mpsc::UnboundedReceiver<Vec<Document>>,
        shutdown: CancellationToken,
    ) {
        let loaded = tokio::task::spawn_blocking(loading)
            .await
            .map_err(|e| EmbedError(e.to_string()))
            .and_then(|loaded| loaded);
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(e) => {
                tracing::error!("the search model is not loaded, ranking by words only: {e}");
                self.progress
                    .send_modify(|(state, _)| *state = State::Failed);
                return;
            }
        };
        let model = loaded.model.clone();
        let _ = self.loaded.set(loaded);
        self.progress
            .send_modify(|(state, _)| *state = State::Ready);
        loop {
            let documents = tokio::select! {
                () = shutdown.cancelled() => return,
                job = jobs.recv() => match job {
                    Some(documents) => documents,
                    None => return,
                },
            };
            let count = documents.len();
            self.embed_missing(&model, documents, &shutdown).await;
            self.progress
                .send_modify(|(_, pending)| *pending = pending.saturating_sub(count));
        }
    }

    /// Embeds the documents without a vector, [`BATCH`] at a time, shortest first (less
    /// padding), each batch on a blocking thread.
    async fn embed_missing(
        &self,
        model: &Arc<dyn Embedder>,
        mut documents: Vec<Document>,
        shutdown: &CancellationToken,
    ) {
        let Some(loaded) = self.loaded.get() else {
            return;
        };
        documents.sort_by_key(|d| d.key);
        documents.dedup_by(|a, b| a.key == b.key);
        documents.retain(|d| loaded.store.get(&d.key).is_none());
        documents.sort_by_key(|d| d.text.len());
        for batch in documents.chunks(BATCH) {
            if shutdown.is_cancelled() {
                return;
            }
            let (model, batch) = (model.clone(), batch.to_vec());
            let made = tokio::task::spawn_blocking(move || {
                let texts: Vec<&str> = batch.iter().map(|d| d.text.as_str()).collect();
                let vectors = model.embed(&texts)?;
                Ok::<_, EmbedError>(batch.into_iter().map(|d| d.key).zip(vectors).collect())
            })
            .await;
            match made {
                Ok(Ok(made)) => {
                    let made: Vec<(Key, Vec<f32>)> = made;
                    SEARCH_TOOL_EMBEDDINGS.inc_by(made.len() as u64);
                    loaded.store.insert(made);
                }
                Ok(Err(e)) => tracing::warn!("tools not embedded, ranked by words only: {e}"),
                Err(e) => tracing::warn!("tools not embedded: {e}"),
            }
        }
    }
}

/// Loads the model folder `dir` and its vectors file in `vectors_dir`.
fn load(dir: &Path, vectors_dir: &Path) -> Result<Loaded, EmbedError> {
    let model = load_model(dir)?;
    let path = store::path_in(vectors_dir, &identity(dir)?);
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

/// What names a model's vectors: its configuration, its tokenizer, the size of its weights
/// and how [`Document`]s are written and cut. A new model, or a new version of the
/// document format, starts a new vectors file.
fn identity(dir: &Path) -> Result<String, EmbedError> {
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

        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.embedded.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|text| letters(text)).collect())
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
        assert_eq!(restarted.embed_query("xyz").unwrap(), letters("xyz"));
    }

    #[tokio::test]
    async fn a_model_that_does_not_load_leaves_search_lexical() {
        let config = SearchConfig {
            model: Some("/nonexistent".into()),
            vectors_dir: None,
        };
        let semantic = Semantic::start(&config, CancellationToken::new()).unwrap();
        semantic.want(vec![document("abc")]);
        semantic.settled().await;
        assert!(semantic.embed_query("abc").is_none());
        assert!(semantic.vectors(&[]).is_none());
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
            &tool,
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
