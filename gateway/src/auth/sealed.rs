//! Per-person tokens encrypted at rest. A per-user server (`per_user = true`) keeps one
//! sign-in per caller identity, and those tokens are worth more together than one
//! operator's: whoever copies the token folder (a backup, a disk image) or reads the Redis
//! of a cluster must get nothing usable. So every such record is sealed with
//! ChaCha20-Poly1305 (aws-lc-rs, the crypto library rustls already uses here), under a key
//! that is never in the configuration file:
//!
//! - `MCP_GATEWAY_TOKEN_KEY`: 64 hex digits (32 bytes), or
//! - `MCP_GATEWAY_TOKEN_KEY_FILE`: a file holding those 64 hex digits (a mounted secret).
//!
//! Replicas of a cluster share the key as they share Redis. The record's place (server and
//! identity) is the additional authenticated data: a sealed record moved under another
//! identity's name does not open, so no one's token can be made to pass for someone
//! else's, even by someone who can write the store.

use aws_lc_rs::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

/// The environment variable holding the key itself.
pub const KEY_VAR: &str = "MCP_GATEWAY_TOKEN_KEY";
/// The environment variable naming a file that holds the key.
pub const KEY_FILE_VAR: &str = "MCP_GATEWAY_TOKEN_KEY_FILE";
/// What a sealed record starts with, so a clear one is never mistaken for it.
const MAGIC: &[u8; 4] = b"MGS1";

/// Why per-user tokens cannot be sealed or opened.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SealError {
    #[error(
        "per-user sign-ins are kept encrypted, and no key is set: put 64 hex digits (32 \
         random bytes, e.g. `openssl rand -hex 32`) in {KEY_VAR}, or in a file named by \
         {KEY_FILE_VAR}"
    )]
    NoKey,
    #[error("the token key ({0}) is not 64 hex digits")]
    BadKey(&'static str),
    #[error("cannot read the token key file: {0}")]
    KeyFile(String),
    #[error("a sealed token record does not open with this key (another key, or altered)")]
    Tampered,
}

impl SealError {
    /// A stable code for logs, health and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoKey => "TOKEN_KEY_MISSING",
            Self::BadKey(_) | Self::KeyFile(_) => "TOKEN_KEY_INVALID",
            Self::Tampered => "TOKEN_RECORD_TAMPERED",
        }
    }
}

/// The key that seals per-user token records.
pub struct Sealer {
    key: LessSafeKey,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(***)")
    }
}

impl Sealer {
    /// The key the environment names ([`KEY_VAR`], else [`KEY_FILE_VAR`]).
    pub fn from_env() -> Result<Self, SealError> {
        if let Ok(hex) = std::env::var(KEY_VAR) {
            return Self::from_hex(&hex, KEY_VAR);
        }
        let Ok(path) = std::env::var(KEY_FILE_VAR) else {
            return Err(SealError::NoKey);
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|error| SealError::KeyFile(format!("{path}: {error}")))?;
        Self::from_hex(&text, KEY_FILE_VAR)
    }

    /// A fixed key, for unit tests.
    #[cfg(test)]
    pub fn for_tests() -> Self {
        Self::from_hex(&"ab".repeat(32), KEY_VAR).unwrap_or_else(|_| unreachable!())
    }

    fn from_hex(text: &str, source: &'static str) -> Result<Self, SealError> {
        let bytes = decode_hex(text.trim()).ok_or(SealError::BadKey(source))?;
        let key =
            UnboundKey::new(&CHACHA20_POLY1305, &bytes).map_err(|_| SealError::BadKey(source))?;
        Ok(Self {
            key: LessSafeKey::new(key),
        })
    }

    /// `clear` sealed for the record at `place`: magic, a random nonce, then the
    /// ciphertext with its tag.
    pub fn seal(&self, place: &str, clear: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        // The system's random source failing is not something to go on from.
        aws_lc_rs::rand::fill(&mut nonce).unwrap_or_else(|_| std::process::abort());
        let mut sealed = clear.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(place.as_bytes()),
                &mut sealed,
            )
            // Only a message past ChaCha20's 256 GiB limit fails.
            .unwrap_or_else(|_| std::process::abort());
        let mut out = Vec::with_capacity(MAGIC.len() + NONCE_LEN + sealed.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// The clear record sealed for `place`, or [`SealError::Tampered`].
    pub fn open(&self, place: &str, sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        let rest = sealed.strip_prefix(MAGIC).ok_or(SealError::Tampered)?;
        if rest.len() < NONCE_LEN {
            return Err(SealError::Tampered);
        }
        let (nonce, body) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Tampered)?;
        let mut body = body.to_vec();
        let clear = self
            .key
            .open_in_place(nonce, Aad::from(place.as_bytes()), &mut body)
            .map_err(|_| SealError::Tampered)?;
        Ok(clear.to_vec())
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer() -> Sealer {
        Sealer::for_tests()
    }

    #[test]
    fn a_sealed_record_opens_only_at_its_own_place_and_hides_its_content() {
        let sealer = sealer();
        let sealed = sealer.seal("tracker/subject:alice", b"{\"access_token\":\"secret-1\"}");
        assert!(!sealed.windows(8).any(|w| w == b"secret-1"));
        assert_eq!(
            sealer.open("tracker/subject:alice", &sealed).unwrap(),
            b"{\"access_token\":\"secret-1\"}"
        );
        assert_eq!(
            sealer
                .open("tracker/subject:bob", &sealed)
                .unwrap_err()
                .code(),
            "TOKEN_RECORD_TAMPERED"
        );
        let mut altered = sealed.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert!(sealer.open("tracker/subject:alice", &altered).is_err());
        assert!(sealer.open("tracker/subject:alice", b"{}").is_err());
        let other = Sealer::from_hex(&"cd".repeat(32), KEY_VAR).unwrap();
        assert!(other.open("tracker/subject:alice", &sealed).is_err());
    }

    #[test]
    fn a_key_is_64_hex_digits() {
        assert!(Sealer::from_hex("abc", KEY_VAR).is_err());
        assert!(Sealer::from_hex(&"zz".repeat(32), KEY_VAR).is_err());
        assert!(Sealer::from_hex(&format!("{}\n", "0f".repeat(32)), KEY_FILE_VAR).is_ok());
    }
}
