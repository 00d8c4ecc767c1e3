//! Where a confined server keeps things: its state folder under the gateway's data
//! folder, and a private temporary folder inside it for each start.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::SandboxError;

/// The folder of the gateway's own data: OAuth tokens, session logs and every server's
/// state, hidden from every server.
fn gateway_data_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("mcp-gateway")
}

/// Where `server` keeps its state (and its private temporary folders).
pub(super) fn state_dir(server: &str) -> PathBuf {
    gateway_data_dir().join("servers").join(server)
}

/// The gateway's folders hidden from every server: its data folder and its configuration
/// folder.
pub(super) fn gateway_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![gateway_data_dir()];
    dirs.extend(dirs::config_dir().map(|config| config.join("mcp-gateway")));
    dirs
}

/// Makes `dir` (and its parents) and keeps it to its owner (0700).
pub(super) fn make_private_dir(dir: &Path) -> Result<(), SandboxError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let setup = |source| SandboxError::Setup {
        what: format!("making {}", dir.display()),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(setup)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(setup)
}

/// A server's private temporary folder, `STATE/tmp-PID-N`: made at its start, removed
/// when it ends; one left by a gateway that died is removed at the next start.
#[derive(Debug)]
pub struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
    pub(super) fn create(state_dir: &Path) -> Result<Self, SandboxError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        remove_abandoned_tmps(state_dir);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = state_dir.join(format!("tmp-{}-{n}", std::process::id()));
        make_private_dir(&path)?;
        Ok(Self { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Removes the temporary folders of gateways that no longer run.
fn remove_abandoned_tmps(state_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("tmp-")
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
