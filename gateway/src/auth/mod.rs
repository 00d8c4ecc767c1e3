//! OAuth at the gateway's edges, both ways.
//!
//! Downstream, [`resource`] makes the listener an OAuth protected resource that accepts an
//! identity provider's JWT access tokens, verified with the keys from [`keys`].
//! Upstream, [`upstream`] signs the gateway in to remote servers that want OAuth
//! (`[servers.NAME.oauth]`, [`crate::config::UpstreamOAuth`]), keeping their tokens in
//! [`store`]; an upstream connection sends its requests through [`signed_in`]; [`status`]
//! says where each sign-in stands (`auth status`, `/healthz`). A per-user server signs each
//! caller in as themselves ([`per_user`], with sign-ins in progress in [`pending`], each
//! bound to the person at the browser by [`browser`] and, for callers of the identity
//! provider, [`idp_login`]), or trades each caller's own token for one ([`exchange`]),
//! keeps their tokens sealed ([`sealed`]) and shows them to operators ([`people`]).

pub mod browser;
pub mod exchange;
pub mod idp_login;
pub mod keys;
pub mod pending;
pub mod people;
pub mod per_user;
pub mod resource;
pub mod sealed;
pub mod signed_in;
pub mod status;
pub mod store;
pub mod upstream;
