//! Issue 2 and 3: no child process outlives the gateway — after stdin closes in stdio
//! mode, after SIGTERM in HTTP mode, and even after SIGKILL.

use std::process::{Command, Stdio};
use std::time::Duration;

use mcp_gateway_tests::*;

fn two_upstreams() -> Workspace {
    Workspace::new(&format!(
        "{}{}",
        example_server("kv", "kv"),
        example_server("slow", "slow")
    ))
}

/// Waits until the gateway has both children, and returns them.
fn children_of(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    assert!(
        eventually(Duration::from_secs(30), || {
            found = descendants(pid);
            found.len() >= 2
        }),
        "the gateway did not start its upstreams"
    );
    found
}

#[test]
fn children_die_when_stdin_closes() {
    let workspace = two_upstreams();
    let (command, args) = workspace.stdio_command(&[]);
    let mut gateway = Command::new(command)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let children = children_of(gateway.id() as i32);
    drop(gateway.stdin.take());
    assert!(
        wait_exit(&mut gateway, Duration::from_secs(10)).is_some(),
        "gateway exits on EOF"
    );
    assert!(
        eventually(Duration::from_secs(5), || children
            .iter()
            .all(|&c| !alive(c))),
        "children left behind: {children:?}"
    );
}

#[test]
fn children_die_on_sigterm() {
    let workspace = two_upstreams();
    let mut gateway = workspace.serve_http(&[]);
    let children = children_of(gateway.pid());
    let status = gateway.signal_and_wait(libc::SIGTERM, Duration::from_secs(20));
    assert!(
        status.is_some(),
        "gateway exits on SIGTERM: {}",
        gateway.log_text()
    );
    assert!(
        eventually(Duration::from_secs(5), || children
            .iter()
            .all(|&c| !alive(c))),
        "children left behind: {children:?}"
    );
}

#[test]
fn children_die_even_on_sigkill() {
    let workspace = two_upstreams();
    let mut gateway = workspace.serve_http(&[]);
    let children = children_of(gateway.pid());
    gateway.signal_and_wait(libc::SIGKILL, Duration::from_secs(10));
    assert!(
        eventually(Duration::from_secs(5), || children
            .iter()
            .all(|&c| !alive(c))),
        "children left behind after SIGKILL: {children:?}"
    );
}

/// In a container without an init, the gateway is PID 1: its stdio upstreams still start
/// (a child's check that the gateway did not die before it compares with the gateway's
/// own pid, not with 1). Run in a PID namespace of its own, as a container runs it.
#[test]
fn as_pid_1_the_gateway_starts_its_stdio_upstreams() {
    let namespaces_allowed = Command::new("unshare")
        .args(["--fork", "--pid", "--mount-proc", "true"])
        .status()
        .is_ok_and(|status| status.success());
    if !namespaces_allowed {
        eprintln!("SKIPPED: this machine refuses `unshare --fork --pid --mount-proc`");
        return;
    }
    let workspace = two_upstreams();
    let output = Command::new("unshare")
        .args(["--fork", "--pid", "--mount-proc"])
        .arg(gateway_bin())
        .arg("tools")
        .arg("--config")
        .arg(workspace.config())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for tool in ["mcp__kv__get", "mcp__slow__sleep"] {
        assert!(stdout.contains(tool), "{tool} missing: {stdout}\n{stderr}");
    }
}

/// `mcp-gateway tools | head`: a reader that stops early (here, before the first line)
/// ends the listing as it ends any Unix tool's, by `SIGPIPE`, with no panic on stderr.
#[test]
fn a_listing_whose_reader_goes_away_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;

    let workspace = two_upstreams();
    let mut child = Command::new(gateway_bin())
        .arg("tools")
        .arg("--config")
        .arg(workspace.config())
        .env("XDG_DATA_HOME", workspace.data_home())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        output.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {stderr}",
        output.status
    );
}
