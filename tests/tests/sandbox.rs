//! Confined stdio servers, seen as a user sees them: the real servers people run work
//! inside the default sandbox; a server that reaches for a secret, writes outside its
//! folders or opens a connection its `network` forbids is refused, and the gateway's log
//! (and `/healthz`) names what was refused; `mcp-gateway servers` shows each server's
//! walls before it starts.

use std::io::Read;
use std::net::TcpListener;
use std::time::Duration;

use mcp_gateway_tests::*;
use serde_json::{Value, json};

/// `/healthz`, parsed.
fn health(gateway: &Gateway) -> Value {
    let (status, _, body) = http_get(gateway.address, "/healthz");
    assert!(status == 200 || status == 503, "/healthz: {status} {body}");
    serde_json::from_str(&body).unwrap()
}

/// The kernel's confinement of `pid`, from `/proc/PID/status`: (`NoNewPrivs`, `Seccomp`).
fn kernel_confinement(pid: i64) -> (u64, u64) {
    let pid = pid as i32;
    (
        proc_status(pid, "NoNewPrivs").expect("NoNewPrivs"),
        proc_status(pid, "Seccomp").expect("Seccomp"),
    )
}

#[test]
fn the_reference_servers_work_confined_with_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let served = root.join("served");
    std::fs::create_dir_all(&served).unwrap();
    std::fs::write(served.join("hello.txt"), "hello from the served folder").unwrap();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git_repo(&repo);
    let config = format!(
        "{}{}[servers.time]\ncommand = {}\nargs = [\"--local-timezone\", \"UTC\"]\n\
         [servers.git]\ncommand = {}\nargs = [\"--repository\", {}]\n",
        npm_server("fs", "mcp-server-filesystem", &[&served.to_string_lossy()]),
        npm_server("memory", "mcp-server-memory", &[]),
        toml_str(venv_bin("mcp-server-time").to_string_lossy()),
        toml_str(venv_bin("mcp-server-git").to_string_lossy()),
        toml_str(repo.to_string_lossy()),
    );
    let workspace = Workspace::new(&config);
    let gateway = workspace.serve_http(&[]);
    let entity = format!("sandbox-test-{}", std::process::id());
    let written = served.join("written.txt");
    let script = json!([
        {"action": "call_tool", "name": "mcp__fs__read_text_file",
         "arguments": {"path": served.join("hello.txt")}},
        {"action": "call_tool", "name": "mcp__fs__write_file",
         "arguments": {"path": written, "content": "written confined"}},
        {"action": "call_tool", "name": "mcp__memory__create_entities",
         "arguments": {"entities": [{"name": entity, "entityType": "test", "observations": ["confined"]}]}},
        {"action": "call_tool", "name": "mcp__memory__open_nodes",
         "arguments": {"names": [entity]}},
        {"action": "call_tool", "name": "mcp__time__get_current_time",
         "arguments": {"timezone": "Europe/Paris"}},
        {"action": "call_tool", "name": "mcp__git__git_status",
         "arguments": {"repo_path": repo}},
    ]);
    let run = python_client(&gateway.client_args("http", "/mcp"), &script);
    for index in 0..6 {
        let result = action_result(&run, index);
        assert_ne!(result["isError"], true, "call {index} failed: {run:#}");
    }
    assert!(result_text(action_result(&run, 0)).contains("hello from the served folder"));
    assert_eq!(
        std::fs::read_to_string(&written).unwrap(),
        "written confined"
    );
    assert!(
        result_text(action_result(&run, 3)).contains(&entity),
        "{run:#}"
    );
    assert!(
        result_text(action_result(&run, 4)).contains("Europe/Paris"),
        "{run:#}"
    );
    assert!(
        result_text(action_result(&run, 5)).contains("branch"),
        "{run:#}"
    );

    // Each runs confined, as /healthz says and the kernel confirms.
    let health = health(&gateway);
    assert!(
        health["sandbox"]["missing"].as_array().is_some(),
        "{health:#}"
    );
    for server in ["fs", "memory", "time", "git"] {
        let upstream = &health["upstreams"][server];
        assert_eq!(upstream["state"], "ready", "{server}: {health:#}");
        let sandbox = &upstream["sandbox"];
        assert_eq!(sandbox["state"], "confined", "{server}: {health:#}");
        assert_eq!(sandbox["network"], "any", "{server}: {health:#}");
        let hidden: Vec<&str> = sandbox["hidden"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let config = workspace.config().canonicalize().unwrap();
        assert!(
            hidden.contains(&config.to_str().unwrap()),
            "{server}: the gateway's configuration is not hidden: {hidden:?}"
        );
        let pid = upstream["pid"].as_i64().expect("a pid");
        assert_eq!(kernel_confinement(pid), (1, 2), "{server} (pid {pid})");
    }
}

/// A workspace with a home folder holding a key, and `prying.py` run with that home as
/// `[servers.prying]`, with `more` added to its entry.
struct Prying {
    workspace: Workspace,
    key: std::path::PathBuf,
    _home: tempfile::TempDir,
}

impl Prying {
    fn new(args: &[&str], more: &str) -> Prying {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap().join("home");
        let key = home.join(".ssh/id_rsa");
        std::fs::create_dir_all(key.parent().unwrap()).unwrap();
        std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n").unwrap();
        let mut all_args = vec![
            repo()
                .join("tests/servers/prying.py")
                .to_string_lossy()
                .into_owned(),
        ];
        all_args.extend(
            args.iter()
                .map(|a| a.replace("KEY", &key.to_string_lossy())),
        );
        let all_args: Vec<String> = all_args.iter().map(toml_str).collect();
        let config = format!(
            "[servers.prying]\ncommand = {}\nargs = [{}]\ncwd = \".\"\nenv = {{ HOME = {} }}\n{more}",
            toml_str(python().to_string_lossy()),
            all_args.join(", "),
            toml_str(home.to_string_lossy()),
        );
        Prying {
            workspace: Workspace::new(&config),
            key,
            _home: dir,
        }
    }
}

#[test]
fn a_server_reaching_for_a_secret_writing_out_of_bounds_or_connecting_is_refused_and_named() {
    let prying = Prying::new(&[], "[servers.prying.sandbox]\nnetwork = \"none\"\n");
    let workspace = &prying.workspace;
    let root = workspace.dir.path().canonicalize().unwrap();
    let outside = root.join("outside.txt");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let gateway = workspace.serve_http(&[]);
    let script = json!([
        {"action": "call_tool", "name": "mcp__prying__read_file", "arguments": {"path": prying.key}},
        {"action": "call_tool", "name": "mcp__prying__write_file",
         "arguments": {"path": outside, "text": "escaped"}},
        {"action": "call_tool", "name": "mcp__prying__connect",
         "arguments": {"host": "127.0.0.1", "port": port}},
        {"action": "call_tool", "name": "mcp__prying__read_file",
         "arguments": {"path": workspace.config()}},
    ]);
    let run = python_client(&gateway.client_args("http", "/mcp"), &script);
    for index in 0..4 {
        let result = action_result(&run, index);
        assert_eq!(
            result["isError"], true,
            "call {index} was not refused: {run:#}"
        );
    }
    assert!(
        !result_text(action_result(&run, 0)).contains("secret"),
        "{run:#}"
    );
    assert!(!outside.exists(), "the server wrote outside its folders");
    let mut buffer = [0u8; 8];
    let reached = listener
        .accept()
        .map(|(mut stream, _)| stream.read(&mut buffer).unwrap_or(0))
        .is_ok();
    assert!(!reached, "the server reached 127.0.0.1:{port}");

    // The gateway's log says what was refused, and what would allow it.
    let refusals = [
        format!(
            "the sandbox refused access to {} (one of the secrets hidden from every server)",
            prying.key.display()
        ),
        format!(
            "the sandbox refused writing {} (it may read there, not write)",
            outside.display()
        ),
        format!("the sandbox refused a connection to 127.0.0.1:{port} under network = \"none\""),
        format!(
            "the sandbox refused access to {} (one of the secrets",
            workspace.config().canonicalize().unwrap().display()
        ),
    ];
    assert!(
        eventually(Duration::from_secs(10), || {
            let log = gateway.log_text();
            refusals
                .iter()
                .all(|refusal| log.contains(refusal.as_str()))
        }),
        "the log does not name every refusal {refusals:#?}:\n{}",
        gateway.log_text()
    );
    let log = gateway.log_text();
    assert!(log.contains(&format!("network = [{port}]")), "{log}");
    // /healthz keeps them too.
    let health = health(&gateway);
    let refused = health["upstreams"]["prying"]["sandbox"]["refused"].to_string();
    assert!(refused.contains(&format!("127.0.0.1:{port}")), "{health:#}");
}

#[test]
fn a_server_that_fails_for_the_sandbox_says_what_was_refused_until_granted_by_name() {
    let prying = Prying::new(&["--read-at-start", "KEY"], "");
    let gateway = prying.workspace.serve_http(&[]);
    let expected = format!(
        "the sandbox refused access to {} (one of the secrets hidden from every server)",
        prying.key.display()
    );
    let mut last_error = String::new();
    assert!(
        eventually(Duration::from_secs(20), || {
            let health = health(&gateway);
            last_error = health["upstreams"]["prying"]["last_error"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            last_error.contains(&expected)
        }),
        "last_error does not say what was refused: {last_error:?}\n{}",
        gateway.log_text()
    );
    assert!(last_error.contains("read = ["), "{last_error}");

    // Named, the secret is granted, and the server starts.
    let granted = "[servers.prying.sandbox]\nread = [\"~/.ssh/id_rsa\"]\n";
    let prying = Prying::new(&["--read-at-start", "KEY"], granted);
    let gateway = prying.workspace.serve_http(&[]);
    let health = health(&gateway);
    assert_eq!(
        health["upstreams"]["prying"]["state"], "ready",
        "{health:#}"
    );
}

#[test]
fn sandbox_false_runs_a_server_unconfined() {
    let prying = Prying::new(&["--read-at-start", "KEY"], "sandbox = false\n");
    let gateway = prying.workspace.serve_http(&[]);
    let health = health(&gateway);
    let upstream = &health["upstreams"]["prying"];
    assert_eq!(upstream["state"], "ready", "{health:#}");
    assert_eq!(upstream["sandbox"]["state"], "off", "{health:#}");
    assert_eq!(
        kernel_confinement(upstream["pid"].as_i64().unwrap()),
        (0, 0)
    );
}

#[test]
fn with_network_loopback_the_hosts_own_services_are_out_of_reach() {
    let prying = Prying::new(&[], "[servers.prying.sandbox]\nnetwork = \"loopback\"\n");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let gateway = prying.workspace.serve_http(&[]);
    let run = python_client(
        &gateway.client_args("http", "/mcp"),
        &json!([{"action": "call_tool", "name": "mcp__prying__connect",
                 "arguments": {"host": "127.0.0.1", "port": port}}]),
    );
    assert_eq!(action_result(&run, 0)["isError"], true, "{run:#}");
    assert!(
        listener.accept().is_err(),
        "the server reached the host's loopback"
    );
    let expected = format!(
        "the sandbox refused a connection to 127.0.0.1:{port} under network = \"loopback\""
    );
    assert!(
        eventually(Duration::from_secs(10), || gateway
            .log_text()
            .contains(&expected)),
        "{}",
        gateway.log_text()
    );
}

#[test]
fn servers_lists_each_servers_walls_without_starting_it() {
    let prying = Prying::new(
        &[],
        "[servers.prying.sandbox]\nnetwork = [443]\nwrite = [\"~/notes\"]\n",
    );
    let home = prying.key.parent().unwrap().parent().unwrap();
    std::fs::create_dir_all(home.join("notes")).unwrap();
    let output = prying.workspace.cli(&["servers"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("prying\tstdio\tconfined, network [443]"),
        "{text}"
    );
    let line = |label: &str| {
        text.lines()
            .find(|line| line.starts_with(&format!("\t{label}\t")))
            .unwrap_or_else(|| panic!("no {label} line: {text}"))
            .to_owned()
    };
    assert!(
        line("write").contains(&home.join("notes").display().to_string()),
        "{text}"
    );
    assert!(
        line("hidden").contains(&home.join(".ssh").display().to_string()),
        "{text}"
    );
    assert!(line("read").contains("/usr"), "{text}");
    let json = prying.workspace.cli(&["servers", "--json"]);
    let servers: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(servers["prying"]["sandbox"]["network"], json!([443]));
    // Nothing was started, so nothing was made.
    assert!(
        !prying
            .workspace
            .data_home()
            .join("mcp-gateway/servers/prying")
            .exists()
    );
}
