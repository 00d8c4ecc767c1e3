//! One way to change what rmcp's service loop reads from an upstream's transport: a
//! [`Decorated`] transport sends and closes as the transport it wraps, and reads through
//! its [`Decoration`], which is the one thing each decorator is about: holding
//! notifications to a bound (`notifications_in_flight`), taking progress off in order
//! (`progress_in_order`), adding what a lane passed on (`streamable_http::lane`).
//!
//! Adding a decorator: a type implementing [`Decoration`], and wrapping the transport
//! with it where the connection is made (`kind::guarded` for every kind).

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// What a decorator does with what its transport reads.
pub trait Decoration: Send + 'static {
    /// The next message for rmcp's service loop, read from `inner` (once, several times,
    /// or not at all); `None` when the connection is over. Cancel-safe when `inner`'s
    /// `receive` is and nothing read is held across an await.
    fn receive<T: Transport<RoleClient>>(
        &mut self,
        inner: &mut T,
    ) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send;
}

/// The transport `inner`, read through `decoration`.
pub struct Decorated<T, D> {
    inner: T,
    decoration: D,
}

impl<T, D> Decorated<T, D> {
    pub fn new(inner: T, decoration: D) -> Self {
        Self { inner, decoration }
    }
}

impl<T: Transport<RoleClient>, D: Decoration> Transport<RoleClient> for Decorated<T, D> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.decoration.receive(&mut self.inner)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
