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
