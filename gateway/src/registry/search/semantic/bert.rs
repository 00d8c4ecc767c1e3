//! A sentence-transformers BERT (all-MiniLM-L6-v2 and its kind) run in process with
//! candle: the text is tokenized (`tokenizer.json`, by the `tokenizers` crate), run
//! through the model (`model.safetensors`, `config.json`), and its token vectors pooled
//! into one and scaled to unit length, so a dot product of two vectors is their cosine
//! similarity. The pooling is the folder's own (`1_Pooling/config.json`): the mean over
//! the real tokens (all-MiniLM-L6-v2, gte, e5), or the first token's vector (bge,
//! arctic-embed); the mean when the folder does not say.

use std::path::Path;
use std::sync::Arc;

use candle_core::{D, DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use futures::future::BoxFuture;
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

use super::{EmbedError, Embedder, Role};

/// Tokens of a text the model reads; the rest is cut. A tool's name, description and
/// parameters rarely need more, and the cost grows with the square of the length.
const MAX_TOKENS: usize = 128;

/// A loaded model.
pub struct Bert {
    model: BertModel,
    tokenizer: Tokenizer,
    dimension: usize,
    pooling: Pooling,
}

/// How a text's token vectors become one.
#[derive(Debug, PartialEq)]
pub(super) enum Pooling {
    /// Their mean over the real tokens (padding left out).
    Mean,
    /// The vector of the first token (`[CLS]`).
    Cls,
}

/// The modes of sentence-transformers' `1_Pooling/config.json` that matter here.
#[derive(serde::Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
}

impl Pooling {
    /// The pooling `dir` asks for: the mean unless its `1_Pooling/config.json` asks for
    /// exactly the first token; any other mode (max, several at once) is refused rather
    /// than read wrongly.
    pub(super) fn of(dir: &Path) -> Result<Pooling, EmbedError> {
        let path = dir.join("1_Pooling").join("config.json");
        let Ok(text) = std::fs::read(&path) else {
            return Ok(Pooling::Mean);
        };
        let config: PoolingConfig = serde_json::from_slice(&text)
            .map_err(|e| EmbedError(format!("{}: {e}", path.display())))?;
        match (
            config.pooling_mode_mean_tokens,
            config.pooling_mode_cls_token,
        ) {
            (true, false) => Ok(Pooling::Mean),
            (false, true) => Ok(Pooling::Cls),
            _ => Err(EmbedError(format!(
                "{}: only the mean of the tokens or the first token's vector is supported",
                path.display()
            ))),
        }
    }
}

impl Bert {
    /// Loads the model folder `dir` (`config.json`, `tokenizer.json`, `model.safetensors`).
    pub fn load(dir: &Path) -> Result<Bert, EmbedError> {
        let read = |file: &str| {
            std::fs::read(dir.join(file))
                .map_err(|e| EmbedError(format!("{}: {e}", dir.join(file).display())))
        };
        let config: Config = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| EmbedError(format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| EmbedError(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams::default()));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| EmbedError(format!("tokenizer.json: {e}")))?;
        let weights = VarBuilder::from_buffered_safetensors(
            read("model.safetensors")?,
            DType::F32,
            &Device::Cpu,
        )
        .map_err(|e| EmbedError(format!("model.safetensors: {e}")))?;
        let model = BertModel::load(weights, &config)
            .map_err(|e| EmbedError(format!("model.safetensors: {e}")))?;
        Ok(Bert {
            model,
            tokenizer,
            dimension: config.hidden_size,
            pooling: Pooling::of(dir)?,
        })
    }

    fn forward(&self, texts: &[&str]) -> candle_core::Result<Vec<Vec<f32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(candle_core::Error::wrap)?;
        let rows = |part: fn(&tokenizers::Encoding) -> &[u32]| -> candle_core::Result<Tensor> {
            let rows = encodings
                .iter()
                .map(|e| Tensor::new(part(e), &Device::Cpu))
                .collect::<candle_core::Result<Vec<_>>>()?;
            Tensor::stack(&rows, 0)
        };
        let ids = rows(|e| e.get_ids())?;
        let mask = rows(|e| e.get_attention_mask())?;
        let tokens = self.model.forward(&ids, &ids.zeros_like()?, Some(&mask))?;
        let pooled = match self.pooling {
            // Mean over the real tokens (padding masked out).
            Pooling::Mean => {
                let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
                let sum = tokens.broadcast_mul(&mask)?.sum(1)?;
                sum.broadcast_div(&mask.sum(1)?)?
            }
            Pooling::Cls => tokens.narrow(1, 0, 1)?.squeeze(1)?,
        };
        // Unit length.
        let norm = pooled.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?;
        pooled.broadcast_div(&norm)?.to_vec2()
    }
}

impl Embedder for Bert {
    fn dimension(&self) -> usize {
        self.dimension
    }

    /// Runs on a blocking thread: a batch is milliseconds to seconds of CPU. Queries and
    /// documents are read alike (their prefixes, if any, are already on the texts).
    fn embed(
        self: Arc<Self>,
        texts: Vec<String>,
        _role: Role,
    ) -> BoxFuture<'static, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            if texts.is_empty() {
                return Ok(Vec::new());
            }
            tokio::task::spawn_blocking(move || {
                let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                self.forward(&texts).map_err(|e| EmbedError(e.to_string()))
            })
            .await
            .map_err(|e| EmbedError(e.to_string()))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Pooling;

    fn folder_with(pooling: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if let Some(config) = pooling {
            std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
            std::fs::write(dir.path().join("1_Pooling/config.json"), config).unwrap();
        }
        dir
    }

    #[test]
    fn the_pooling_is_the_model_folders_own() {
        let mean = r#"{"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true}"#;
        let cls = r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#;
        let max = r#"{"pooling_mode_max_tokens": true}"#;
        assert_eq!(
            Pooling::of(folder_with(None).path()).unwrap(),
            Pooling::Mean
        );
        assert_eq!(
            Pooling::of(folder_with(Some(mean)).path()).unwrap(),
            Pooling::Mean
        );
        assert_eq!(
            Pooling::of(folder_with(Some(cls)).path()).unwrap(),
            Pooling::Cls
        );
        let refused = Pooling::of(folder_with(Some(max)).path()).unwrap_err();
        assert!(refused.0.contains("only the mean"), "{}", refused.0);
    }
}
