//! `[search]`: semantic tool search. With a sentence-embedding model named here,
//! `search_tools` ranks by meaning as well as by words (`crate::registry::search::semantic`);
//! without one, by words alone.
//!
//! ```toml
//! [search]
//! model = "/usr/share/mcp-gateway/all-MiniLM-L6-v2"
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `[search]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchConfig {
    /// A sentence-transformers model folder (`config.json`, `tokenizer.json`,
    /// `model.safetensors`: a BERT such as all-MiniLM-L6-v2), relative to the
    /// configuration file. Read in the background at start, like an upstream's command: a
    /// folder that does not load is logged, and ranking stays lexical. Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
    /// Where tool vectors are kept across restarts, one file per model. Default: the
    /// user's cache folder (`$XDG_CACHE_HOME/mcp-gateway/tool-vectors`, else
    /// `~/.cache/mcp-gateway/tool-vectors`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vectors_dir: Option<PathBuf>,
}

impl SearchConfig {
    /// Makes the paths absolute from `base` (the configuration file's folder) and checks
    /// that this build can use a model.
    pub(super) fn resolve(&mut self, base: &Path) -> Result<(), (String, String)> {
        if let Some(dir) = &mut self.vectors_dir {
            *dir = base.join(&*dir);
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
}
