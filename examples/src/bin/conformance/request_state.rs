//! Sealed `requestState`: the opaque string a 2026-07-28 server hands out with an
//! `InputRequiredResult` and gets back, verbatim, with the client's retry.
//!
//! The server remembers nothing between rounds (any instance may serve the retry), so what
//! it must remember travels in the state, and the client could alter it. A sealed state is
//! the JSON it carries, a dot, and the hex HMAC-SHA256 of that JSON under a key drawn once
//! per process: a state that was altered, or sealed by another process, does not open.
//! (rmcp has the same idea as `RequestStateCodec` behind its `request-state` feature; that
//! feature needs the `hmac` crate, which this build does not have, and would change rmcp's
//! features for the whole workspace, so the few lines of HMAC are written out here.)

use serde_json::Value;
use sha2::{Digest, Sha256};

/// SHA-256's block size: the HMAC key is padded to it.
const BLOCK: usize = 64;

/// Seals states for clients to carry and opens the ones they bring back.
pub struct Sealer {
    key: [u8; BLOCK],
}

impl Sealer {
    /// A sealer with a fresh random 256-bit key.
    pub fn new() -> Self {
        let mut key = [0; BLOCK];
        key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key[16..32].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        Self { key }
    }

    pub fn seal(&self, state: &Value) -> String {
        let json = state.to_string();
        let tag = hex(&self.tag(json.as_bytes()));
        format!("{json}.{tag}")
    }

    /// The state inside `sealed`, or `None` when it was not sealed by this sealer as is.
    pub fn open(&self, sealed: &str) -> Option<Value> {
        let (json, tag) = sealed.rsplit_once('.')?;
        let expected = hex(&self.tag(json.as_bytes()));
        same_bytes(expected.as_bytes(), tag.as_bytes())
            .then(|| serde_json::from_str(json).ok())
            .flatten()
    }

    /// HMAC-SHA256 (RFC 2104) of `message`.
    fn tag(&self, message: &[u8]) -> [u8; 32] {
        let padded = |pad: u8| self.key.map(|byte| byte ^ pad);
        let inner = Sha256::new()
            .chain_update(padded(0x36))
            .chain_update(message)
            .finalize();
        Sha256::new()
            .chain_update(padded(0x5c))
            .chain_update(inner)
            .finalize()
            .into()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Compares in time that depends on the length only, so a forger learns nothing from timing.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_sealed_state_opens_as_it_was() {
        let sealer = Sealer::new();
        let state = json!({"round": 2, "name": "Alice. Or Bob."});
        assert_eq!(sealer.open(&sealer.seal(&state)), Some(state));
    }

    #[test]
    fn an_altered_or_foreign_state_does_not_open() {
        let sealer = Sealer::new();
        let sealed = sealer.seal(&json!({"round": 1}));
        assert_eq!(sealer.open(&format!("{sealed}-TAMPERED")), None);
        assert_eq!(sealer.open(&sealed.replace('1', "2")), None);
        assert_eq!(sealer.open("{\"round\":1}"), None);
        assert_eq!(Sealer::new().open(&sealed), None);
    }

    /// RFC 4231, test case 2: the HMAC is the standard one.
    #[test]
    fn the_tag_is_hmac_sha256() {
        let mut sealer = Sealer::new();
        sealer.key = [0; BLOCK];
        sealer.key[..4].copy_from_slice(b"Jefe");
        assert_eq!(
            hex(&sealer.tag(b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
