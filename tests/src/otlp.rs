//! A real OTLP/HTTP trace receiver in the test process: a small HTTP/1.1 server on a
//! loopback port that decodes every `POST /v1/traces` (protobuf, as the gateway's
//! exporter sends it) and keeps the spans, so a test can check the tree the gateway
//! exported.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;

/// One exported span, flattened for assertions (ids in lowercase hex, as in W3C
/// `traceparent`).
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    pub service: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    pub attributes: BTreeMap<String, String>,
    /// Whether the span's status is an error.
    pub failed: bool,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// The receiver; its threads end with the test process.
pub struct OtlpReceiver {
    address: SocketAddr,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
}

impl OtlpReceiver {
    pub fn start() -> OtlpReceiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let collected = spans.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let collected = collected.clone();
                std::thread::spawn(move || serve(stream, &collected));
            }
        });
        OtlpReceiver { address, spans }
    }

    /// The base URL for `[telemetry] otlp_endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap().clone()
    }
}

/// Answers the requests of one keep-alive connection until the client closes it.
fn serve(stream: TcpStream, spans: &Mutex<Vec<ReceivedSpan>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let status = if request_line.starts_with("POST /v1/traces ") {
            match ExportTraceServiceRequest::decode(body.as_slice()) {
                Ok(export) => {
                    spans.lock().unwrap().extend(flatten(export));
                    "200 OK"
                }
                Err(_) => "400 Bad Request",
            }
        } else {
            "404 Not Found"
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn flatten(export: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut spans = Vec::new();
    for resource_spans in export.resource_spans {
        let service = resource_spans
            .resource
            .as_ref()
            .and_then(|r| attributes(&r.attributes).remove("service.name"))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push(ReceivedSpan {
                    service: service.clone(),
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name,
                    attributes: attributes(&span.attributes),
                    // STATUS_CODE_ERROR = 2
                    failed: span.status.is_some_and(|s| s.code == 2),
                });
            }
        }
    }
    spans
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(s)) => s.clone(),
                Some(AnyValue::IntValue(i)) => i.to_string(),
                Some(AnyValue::BoolValue(b)) => b.to_string(),
                Some(AnyValue::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
