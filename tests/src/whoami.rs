//! `tests/servers/whoami.py` as a child process: a streamable HTTP MCP server on the
//! official Python SDK that verifies the test identity provider's tokens and answers with
//! the bearer's subject, for the per-user credential tests.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::idp::IdentityProvider;
use crate::{PATIENCE, eventually, free_address, python, repo};

/// tests/servers/whoami.py on a free port; killed when dropped.
pub struct Whoami {
    child: Child,
    pub address: SocketAddr,
    tokens: PathBuf,
}

impl Whoami {
    pub fn start(dir: &Path, idp: &IdentityProvider) -> Whoami {
        Self::start_at(dir, idp, free_address())
    }

    /// [`Self::start`] at `address` (the server started again where it was).
    pub fn start_at(dir: &Path, idp: &IdentityProvider, address: SocketAddr) -> Whoami {
        let tokens = dir.join("whoami-tokens.txt");
        let log = std::fs::File::create(dir.join("whoami.log")).unwrap();
        let child = Command::new(python())
            .arg(repo().join("tests/servers/whoami.py"))
            .arg(address.port().to_string())
            .arg(idp.issuer())
            .arg(&tokens)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        assert!(
            eventually(PATIENCE, || std::net::TcpStream::connect(address).is_ok()),
            "whoami.py did not listen: {}",
            std::fs::read_to_string(dir.join("whoami.log")).unwrap_or_default()
        );
        Whoami {
            child,
            address,
            tokens,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.address)
    }

    /// Every token the server accepted.
    pub fn tokens(&self) -> Vec<String> {
        std::fs::read_to_string(&self.tokens)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Whoami {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
