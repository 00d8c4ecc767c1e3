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

/// The files a model folder must hold.
const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// `[search]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchConfig {
    /// A sentence-transformers model folder ([`MODEL_FILES`]: a BERT such as
    /// all-MiniLM-L6-v2), relative to the configuration file. Default: none (lexical
    /// ranking only).
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
    /// that this build can use a model and the folder holds one.
    pub(super) fn resolve(&mut self, base: &Path) -> Result<(), (String, String)> {
        if let Some(dir) = &mut self.vectors_dir {
            *dir = base.join(&*dir);
        }
        let Some(model) = &mut self.model else {
            return Ok(());
        };
        *model = base.join(&*model);
        let key = || "search.model".to_owned();
        if !cfg!(feature = "semantic") {
            return Err((key(), UNSUPPORTED.into()));
        }
        if let Some(missing) = MODEL_FILES.iter().find(|f| !model.join(f).is_file()) {
            return Err((
                key(),
                format!("{}: no {missing} in the model folder", model.display()),
            ));
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
