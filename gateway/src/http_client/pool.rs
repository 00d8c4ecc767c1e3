//! HTTP/1.1 connections to upstreams, each driven by the task that uses it.
//!
//! hyper's pooled client spawns a task per connection: a request goes to it over a
//! channel, and the response head and every chunk of the body come back over another,
//! each with a wake-up of the task waiting for it. Here the task that sends a request
//! drives the connection itself while it waits for the response, and whoever reads the
//! body drives it on until the body ends ([`DrivenBody`]); the connection then goes back
//! to the pool for the next request. No task of our own, no channel crossed.
//!
//! A connection taken from the pool may have been closed by the server while it sat
//! idle: a request it never sent goes out again on a new connection, as hyper's pooled
//! client does. A body dropped before its end closes its connection (HTTP/1.1 cannot
//! abandon a response and reuse the connection).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Request, Response, Uri};
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1;
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use tower::ServiceExt;

use super::{HttpError, QuickAck, QuickAckConnector};

/// How long an idle connection is kept (hyper's pooled client keeps them 90 s).
const IDLE_FOR: Duration = Duration::from_secs(90);

/// Idle connections kept per origin; more go away as they come back.
const IDLE_PER_ORIGIN: usize = 64;

type Stream = MaybeHttpsStream<QuickAck>;

/// What reads and writes a connection's socket, as a future polled by its users.
type Driver = Pin<Box<http1::Connection<Stream, Full<Bytes>>>>;

/// Where connections go: a scheme and an authority.
type Origin = (Scheme, Authority);

/// See the module documentation. Cheap to clone: clones share the idle connections.
#[derive(Clone)]
pub struct Pool(Arc<Shared>);

struct Shared {
    connector: HttpsConnector<QuickAckConnector>,
    idle: Mutex<HashMap<Origin, Vec<Connection>>>,
}

/// One HTTP/1.1 connection: the side requests go in by, and the state machine that
/// reads and writes the socket, polled by whoever waits on it.
struct Connection {
    sender: http1::SendRequest<Full<Bytes>>,
    /// `None` once it finished: the connection is closed, and a request sent on it now
    /// comes back unsent.
    driver: Option<Driver>,
    /// Since when it has been idle in the pool.
    idle_since: Instant,
}

impl Connection {
    /// Lets the connection read and write what it can; drops it once it has closed.
    fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(driver) = &mut self.driver
            && driver.as_mut().poll(cx).is_ready()
        {
            self.driver = None;
        }
    }

    fn is_open(&self) -> bool {
        self.driver.is_some() && !self.sender.is_closed()
    }
}

/// A connection out of the pool, and where it goes back.
struct Lease {
    connection: Connection,
    origin: Origin,
    pool: Weak<Shared>,
}

impl Lease {
    fn release(self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.put_back(self.origin, self.connection);
        }
    }
}

impl Pool {
    pub fn new(connector: HttpsConnector<QuickAckConnector>) -> Self {
        Self(Arc::new(Shared {
            connector,
            idle: Mutex::default(),
        }))
    }

    /// Sends `request` (its URI absolute) and waits for the response head; the body,
    /// read, drives the connection on.
    pub async fn send(
        &self,
        mut request: Request<Full<Bytes>>,
    ) -> Result<Response<DrivenBody>, HttpError> {
        let origin = origin_form(&mut request)?;
        loop {
            let (mut lease, reused) = match self.0.take_idle(&origin) {
                Some(connection) => (self.lease(connection, &origin), true),
                None => (self.connect(&origin).await?, false),
            };
            match exchange(&mut lease.connection, request).await {
                Ok(response) => {
                    return Ok(response.map(|body| DrivenBody {
                        body,
                        lease: Some(lease),
                    }));
                }
                Err(mut failed) => match failed.take_message() {
                    // A connection that closed while idle never sent it: try a new one.
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(failed.into_error().into()),
                },
            }
        }
    }

    fn lease(&self, connection: Connection, origin: &Origin) -> Lease {
        Lease {
            connection,
            origin: origin.clone(),
            pool: Arc::downgrade(&self.0),
        }
    }

    async fn connect(&self, origin: &Origin) -> Result<Lease, HttpError> {
        let uri = Uri::builder()
            .scheme(origin.0.clone())
            .authority(origin.1.clone())
            .path_and_query("/")
            .build()?;
        let stream = self
            .0
            .connector
            .clone()
            .oneshot(uri)
            .await
            .map_err(HttpError::Connect)?;
        let (sender, driver) = http1::handshake(stream).await?;
        let connection = Connection {
            sender,
            driver: Some(Box::pin(driver)),
            idle_since: Instant::now(),
        };
        Ok(self.lease(connection, origin))
    }
}

impl Shared {
    /// The most recently used idle connection to `origin` that is still open; the ones
    /// idle too long go.
    fn take_idle(&self, origin: &Origin) -> Option<Connection> {
        // One reading of the clock for every idle connection, outside the lock.
        let now = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let connections = idle.get_mut(origin)?;
        connections.retain(|c| c.is_open() && now.duration_since(c.idle_since) < IDLE_FOR);
        connections.pop()
    }

    fn put_back(&self, origin: Origin, mut connection: Connection) {
        if !connection.is_open() {
            return;
        }
        connection.idle_since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let connections = idle.entry(origin).or_default();
        if connections.len() < IDLE_PER_ORIGIN {
            connections.push(connection);
        }
    }
}

/// Sends `request` on `connection` and drives it until the response head has come.
async fn exchange(
    connection: &mut Connection,
    request: Request<Full<Bytes>>,
) -> Result<Response<Incoming>, hyper::client::conn::TrySendError<Request<Full<Bytes>>>> {
    // An idle connection reads what came while it waited (a close, most often) first.
    std::future::poll_fn(|cx| {
        connection.drive(cx);
        // Closed: the request below comes back unsent.
        match connection.sender.poll_ready(cx) {
            Poll::Pending if connection.driver.is_some() => Poll::Pending,
            _ => Poll::Ready(()),
        }
    })
    .await;
    let mut response = std::pin::pin!(connection.sender.try_send_request(request));
    std::future::poll_fn(|cx| {
        connection.drive(cx);
        response.as_mut().poll(cx)
    })
    .await
}

/// Makes `request`'s absolute URI the origin-form HTTP/1.1 sends, with its `Host`
/// header; returns where it goes.
fn origin_form(request: &mut Request<Full<Bytes>>) -> Result<Origin, HttpError> {
    let uri = request.uri();
    let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
        return Err(HttpError::Connect(
            format!("{uri} is not an absolute http(s) URL").into(),
        ));
    };
    let origin = (scheme.clone(), authority.clone());
    let host = match authority.port() {
        Some(port) => format!("{}:{port}", authority.host()),
        None => authority.host().to_owned(),
    };
    let path = uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    *request.uri_mut() = Uri::from(path);
    request
        .headers_mut()
        .entry(http::header::HOST)
        .or_insert(HeaderValue::try_from(host).map_err(http::Error::from)?);
    Ok(origin)
}

/// A response body that drives its connection while it is read, and gives the
/// connection back to the pool once it has ended.
pub struct DrivenBody {
    body: Incoming,
    lease: Option<Lease>,
}

impl DrivenBody {
    /// Gives the connection back: the body has ended (`ended`: it said so, which a
    /// chunked body says only by ending), so the connection is free for another request.
    fn release(&mut self, ended: bool) {
        if (ended || self.body.is_end_stream())
            && let Some(lease) = self.lease.take()
        {
            lease.release();
        }
    }
}

impl Body for DrivenBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if let Some(lease) = &mut self.lease {
            lease.connection.drive(cx);
        }
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(frame, Poll::Ready(None)) {
            self.release(true);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for DrivenBody {
    fn drop(&mut self) {
        // A body left unread closes its connection with the lease.
        self.release(false);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http::Method;
    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use tokio::sync::{mpsc, watch};

    use super::super::UpstreamHttp;
    use super::*;

    /// A server on a free port answering every request `ok` in chunks (as an SSE
    /// stream comes, whose end only the last chunk tells), counting the connections it
    /// accepted.
    struct Server {
        url: String,
        accepted: Arc<AtomicUsize>,
        closing: watch::Sender<bool>,
        closed: mpsc::UnboundedReceiver<()>,
    }

    impl Server {
        async fn start() -> Server {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/mcp", listener.local_addr().unwrap());
            let accepted = Arc::new(AtomicUsize::new(0));
            let (closing, told) = watch::channel(false);
            let (report, closed) = mpsc::unbounded_channel();
            let counted = accepted.clone();
            tokio::spawn(async move {
                loop {
                    let (socket, _) = listener.accept().await.unwrap();
                    counted.fetch_add(1, Ordering::SeqCst);
                    let (mut told, report) = (told.clone(), report.clone());
                    tokio::spawn(async move {
                        tokio::select! {
                            () = answer(socket) => {}
                            _ = told.wait_for(|closing| *closing) => {
                                let _ = report.send(());
                            }
                        }
                    });
                }
            });
            Server {
                url,
                accepted,
                closing,
                closed,
            }
        }

        /// Closes the open connections without a word, as a server whose idle
        /// connections time out does, once they are closed.
        async fn close_connections(&mut self) {
            self.closing.send_replace(true);
            self.closed.recv().await.unwrap();
            self.closing.send_replace(false);
        }

        fn connections(&self) -> usize {
            self.accepted.load(Ordering::SeqCst)
        }
    }

    async fn answer(mut socket: tokio::net::TcpStream) {
        let mut read = Vec::new();
        let mut buffer = [0u8; 4096];
        while let Ok(n @ 1..) = socket.read(&mut buffer).await {
            read.extend_from_slice(&buffer[..n]);
            while let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                read.drain(..end + 4);
                let answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                               2\r\nok\r\n0\r\n\r\n";
                socket.write_all(answer).await.unwrap();
            }
        }
    }

    async fn get(client: &UpstreamHttp, url: &str) -> String {
        let request = Request::builder()
            .method(Method::GET)
            .uri(url)
            .body(Full::default())
            .unwrap();
        let response = client.send(request).await.expect("an answer");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8_lossy(&body).into_owned()
    }

    #[tokio::test]
    async fn requests_one_after_another_share_one_connection() {
        let server = Server::start().await;
        let client = UpstreamHttp::new().unwrap();
        for _ in 0..3 {
            assert_eq!(get(&client, &server.url).await, "ok");
        }
        assert_eq!(server.connections(), 1);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_while_idle_is_replaced_unnoticed() {
        let mut server = Server::start().await;
        let client = UpstreamHttp::new().unwrap();
        assert_eq!(get(&client, &server.url).await, "ok");
        server.close_connections().await;
        let again = tokio::time::timeout(Duration::from_secs(30), get(&client, &server.url));
        assert_eq!(again.await.expect("an answer, not a hang"), "ok");
        assert_eq!(server.connections(), 2);
    }

    #[tokio::test]
    async fn a_body_dropped_unread_closes_its_connection() {
        let server = Server::start().await;
        let client = UpstreamHttp::new().unwrap();
        let request = Request::builder()
            .uri(&server.url)
            .body(Full::default())
            .unwrap();
        drop(client.send(request).await.expect("an answer"));
        assert_eq!(get(&client, &server.url).await, "ok");
        assert_eq!(server.connections(), 2);
    }
}
