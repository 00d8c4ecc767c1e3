//! The listener's service behind the security guard: the drain's check, then each
//! streamable HTTP path (`/mcp`, `/mcp/{profile}`, with or without the trailing slash)
//! straight to its endpoint, and every other path through axum's router.
//!
//! Nearly every request is a `POST /mcp`, and axum's router costs each one a clone of a
//! boxed service, a boxed middleware future and the wrappers of its route: 2–7% of the
//! gateway's CPU for a forwarded call (docs/performance.md). An exact match on the path
//! costs a lookup.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use futures::future::{BoxFuture, Either, FutureExt};
use http::{Request, Response};
use tower::Service;

use super::draining;
use crate::gateway::drain::Drain;
use crate::server::transport::streamable_http::StreamableHttp;

/// See the module documentation.
#[derive(Clone)]
pub struct Dispatch {
    drain: Arc<Drain>,
    /// The streamable HTTP endpoints by their exact paths.
    endpoints: Arc<HashMap<String, StreamableHttp>>,
    /// Every other path.
    rest: Router,
}

impl Dispatch {
    /// `default` serves `/mcp`, each of `profiles` `/mcp/{name}`.
    pub fn new(
        drain: Arc<Drain>,
        default: StreamableHttp,
        profiles: impl IntoIterator<Item = (String, StreamableHttp)>,
        rest: Router,
    ) -> Self {
        let mut endpoints = HashMap::new();
        let served = std::iter::once(("/mcp".to_owned(), default)).chain(
            profiles
                .into_iter()
                .map(|(name, endpoint)| (format!("/mcp/{name}"), endpoint)),
        );
        for (path, endpoint) in served {
            endpoints.insert(format!("{path}/"), endpoint.clone());
            endpoints.insert(path, endpoint);
        }
        Self {
            drain,
            endpoints: Arc::new(endpoints),
            rest,
        }
    }
}

type RouterFuture = <Router as Service<Request<Body>>>::Future;

impl Service<Request<Body>> for Dispatch {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Either<BoxFuture<'static, Result<Response<Body>, Infallible>>, RouterFuture>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Service::<Request<Body>>::poll_ready(&mut self.rest, cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if let Some(refused) = draining::refused(&self.drain, &request) {
            return Either::Left(std::future::ready(Ok(refused)).boxed());
        }
        match self.endpoints.get(request.uri().path()) {
            Some(endpoint) => {
                let endpoint = endpoint.clone();
                Either::Left(
                    StreamableHttp::handle(State(endpoint), request)
                        .map(Ok)
                        .boxed(),
                )
            }
            None => Either::Right(self.rest.call(request)),
        }
    }
}
