//! Who is at the browser that opens a per-user sign-in.
//!
//! A sign-in link is shown to one person's client, but any browser can open it: a
//! colleague's it was forwarded to, or one a page of another site sent there. Were the
//! browser's own session at the authorization server enough, that other person's account
//! would be stored under the identity the link was shown to (the cross-app account
//! takeover MCP's URL elicitation warns of). So before the authorization server is
//! reached, the gateway's sign-in page makes the browser prove that it is the person the
//! sign-in was started for, in the way that person's identity allows ([`Proof`]):
//!
//! - a caller named by a static token (`token:…`) types that token into the page;
//! - a caller named by the identity provider of `[listen.oauth]` (`subject:…`) signs in
//!   there (`super::idp_login`), and its subject must be the caller's;
//! - the local user of a gateway over stdio (`local:…`) opens the page on loopback from a
//!   connection that user owns (the kernel's socket table says whose it is).
//!
//! A browser that has proved it gets a cookie bound to the sign-in's `state` (the page is
//! the only place that sets it), which the callback requires: a callback from any other
//! browser stores nothing. The cookie's secret is kept only as its SHA-256, in the
//! sign-in's sealed record.

use std::net::SocketAddr;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The cookie of the browser that proved to be the person of the sign-in of `state`.
/// One per sign-in, so a person with two in progress keeps both.
pub fn cookie_name(state: &str) -> String {
    format!("mcp_gateway_sign_in_{}", &digest(state)[..16])
}

/// A new cookie secret: 256 random bits, hex.
pub fn new_secret() -> String {
    let mut random = [0u8; 32];
    aws_lc_rs::rand::fill(&mut random).expect("the system's random source");
    hex(&random)
}

/// The SHA-256 of `text`, hex.
pub fn digest(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

/// Whether `secret` is the one whose digest is `proved`, compared in constant time.
pub fn matches(proved: &str, secret: &str) -> bool {
    digest(secret).as_bytes().ct_eq(proved.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// How the person of an identity proves it at a browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// By typing the static token they call with.
    Token,
    /// By signing in at the gateway's identity provider as the same subject.
    IdentityProvider,
    /// By opening the page on loopback as the same local user.
    LocalUser,
}

impl Proof {
    /// How `identity` (as callers are named: `token:…`, `subject:…`, `local:…`) proves
    /// itself; `None` for an identity no person at a browser can be.
    pub fn of(identity: &str) -> Option<Self> {
        match identity.split_once(':')?.0 {
            "token" => Some(Self::Token),
            "subject" => Some(Self::IdentityProvider),
            "local" => Some(Self::LocalUser),
            _ => None,
        }
    }
}

/// The user id owning the TCP connection from `peer` to `local`, both on loopback, as the
/// kernel's socket table (`/proc/net/tcp`, `tcp6`) has it; `None` when it is no loopback
/// connection of this machine's or cannot be read.
pub fn loopback_peer_uid(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    if !peer.ip().is_loopback() && !is_mapped_loopback(peer) {
        return None;
    }
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .find_map(|table| uid_in_table(&table, peer, local))
}

fn is_mapped_loopback(address: SocketAddr) -> bool {
    match address.ip() {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        std::net::IpAddr::V4(_) => false,
    }
}

/// The uid of the row of `table` whose own end is `peer` and whose other end is `local`:
/// the socket of the process that connected.
fn uid_in_table(table: &str, peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    table.lines().skip(1).find_map(|row| {
        let columns: Vec<&str> = row.split_whitespace().collect();
        let (own, other, uid) = (columns.get(1)?, columns.get(2)?, columns.get(7)?);
        (same_end(own, peer) && same_end(other, local))
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// Whether the table's `ADDR:PORT` (hex, the address in the kernel's byte order) is
/// `address`.
fn same_end(column: &str, address: SocketAddr) -> bool {
    let Some((ip, port)) = column.split_once(':') else {
        return false;
    };
    if u16::from_str_radix(port, 16).ok() != Some(address.port()) {
        return false;
    }
    let words: Option<Vec<u32>> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16).ok())
        .collect();
    let Some(words) = words else {
        return false;
    };
    // Each 32-bit word is printed as the host's integer of the bytes in network order.
    let bytes: Vec<u8> = words.iter().flat_map(|word| word.to_ne_bytes()).collect();
    match (bytes.len(), address.ip()) {
        (4, std::net::IpAddr::V4(v4)) => bytes == v4.octets(),
        (16, std::net::IpAddr::V6(v6)) => bytes == v6.octets(),
        (16, std::net::IpAddr::V4(v4)) => bytes == v4.to_ipv6_mapped().octets(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_identity_kind_has_its_proof_and_machines_none() {
        assert_eq!(Proof::of("token:0a1b"), Some(Proof::Token));
        assert_eq!(Proof::of("subject:alice"), Some(Proof::IdentityProvider));
        assert_eq!(Proof::of("local:alice"), Some(Proof::LocalUser));
        assert_eq!(Proof::of("client:robot"), None);
        assert_eq!(Proof::of("alice"), None);
    }

    #[test]
    fn a_secret_matches_its_digest_alone() {
        let secret = new_secret();
        assert_eq!(secret.len(), 64);
        let proved = digest(&secret);
        assert!(matches(&proved, &secret));
        assert!(!matches(&proved, &new_secret()));
        assert!(!matches(&proved, ""));
        assert_ne!(cookie_name("a"), cookie_name("b"));
    }

    #[test]
    fn the_socket_table_names_the_user_of_the_connecting_end() {
        // 127.0.0.1:40000 → 127.0.0.1:8765 owned by uid 1000, and the listener's own row.
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:223D 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n\
           1: 0100007F:9C40 0100007F:223D 01 00000000:00000000 00:00000000 00000000  1000        0 2 1\n";
        let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:8765".parse().unwrap();
        assert_eq!(uid_in_table(table, peer, local), Some(1000));
        let other: SocketAddr = "127.0.0.1:40001".parse().unwrap();
        assert_eq!(uid_in_table(table, other, local), None);
    }

    #[test]
    fn a_real_loopback_connection_is_this_processs_user() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(local).unwrap();
        let peer = client.local_addr().unwrap();
        let _accepted = listener.accept().unwrap();
        let uid = unsafe { libc::geteuid() };
        assert_eq!(loopback_peer_uid(peer, local), Some(uid));
        let remote: SocketAddr = "10.0.0.1:40000".parse().unwrap();
        assert_eq!(loopback_peer_uid(remote, local), None);
    }
}
