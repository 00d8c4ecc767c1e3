//! Helpers shared by the tests that run real tools (tsc, node): finding them, scratch
//! directories, and the captured tool lists of the reference servers.

#![allow(dead_code)] // each test binary uses its own subset

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sdkgen::ToolSpec;

/// The real tools of server-everything, server-filesystem and server-memory
/// (`tests/fixtures/real-tools.json`, written by `tests/capture_real_tools.py`).
pub fn real_tools() -> Vec<ToolSpec> {
    load(&manifest_dir().join("tests/fixtures/real-tools.json"))
}

pub fn load(path: &Path) -> Vec<ToolSpec> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

pub fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The TypeScript compiler: `$MCP_GATEWAY_TSC`, else the one installed with the test peers.
/// Panics (the test fails) when there is none: these tests never skip silently.
pub fn tsc() -> PathBuf {
    let candidates = [
        manifest_dir().join("../tests/peers/node_modules/.bin/tsc"),
        PathBuf::from("/tmp/peers/node_modules/.bin/tsc"),
    ];
    locate("MCP_GATEWAY_TSC", &candidates, "tsc (npm typescript)")
}

/// Node.js: `$MCP_GATEWAY_NODE`, else `node` on the PATH.
pub fn node() -> PathBuf {
    let on_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("node")).collect())
        .unwrap_or_default();
    locate("MCP_GATEWAY_NODE", &on_path, "node")
}

fn locate(var: &str, candidates: &[PathBuf], what: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(var) {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "{var}={} is not a file", path.display());
        return path;
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "{what} not found (looked in {candidates:?}); install the test peers \
             (npm ci in tests/peers) or set {var}"
            )
        })
}

/// A fresh scratch directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("sdkgen-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        Scratch(dir)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Runs a command and returns its output (panicking if it cannot start).
pub fn run(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"))
}

/// stdout and stderr together, for failure messages.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
