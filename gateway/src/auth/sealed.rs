//! Per-person tokens encrypted at rest. A per-user server (`per_user = true`) keeps one
//! sign-in per caller identity, and those tokens are worth more together than one
//! operator's: whoever copies the token folder (a backup, a disk image) or reads the Redis
//! of a cluster must get nothing usable. So every such record is sealed with
//! ChaCha20-Poly1305 (aws-lc-rs, the crypto library rustls already uses here), under a key
//! that is never in the configuration file:
//!
//! - `MCP_GATEWAY_TOKEN_KEY`: 64 hex digits (32 bytes), or
//! - `MCP_GATEWAY_TOKEN_KEY_FILE`: a file holding those 64 hex digits (a mounted secret),
//!   which no other user may read: a file others can read, or anyone but its owner write,
//!   is refused (`TOKEN_KEY_FILE_EXPOSED`); one its group can read is used with a warning
//!   (a secret shared with a service's group, as Kubernetes' `fsGroup` does).
//!
//! Either may hold several keys, separated by white space: the first seals, and every
//! one opens. That is how the key is rotated: put a new key first and keep the old one
//! after it, and records sealed under the old key still open; records are sealed under the
//! new key whenever they are written, and `mcp-gateway auth rotate-key` seals the rest
//! again at once ([`Sealer::reseal`]), after which the old key can go.
//!
//! Replicas of a cluster share the key as they share Redis. The record's place (server and
//! identity) is the additional authenticated data: a sealed record moved under another
//! identity's name does not open, so no one's token can be made to pass for someone
//! else's, even by someone who can write the store.

use std::os::unix::fs::PermissionsExt;

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
    #[error(
        "the token key ({0}) is not 64 hex digits (or several such keys separated by white \
         space, the one that seals first)"
    )]
    BadKey(&'static str),
    #[error("cannot read the token key file: {0}")]
    KeyFile(String),
    #[error(
        "the token key file {path} can be read or written by other users (mode {mode:03o}): \
         make it private to the gateway's user (`chmod 600 {path}`), or at most readable by \
         its group"
    )]
    KeyFileExposed { path: String, mode: u32 },
    #[error(
        "a sealed token record opens with none of the token key's keys (another key, or \
         altered)"
    )]
    Tampered,
}

impl SealError {
    /// A stable code for logs, health and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoKey => "TOKEN_KEY_MISSING",
            Self::BadKey(_) | Self::KeyFile(_) => "TOKEN_KEY_INVALID",
            Self::KeyFileExposed { .. } => "TOKEN_KEY_FILE_EXPOSED",
            Self::Tampered => "TOKEN_RECORD_TAMPERED",
        }
    }
}

/// The key that seals per-user token records, and the previous keys that still open them.
pub struct Sealer {
    /// The key that seals (and opens).
    current: LessSafeKey,
    /// Keys that only open: those of records sealed before a rotation.
    previous: Vec<LessSafeKey>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(***)")
    }
}

impl Sealer {
    /// The keys the environment names ([`KEY_VAR`], else [`KEY_FILE_VAR`]).
    pub fn from_env() -> Result<Self, SealError> {
        if let Ok(hex) = std::env::var(KEY_VAR) {
            return Self::from_hex(&hex, KEY_VAR);
        }
        let Ok(path) = std::env::var(KEY_FILE_VAR) else {
            return Err(SealError::NoKey);
        };
        Self::from_file(std::path::Path::new(&path))
    }

    /// The keys in the file at `path`, which other users must not be able to read (its
    /// mode is read from the file opened, so it is the one read).
    fn from_file(path: &std::path::Path) -> Result<Self, SealError> {
        use std::io::Read;

        let shown = path.display().to_string();
        let unreadable = |error: std::io::Error| SealError::KeyFile(format!("{shown}: {error}"));
        let mut file = std::fs::File::open(path).map_err(unreadable)?;
        let mode = file.metadata().map_err(unreadable)?.permissions().mode() & 0o777;
        // Others may do nothing with it, and only its owner may write it.
        if mode & 0o027 != 0 {
            return Err(SealError::KeyFileExposed { path: shown, mode });
        }
        if mode & 0o040 != 0 {
            tracing::warn!(
                path = %shown,
                "the token key file is readable by its group: every member can open the \
                 per-user sign-ins"
            );
        }
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(unreadable)?;
        Self::from_hex(&text, KEY_FILE_VAR)
    }

    /// A fixed key, for unit tests.
    #[cfg(test)]
    pub fn for_tests() -> Self {
        Self::from_hex(&"ab".repeat(32), KEY_VAR).unwrap_or_else(|_| unreachable!())
    }

    /// The keys `text` writes (as in [`KEY_VAR`]), for unit tests.
    #[cfg(test)]
    pub fn for_tests_from(text: &str) -> Self {
        Self::from_hex(text, KEY_VAR).unwrap_or_else(|_| unreachable!())
    }

    /// Keys written as 64 hex digits each, separated by white space; the first seals.
    fn from_hex(text: &str, source: &'static str) -> Result<Self, SealError> {
        let keys = text
            .split_ascii_whitespace()
            .map(|hex| {
                let bytes = decode_hex(hex).ok_or(SealError::BadKey(source))?;
                let key = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
                    .map_err(|_| SealError::BadKey(source))?;
                Ok(LessSafeKey::new(key))
            })
            .collect::<Result<Vec<_>, SealError>>()?;
        let mut keys = keys.into_iter();
        let current = keys.next().ok_or(SealError::BadKey(source))?;
        Ok(Self {
            current,
            previous: keys.collect(),
        })
    }

    /// `clear` sealed for the record at `place`: magic, a random nonce, then the
    /// ciphertext with its tag.
    pub fn seal(&self, place: &str, clear: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        // The system's random source failing is not something to go on from.
        aws_lc_rs::rand::fill(&mut nonce).unwrap_or_else(|_| std::process::abort());
        let mut sealed = clear.to_vec();
        self.current
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

    /// The clear record sealed for `place` under any of the keys, or
    /// [`SealError::Tampered`].
    pub fn open(&self, place: &str, sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        self.open_with_any(place, sealed).map(|(_, clear)| clear)
    }

    /// The record sealed for `place` sealed again under the current key, when a previous
    /// key sealed it (`Ok(None)` when the current key did already), or
    /// [`SealError::Tampered`] when no key opens it.
    pub fn reseal(&self, place: &str, sealed: &[u8]) -> Result<Option<Vec<u8>>, SealError> {
        let (by, clear) = self.open_with_any(place, sealed)?;
        Ok((by > 0).then(|| self.seal(place, &clear)))
    }

    /// The clear record, and which key (by its place in the list) opened it.
    fn open_with_any(&self, place: &str, sealed: &[u8]) -> Result<(usize, Vec<u8>), SealError> {
        let rest = sealed.strip_prefix(MAGIC).ok_or(SealError::Tampered)?;
        if rest.len() < NONCE_LEN {
            return Err(SealError::Tampered);
        }
        let (nonce, body) = rest.split_at(NONCE_LEN);
        let keys = std::iter::once(&self.current).chain(&self.previous);
        for (index, key) in keys.enumerate() {
            let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Tampered)?;
            let mut body = body.to_vec();
            if let Ok(clear) = key.open_in_place(nonce, Aad::from(place.as_bytes()), &mut body) {
                return Ok((index, clear.to_vec()));
            }
        }
        Err(SealError::Tampered)
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
        assert!(Sealer::from_hex("", KEY_VAR).is_err());
        assert!(Sealer::from_hex(&format!("{}\n", "0f".repeat(32)), KEY_FILE_VAR).is_ok());
        let two = format!("{}\n{}\n", "0f".repeat(32), "1e".repeat(32));
        assert_eq!(
            Sealer::from_hex(&two, KEY_FILE_VAR).unwrap().previous.len(),
            1
        );
        let one_bad = format!("{} abc", "0f".repeat(32));
        assert!(Sealer::from_hex(&one_bad, KEY_VAR).is_err());
    }

    #[test]
    fn after_a_rotation_old_records_open_and_are_sealed_again_under_the_new_key() {
        let old = Sealer::from_hex(&"ab".repeat(32), KEY_VAR).unwrap();
        let sealed = old.seal("who/token:a", b"tokens");
        let rotated =
            Sealer::from_hex(&format!("{} {}", "cd".repeat(32), "ab".repeat(32)), KEY_VAR).unwrap();
        assert_eq!(rotated.open("who/token:a", &sealed).unwrap(), b"tokens");
        let again = rotated.reseal("who/token:a", &sealed).unwrap().unwrap();
        assert!(
            old.open("who/token:a", &again).is_err(),
            "still the old key's"
        );
        let new_only = Sealer::from_hex(&"cd".repeat(32), KEY_VAR).unwrap();
        assert_eq!(new_only.open("who/token:a", &again).unwrap(), b"tokens");
        assert!(rotated.reseal("who/token:a", &again).unwrap().is_none());
        assert_eq!(
            rotated.reseal("who/token:b", &again).unwrap_err().code(),
            "TOKEN_RECORD_TAMPERED"
        );
    }

    #[test]
    fn a_key_file_others_can_read_is_refused_and_a_private_one_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "0f".repeat(32)).unwrap();
        for (mode, refused) in [
            (0o644, true),
            (0o604, true),
            (0o620, true),
            (0o600, false),
            (0o400, false),
            (0o640, false),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let outcome = Sealer::from_file(&path);
            if refused {
                let error = outcome.unwrap_err();
                assert_eq!(error.code(), "TOKEN_KEY_FILE_EXPOSED", "{mode:o}");
                assert!(error.to_string().contains("chmod 600"), "{error}");
            } else {
                assert!(outcome.is_ok(), "{mode:o}");
            }
        }
    }
}
