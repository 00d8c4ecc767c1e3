//! The test identity provider (`tests/servers/idp.mjs`, npm `oidc-provider`) as a child
//! process: started on a free loopback port, restarted on the same port for a key rotation,
//! asked for real tokens (client credentials) and for forged ones (`/test/forge`).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::{free_address, http_request, npm_bin, repo};

/// A running `oidc-provider`; killed when dropped.
pub struct IdentityProvider {
    child: Child,
    pub address: SocketAddr,
    keys: PathBuf,
    token_ttl_secs: u64,
}

impl IdentityProvider {
    /// Starts a provider whose keys live in `dir`, publishing `key_ids` (the first signs)
    /// and issuing access tokens that live `token_ttl_secs`.
    pub fn start(dir: &Path, key_ids: &str, token_ttl_secs: u64) -> IdentityProvider {
        let address = free_address();
        let keys = dir.join("idp-keys.json");
        let child = spawn(address, &keys, key_ids, token_ttl_secs);
        IdentityProvider {
            child,
            address,
            keys,
            token_ttl_secs,
        }
    }

    /// Restarts on the same port publishing `key_ids`: `"k2,k1"` after `"k1"` is a
    /// rotation. Everything the provider held in memory (grants, refresh tokens) is lost.
    pub fn restart(&mut self, key_ids: &str) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn(self.address, &self.keys, key_ids, self.token_ttl_secs);
    }

    pub fn issuer(&self) -> String {
        format!("http://{}", self.address)
    }

    /// A real access token for `resource` from the client credentials grant.
    pub fn machine_token(&self, resource: &str, scope: &str) -> String {
        let body = format!(
            "grant_type=client_credentials&client_id=machine&client_secret=machine-secret\
             &resource={}&scope={}",
            form_encode(resource),
            form_encode(scope)
        );
        let (status, _, text) = http_request(
            self.address,
            "POST",
            "/token",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            body.as_bytes(),
        );
        let answer: Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(status, 200, "token request failed: {text}");
        answer["access_token"].as_str().unwrap().to_owned()
    }

    /// A token the provider never issued: `claims` over the defaults (iss, sub, iat, exp in
    /// five minutes), signed with key `key` (`"stranger"` is never published), header kid
    /// `kid` (default: the key's own id).
    pub fn forge(&self, claims: &Value, key: &str, kid: Option<&str>) -> String {
        let mut path = format!(
            "/test/forge?claims={}&key={key}",
            form_encode(&claims.to_string())
        );
        if let Some(kid) = kid {
            path.push_str(&format!("&kid={kid}"));
        }
        let (status, _, token) = http_request(self.address, "GET", &path, &[], b"");
        assert_eq!(status, 200, "forging failed: {token}");
        token
    }

    /// Revokes `token` (RFC 7009), as an administrator withdrawing a sign-in would.
    pub fn revoke(&self, token: &str, client_id: &str) {
        let body = format!(
            "token={}&client_id={}",
            form_encode(token),
            form_encode(client_id)
        );
        let (status, _, text) = http_request(
            self.address,
            "POST",
            "/token/revocation",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            body.as_bytes(),
        );
        assert_eq!(status, 200, "revocation failed: {text}");
    }
}

impl Drop for IdentityProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(address: SocketAddr, keys: &Path, key_ids: &str, token_ttl_secs: u64) -> Child {
    // What the provider says goes next to its keys, for a failing test's reader.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(keys.with_extension("log"))
        .unwrap();
    let mut child = Command::new(npm_bin("node"))
        .arg(repo().join("tests/servers/idp.mjs"))
        .args(["--port", &address.port().to_string()])
        .arg("--keys")
        .arg(keys)
        .args(["--key-ids", key_ids])
        .args(["--token-ttl", &token_ttl_secs.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("node runs tests/servers/idp.mjs (scripts/install-test-peers installs its peers)");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(
        first.starts_with("ready "),
        "the identity provider did not start: {first:?}"
    );
    // Drained until the provider exits: a closed pipe would kill it at its next write.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    child
}

/// `application/x-www-form-urlencoded` (and query) encoding of one value.
pub fn form_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}
