//! The floor of a stdio hop on this machine: two relays of kv that do only what any stdio
//! proxy must, measured in the forwarding group against the same baselines as the gateway.
//!
//! - [`BARE`]: two blocking threads copy lines and nothing else, the least any stdio hop
//!   costs.
//! - [`ASYNC`]: a tokio relay with its stdin and stdout on the reactor as the gateway's
//!   are (`server::transport::stdio::streams`), which reads each message as JSON-RPC,
//!   renames a `tools/call`'s tool from `mcp__kv__x` to `x`, and writes it again: the
//!   least a gateway built on tokio and JSON does per call, before any pipeline.
//!
//! And the floor of a streamable HTTP hop in Rust, beside HAProxy's:
//!
//! - [`HTTP`]: hyper's HTTP/1.1 server in front of hyper's pooled client (hyper-util's),
//!   on one tokio worker thread as the gateway runs, which reads each POST's body as a
//!   JSON-RPC message, renames a `tools/call`'s tool as [`ASYNC`] does, and sends it on
//!   with the client's headers; the answer comes back as it came. What a Rust HTTP hop
//!   that reads its requests costs, before sessions, checks and the pipeline.
//!
//! The bench executable becomes a relay when its first argument names one; the rest is
//! the relayed program (for [`HTTP`]: the address to listen on and the upstream's URL).

use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::process::Stdio;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};

pub const BARE: &str = "--bare-relay";
pub const ASYNC: &str = "--async-relay";
pub const HTTP: &str = "--http-relay";

/// Runs the relay `args[0]` names over the program in the rest and exits; returns when
/// `args[0]` names none.
pub fn run_if_named(args: &[OsString]) {
    let Some((first, program)) = args.split_first() else {
        return;
    };
    if first == BARE {
        bare(program);
    } else if first == ASYNC {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(relay_async(program));
    } else if first == HTTP {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (listen, upstream) = (&program[0], &program[1]);
        let upstream: hyper::Uri = upstream.to_str().unwrap().parse().unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(listen.to_str().unwrap()))
            .unwrap();
        runtime
            .block_on(runtime.spawn(relay_http(listener, upstream)))
            .unwrap();
    } else {
        return;
    }
    std::process::exit(0)
}

fn bare(program: &[OsString]) {
    let mut child = std::process::Command::new(&program[0])
        .args(&program[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the relayed program");
    let copy = |from: &mut dyn BufRead, to: &mut dyn Write| {
        let mut line = Vec::new();
        while from.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            if to.write_all(&line).and_then(|()| to.flush()).is_err() {
                break;
            }
            line.clear();
        }
    };
    let mut to_child = child.stdin.take().unwrap();
    let mut from_child = std::io::BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || copy(&mut from_child, &mut std::io::stdout().lock()));
    copy(&mut std::io::stdin().lock(), &mut to_child);
    drop(to_child);
    let _ = child.wait();
}

async fn relay_async(program: &[OsString]) {
    let mut child = tokio::process::Command::new(&program[0])
        .args(&program[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the relayed program");
    let (stdin, stdout) = mcp_gateway::server::transport::stdio::streams();
    let to_child = child.stdin.take().unwrap();
    let from_child = child.stdout.take().unwrap();
    let answers = tokio::spawn(copy_messages(BufReader::new(from_child), stdout));
    copy_messages(BufReader::new(stdin), to_child).await;
    answers.abort();
}

/// hyper's pooled HTTP/1.1 client.
type PooledClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

/// Serves HTTP/1.1 on `listener`, each POST's body rewritten and sent on to `upstream`.
async fn relay_http(listener: tokio::net::TcpListener, upstream: hyper::Uri) {
    let client: Arc<PooledClient> = Arc::new(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http(),
    );
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        let (client, upstream) = (client.clone(), upstream.clone());
        let forward = service_fn(move |request: Request<Incoming>| {
            forward_http(client.clone(), upstream.clone(), request)
        });
        tokio::spawn(
            hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), forward),
        );
    }
}

async fn forward_http(
    client: Arc<PooledClient>,
    upstream: hyper::Uri,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Box<dyn std::error::Error + Send + Sync>> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await?.to_bytes();
    let body = match rewritten(&body) {
        Some(message) => Bytes::from(message),
        None => body,
    };
    let mut out = Request::builder().method(parts.method).uri(upstream);
    for (name, value) in &parts.headers {
        if name != header::HOST && name != header::CONTENT_LENGTH {
            out = out.header(name, value);
        }
    }
    let (parts, body) = client
        .request(out.body(Full::new(body))?)
        .await?
        .into_parts();
    let body = body.collect().await?.to_bytes();
    let mut back = Response::builder().status(parts.status);
    for (name, value) in &parts.headers {
        if name != header::CONTENT_LENGTH && name != header::TRANSFER_ENCODING {
            back = back.header(name, value);
        }
    }
    Ok(back.body(Full::new(body))?)
}

/// Copies JSON-RPC messages, one per line, each read and written again.
async fn copy_messages(
    mut from: impl tokio::io::AsyncBufRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
) {
    let mut line = Vec::new();
    while from.read_until(b'\n', &mut line).await.is_ok_and(|n| n > 0) {
        let Some(mut message) = rewritten(&line) else {
            break;
        };
        message.push(b'\n');
        if to.write_all(&message).await.is_err() || to.flush().await.is_err() {
            break;
        }
        line.clear();
    }
}

/// A JSON-RPC message with its parts kept as raw JSON, as a relay sees it.
#[derive(Deserialize, Serialize)]
struct Message<'a> {
    jsonrpc: &'a str,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    id: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    params: Option<&'a RawValue>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    result: Option<&'a RawValue>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize, Serialize)]
struct CallParams<'a> {
    name: &'a str,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<&'a RawValue>,
}

/// `line` read as a message and written again, a `tools/call` with its tool renamed;
/// `None` when it is no JSON-RPC message.
fn rewritten(line: &[u8]) -> Option<Vec<u8>> {
    let message: Message = serde_json::from_slice(line).ok()?;
    let call = match (message.method, message.params) {
        (Some("tools/call"), Some(params)) => serde_json::from_str::<CallParams>(params.get()).ok(),
        _ => None,
    };
    let Some(mut call) = call else {
        return serde_json::to_vec(&message).ok();
    };
    call.name = call.name.strip_prefix("mcp__kv__").unwrap_or(call.name);
    let params = serde_json::value::to_raw_value(&call).ok()?;
    serde_json::to_vec(&Message {
        params: Some(&params),
        ..message
    })
    .ok()
}
