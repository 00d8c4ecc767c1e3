//! OpenTelemetry traces of the pipeline: one span per tool call, a child span per stage
//! (gate, guards, validation, each around wrapper, dispatch, post-execute, finalize), and
//! for run_code the program's own calls as children of its dispatch.
//!
//! ```toml
//! [telemetry]
//! otlp_endpoint = "http://127.0.0.1:4318"   # OTLP/HTTP (protobuf); traces go to /v1/traces
//! service_name = "mcp-gateway"              # the default
//! ```
//!
//! Without an endpoint nothing is recorded, but the W3C trace context still flows: a
//! `traceparent` that arrives with a call (HTTP header or `_meta`) is passed on to the
//! upstream in `_meta` (and as a header to streamable HTTP upstreams), so a gateway
//! without a collector does not break a trace that others record.
//!
//! Spans are batched and sent from the SDK's own thread; the HTTP request itself runs on
//! the gateway's tokio runtime (see [`TokioHttp`]), so the exporter needs no runtime of
//! its own. The batch delay follows `OTEL_BSP_SCHEDULE_DELAY` (5 s by default), and
//! what is pending is flushed when the gateway stops.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

use crate::config::TelemetryConfig;

/// The W3C header and `_meta` key that carries the trace context.
pub const TRACEPARENT: &str = "traceparent";
/// Vendor trace state that travels with [`TRACEPARENT`].
pub const TRACESTATE: &str = "tracestate";

/// How long one export may take before the batch is dropped.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why tracing could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("telemetry.otlp_endpoint: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// The span attributes every call span carries (names follow OpenTelemetry's MCP and
/// GenAI conventions where they exist).
pub mod attribute {
    pub const METHOD: &str = "mcp.method.name";
    pub const TOOL: &str = "gen_ai.tool.name";
    pub const SERVER: &str = "mcp.server";
    pub const PROFILE: &str = "mcp.profile";
    pub const SESSION: &str = "mcp.session.id";
    /// Who the caller's credentials name (`token:…`, `subject:…`, `client:…`), never a credential.
    pub const IDENTITY: &str = "enduser.id";
    pub const ERROR: &str = "error.type";
    pub const GATE_DECISION: &str = "mcp.gate.decision";
    pub const RUN: &str = "mcp.run_code.run";
}

/// The exporter, owned by the gateway for its lifetime; [`Telemetry::shutdown`] flushes.
#[derive(Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Starts exporting when `config` names an endpoint; must run inside the tokio
    /// runtime that will carry the export requests.
    pub fn start(config: &TelemetryConfig) -> Result<Telemetry, TelemetryError> {
        let Some(endpoint) = &config.otlp_endpoint else {
            return Ok(Telemetry::default());
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(traces_url(endpoint))
            .with_timeout(EXPORT_TIMEOUT)
            .with_http_client(TokioHttp {
                client: reqwest::Client::new(),
                runtime: tokio::runtime::Handle::current(),
            })
            .build()?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(config.service_name.clone())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_resource(resource)
            .with_batch_exporter(exporter)
            .build();
        Ok(Telemetry {
            provider: Some(provider),
        })
    }

    /// What the pipeline starts spans with.
    pub fn tracer(&self) -> Tracer {
        Tracer(
            self.provider
                .as_ref()
                .map(|provider| provider.tracer("mcp-gateway")),
        )
    }

    /// Sends what is pending and stops the exporter. Blocks its thread while it flushes,
    /// so it runs on a blocking thread.
    pub async fn shutdown(&self) {
        let Some(provider) = self.provider.clone() else {
            return;
        };
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(e)) = flushed {
            tracing::warn!("telemetry: final export failed: {e}");
        }
    }
}

/// `<endpoint>/v1/traces`, unless the endpoint already names that path.
fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

/// Starts spans, or does nothing when no exporter is configured (the parent context is
/// handed back unchanged, so the incoming trace context still propagates).
#[derive(Debug, Clone, Default)]
pub struct Tracer(Option<SdkTracer>);

impl Tracer {
    /// A span under `parent`, as the context its children start from. `describe` gives
    /// its name and attributes, and runs only when spans are exported: with tracing off,
    /// a call's path formats no names.
    pub fn start<N: Into<Cow<'static, str>>>(
        &self,
        kind: SpanKind,
        parent: &Context,
        describe: impl FnOnce() -> (N, Vec<KeyValue>),
    ) -> Context {
        match &self.0 {
            None => parent.clone(),
            Some(tracer) => {
                let (name, attributes) = describe();
                let span = tracer
                    .span_builder(name)
                    .with_kind(kind)
                    .with_attributes(attributes)
                    .start_with_context(tracer, parent);
                parent.with_span(span)
            }
        }
    }

    /// A stage span (internal) under `parent`.
    pub fn stage(&self, name: &'static str, parent: &Context) -> Context {
        self.start(SpanKind::Internal, parent, || (name, Vec::new()))
    }
}

/// Records a failure on the span of `cx`: its stable code and an error status.
pub fn record_error(cx: &Context, code: &'static str, message: &str) {
    let span = cx.span();
    span.set_attribute(KeyValue::new(attribute::ERROR, code));
    span.set_status(Status::error(message.to_owned()));
}

/// Ends the span of `cx` now (a span whose context is dropped early ends then).
pub fn end(cx: &Context) {
    cx.span().end();
}

/// The trace context a caller sent (`traceparent`, optionally `tracestate`), or an
/// empty context when there is none or it is malformed.
pub fn extract(traceparent: Option<&str>, tracestate: Option<&str>) -> Context {
    let Some(traceparent) = traceparent else {
        return Context::new();
    };
    let mut carrier = HashMap::new();
    carrier.insert(TRACEPARENT.to_owned(), traceparent.to_owned());
    if let Some(state) = tracestate {
        carrier.insert(TRACESTATE.to_owned(), state.to_owned());
    }
    TraceContextPropagator::new().extract(&carrier)
}

/// The `traceparent` (and `tracestate`, when not empty) that continue `cx`, or nothing
/// when `cx` carries no valid span context.
pub fn inject(cx: &Context) -> Vec<(&'static str, String)> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    [TRACEPARENT, TRACESTATE]
        .into_iter()
        .filter_map(|key| carrier.remove(key).map(|value| (key, value)))
        .filter(|(_, value)| !value.is_empty())
        .collect()
}

/// The exporter's HTTP client: our reqwest, run on the gateway's runtime. The SDK calls
/// it from its own batch thread, which has no tokio reactor; spawning onto the runtime
/// and awaiting the join handle works from any executor.
#[derive(Debug)]
struct TokioHttp {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for TokioHttp {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request.map(reqwest::Body::from))?;
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, body))
        });
        let (status, headers, body) = sent.await??;
        let mut response = Response::builder().status(status).body(body)?;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_passes_through_without_an_exporter() {
        let parent = extract(Some(PARENT), None);
        let stage = Tracer::default().stage("gate", &parent);
        assert_eq!(inject(&stage), vec![(TRACEPARENT, PARENT.to_owned())]);
    }

    #[test]
    fn a_malformed_traceparent_is_no_context() {
        assert!(inject(&extract(Some("00-nonsense"), None)).is_empty());
        assert!(inject(&extract(None, None)).is_empty());
    }

    #[test]
    fn the_traces_path_is_added_once() {
        assert_eq!(
            traces_url("http://c:4318/"),
            "http://c:4318/v1/traces".to_owned()
        );
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces".to_owned()
        );
    }
}
