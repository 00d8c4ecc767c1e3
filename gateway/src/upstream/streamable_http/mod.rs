//! A streamable HTTP upstream: rmcp's client over the gateway's own HTTP client (signed
//! in where the server's entry has `[servers.NAME.oauth]`, traced: [`traced_http`]), with
//! the connection's tool calls posted on the [`lane`] beside it. The client's layers are
//! stacked here, in [`StreamableHttp::open`] and [`serve`] (see `crate::http_client::McpHttp`).

pub mod lane;
mod traced_http;

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};

use self::lane::{HttpLane, Inbound, SessionSlot};
use self::traced_http::TracedHttp;
use super::call_lane::CallLane;
use super::client::UpstreamClient;
use super::decorated::Decorated;
use super::kind::{ConnectError, Kind, Opened, Opening, guarded, header_map};
use super::rmcp_errors::worded;
use crate::auth::{
    self,
    signed_in::{AuthorizedClientError, SignedInClient},
    upstream::OAuthUpstream,
};
use crate::http_client::{HttpError, McpHttp, RmcpHttp, UpstreamHttp};
use crate::relay::CallRoutes;

/// The kind of a server at a `url` with `transport = "streamable-http"` (the default).
pub(super) struct StreamableHttp<'a> {
    pub url: &'a str,
    pub headers: &'a BTreeMap<String, String>,
}

impl Kind for StreamableHttp<'_> {
    async fn open(&self, opening: Opening<'_>) -> Result<Opened, ConnectError> {
        let Opening {
            name,
            config,
            user,
            handler,
            lifecycle,
            calls,
            signed_out,
            ..
        } = opening;
        let transport_config = StreamableHttpClientTransportConfig::with_uri(self.url)
            .custom_headers(header_map(self.headers)?);
        let http: Arc<dyn McpHttp> =
            Arc::new(UpstreamHttp::new().map_err(|e| ConnectError::Transport(e.to_string()))?);
        let http = match &config.oauth {
            Some(settings) => {
                let dir = auth::store::default_dir()
                    .map_err(|error| ConnectError::OAuth(error.to_string()))?;
                let upstream = match user {
                    Some(user) => OAuthUpstream::for_identity(
                        name,
                        self.url,
                        settings,
                        &dir,
                        user.shared.as_ref(),
                        &user.identity,
                        user.sealer.clone(),
                    ),
                    None => OAuthUpstream::new(name, self.url, settings, &dir),
                };
                let client = SignedInClient::open(&upstream, http, signed_out.clone())
                    .await
                    .map_err(|error| match error {
                        AuthorizedClientError::NeedsLogin => ConnectError::NeedsLogin {
                            server: name.to_string(),
                        },
                        AuthorizedClientError::OAuth(error) => {
                            ConnectError::OAuth(error.to_string())
                        }
                    })?;
                Arc::new(client)
            }
            None => http,
        };
        let (service, lane) = serve(handler, http, transport_config, lifecycle, calls).await;
        if signed_out.is_cancelled() {
            return Err(ConnectError::NeedsLogin {
                server: name.to_string(),
            });
        }
        Ok(Opened {
            service: service.map_err(|error| start_failed(error, self.url))?,
            lane: CallLane::Http(Arc::new(lane)),
            group: None,
        })
    }
}

/// Why a streamable HTTP server's opening exchange failed. One that never reached the
/// server says so plainly, and the same whichever way the gateway opened
/// (`server/discover` or `initialize`): rmcp's wording names the transport and the
/// request, which tells an operator nothing more.
fn start_failed(error: ClientInitializeError, url: &str) -> ConnectError {
    if let ClientInitializeError::TransportError { error: sent, .. } = &error
        && let Some(http) = sent.error.downcast_ref::<StreamableHttpError<HttpError>>()
        && let Some(reason) = lane::why_unreachable(http)
    {
        return ConnectError::Unreachable {
            url: crate::redact::urls(url),
            reason,
        };
    }
    ConnectError::Initialize(worded(&error))
}

/// Serves `handler` over streamable HTTP with `client` (traced here), and the
/// [`HttpLane`] beside it.
async fn serve(
    handler: UpstreamClient,
    client: Arc<dyn McpHttp>,
    config: StreamableHttpClientTransportConfig,
    lifecycle: ClientLifecycleMode,
    calls: &CallRoutes,
) -> (
    Result<RunningService<RoleClient, UpstreamClient>, ClientInitializeError>,
    HttpLane,
) {
    let session = SessionSlot::default();
    let client: Arc<dyn McpHttp> = Arc::new(TracedHttp::new(client, session.clone()));
    let lane_config = config.clone();
    let transport = StreamableHttpClientTransport::with_client(RmcpHttp(client.clone()), config);
    let (passed_on, inbound) = Inbound::new();
    let transport = Decorated::new(transport, passed_on);
    let lane = HttpLane::new(client, &lane_config, session, &inbound);
    let service = handler
        .serve_with_lifecycle(guarded(transport, calls), lifecycle)
        .await;
    (service, lane)
}
