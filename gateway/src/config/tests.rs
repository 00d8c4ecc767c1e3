use std::ffi::OsString;

use super::*;

fn load_text(name: &str, text: &str) -> Result<Config, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    Config::load(&path)
}

#[test]
fn a_misspelt_key_names_the_key_and_the_line() {
    let err = load_text(
        "config.toml",
        "[servers.kv]\ncommand = \"kv\"\ntimout_ms = 5\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("config.toml:3: `servers.kv.timout_ms`: unknown field `timout_ms`"),
        "{err}"
    );
}

#[test]
fn a_value_of_the_wrong_type_names_the_key_and_the_line() {
    let err = load_text(
        "config.toml",
        "[gateway]\nmode = \"both\"\n\n[listen]\ntokens = [\n  \"a-token-of-sixteen\",\n  16,\n]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("config.toml:7: `listen.tokens[1]`: invalid type: integer `16`"),
        "{err}"
    );
}

#[test]
fn text_that_is_not_toml_names_the_line() {
    let err = load_text("config.toml", "[gateway]\nmode = [\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("config.toml:2: "), "{err}");
}

#[test]
fn an_unset_variable_is_named_with_its_key() {
    let err = load_text(
        "config.toml",
        "[servers.kv]\ncommand = \"kv\"\nenv = { K = \"${MCP_GATEWAY_TEST_UNSET}\" }\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("servers.kv.env.K"), "{err}");
    assert!(err.contains("MCP_GATEWAY_TEST_UNSET"), "{err}");
}

#[test]
fn a_server_needs_exactly_one_endpoint() {
    let err = load_text("c.toml", "[servers.x]\nenabled = true\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("servers.x.command"), "{err}");
    let err = load_text(
        "c.toml",
        "[servers.x]\ncommand = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("not both"), "{err}");
}

#[test]
fn client_json_files_are_read() {
    let config = load_text(
        "claude.json",
        r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "x"]},
            "remote": {"type": "sse", "url": "http://127.0.0.1:9/sse"}}}"#,
    )
    .unwrap();
    assert_eq!(
        config.servers["fs"].endpoint(),
        Endpoint::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "x".into()],
            env: Default::default(),
            inherit_env: Vec::new(),
            cwd: None
        }
    );
    assert!(matches!(
        config.servers["remote"].endpoint(),
        Endpoint::Remote {
            transport: RemoteTransport::Sse,
            ..
        }
    ));
    let err = load_text("vscode.json", r#"{"servers": {"a": {"comand": "x"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("comand"), "{err}");
}

#[test]
fn dump_masks_secrets() {
    // SAFETY: tests in this module do not read this variable concurrently.
    unsafe { std::env::set_var("MCP_GATEWAY_TEST_TOKEN", "hunter2-long-enough-token") };
    let config = load_text(
        "c.toml",
        "[servers.r]\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = { Authorization = \"Bearer ${MCP_GATEWAY_TEST_TOKEN}\" }\n[listen]\ntokens = [\"${MCP_GATEWAY_TEST_TOKEN}\"]\n",
    )
    .unwrap();
    assert_eq!(
        config.servers["r"].headers["Authorization"],
        "Bearer hunter2-long-enough-token"
    );
    let dump = config.dump_masked();
    assert!(!dump.contains("hunter2"), "{dump}");
    assert!(dump.contains("***"), "{dump}");
}

#[test]
fn naming_settings_default_to_the_federated_form() {
    let config = load_text(
        "c.toml",
        "[servers.kv]\ncommand = \"kv\"\n[servers.raw]\nurl = \"http://127.0.0.1:1/mcp\"\nprefix = \"\"\nrewrite_uris = false\n",
    )
    .unwrap();
    assert_eq!(config.servers["kv"].name_prefix("kv"), "mcp__kv__");
    assert!(config.servers["kv"].rewrite_uris);
    assert_eq!(config.servers["raw"].name_prefix("raw"), "");
    assert!(!config.servers["raw"].rewrite_uris);
    let err = load_text(
        "c.toml",
        "[servers.kv]\ncommand = \"kv\"\nprefix = \"a b\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("servers.kv.prefix"), "{err}");
}

#[test]
fn relative_paths_are_the_config_files_neighbours() {
    // SAFETY: tests in this module do not read this variable concurrently.
    unsafe { std::env::set_var("MCP_GATEWAY_TEST_DIR", "data") };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(
        &path,
        "[servers.local]\ncommand = \"target/release/kv\"\ncwd = \"${MCP_GATEWAY_TEST_DIR}/kv\"\n\
         [servers.onpath]\ncommand = \"npx\"\ncwd = \"/srv\"\n",
    )
    .unwrap();
    let config = Config::load(&path).unwrap();
    let local = &config.servers["local"];
    assert_eq!(
        local.command.as_deref().map(std::path::Path::new),
        Some(dir.path().join("target/release/kv").as_path())
    );
    assert_eq!(local.cwd, Some(dir.path().join("data/kv")));
    let onpath = &config.servers["onpath"];
    assert_eq!(onpath.command.as_deref(), Some("npx"));
    assert_eq!(onpath.cwd, Some(std::path::PathBuf::from("/srv")));
}

#[test]
fn an_unset_variable_in_cwd_is_named() {
    let err = load_text(
        "c.toml",
        "[servers.kv]\ncommand = \"kv\"\ncwd = \"${MCP_GATEWAY_TEST_UNSET_CWD}\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("servers.kv.cwd"), "{err}");
    assert!(err.contains("MCP_GATEWAY_TEST_UNSET_CWD"), "{err}");
}

#[test]
fn cwd_on_a_url_server_is_refused() {
    let err = load_text(
        "c.toml",
        "[servers.r]\nurl = \"http://127.0.0.1:1/mcp\"\ncwd = \"/srv\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("servers.r.cwd"), "{err}");
    assert!(err.contains("only to a `command` server"), "{err}");
}

#[test]
fn inherit_env_names_variables_of_command_servers_only() {
    let config = load_text(
        "c.toml",
        "[servers.kv]\ncommand = \"kv\"\ninherit_env = [\"AWS_PROFILE\"]\n",
    )
    .unwrap();
    assert!(matches!(
        config.servers["kv"].endpoint(),
        Endpoint::Stdio { inherit_env, .. } if inherit_env == ["AWS_PROFILE"]
    ));
    let remote = load_text(
        "c.toml",
        "[servers.r]\nurl = \"http://127.0.0.1:1/mcp\"\ninherit_env = [\"HOME\"]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(remote.contains("servers.r.inherit_env"), "{remote}");
    let bad = load_text(
        "c.toml",
        "[servers.kv]\ncommand = \"kv\"\ninherit_env = [\"A=B\"]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("not an environment variable name"), "{bad}");
}

#[test]
fn dump_masks_the_credentials_of_every_url() {
    let config = load_text(
        "c.toml",
        "[cluster]\nredis_url = \"redis://gateway:redis-hunter2@127.0.0.1:6379/0\"\n\
         [telemetry]\notlp_endpoint = \"http://collector:otlp-hunter2@127.0.0.1:4318/?api_key=key-hunter2\"\n\
         [listen.oauth]\njwks_url = \"https://idp.example/jwks?access_token=jwks-hunter2\"\n\
         audience = \"https://gateway.example/mcp\"\n",
    )
    .unwrap();
    let dump = config.dump_masked();
    assert!(!dump.contains("hunter2"), "{dump}");
    assert!(dump.contains("redis://***@127.0.0.1:6379/0"), "{dump}");
    assert!(dump.contains("http://***@127.0.0.1:4318/?***"), "{dump}");
    assert!(dump.contains("https://idp.example/jwks?***"), "{dump}");
    assert!(
        Config::from_toml(&dump).is_ok(),
        "the dump is still TOML: {dump}"
    );
}

#[test]
fn tokens_shorter_than_sixteen_characters_are_refused_once_expanded() {
    // SAFETY: tests in this module do not read this variable concurrently.
    unsafe { std::env::set_var("MCP_GATEWAY_TEST_SHORT_TOKEN", "x") };
    for tokens in [
        "[\"${MCP_GATEWAY_TEST_SHORT_TOKEN}\"]",
        "[\"fifteen-chars-x\"]",
        "[\"sixteen-chars-ok\", { token = \"short\", profile = \"p\" }]",
    ] {
        let error = load_text(
            "c.toml",
            &format!("[listen]\ntokens = {tokens}\n[profiles.p]\n"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("listen.tokens[") && error.contains("at least 16 characters"),
            "{tokens}: {error}"
        );
    }
    assert!(load_text("c.toml", "[listen]\ntokens = [\"sixteen-chars-ok\"]\n").is_ok());
}

#[test]
fn a_refused_value_names_the_line_of_its_key() {
    let err = load_text(
        "c.toml",
        "[gateway]\nmode = \"both\"\n\n[servers.kv]\ncommand = \"kv\"\nprefix = \"a b\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("c.toml:6: `servers.kv.prefix`: "), "{err}");
    let err = load_text(
        "c.json",
        "{\n  \"mcpServers\": {\n    \"kv\": {\n      \"command\": \"kv\",\n      \"url\": \"http://127.0.0.1:1/mcp\"\n    }\n  }\n}\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("c.json:5: `servers.kv.url`: "), "{err}");
}

#[test]
fn a_sandbox_table_applies_only_to_a_command_server() {
    let err = load_text(
        "c.toml",
        "[servers.r]\nurl = \"http://127.0.0.1:1/mcp\"\nsandbox = false\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("servers.r.sandbox"), "{err}");
}

#[test]
fn a_confined_server_knows_the_files_of_the_gateway_it_must_not_reach() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(
        &path,
        "[gateway]\nrequire_sandbox = true\n[log]\nsessions_dir = \"logs\"\n\
         [servers.kv]\ncommand = \"kv\"\n[servers.kv.sandbox]\nwrite = [\"data\"]\nnetwork = \"none\"\n\
         [servers.r]\nurl = \"http://127.0.0.1:1/mcp\"\n",
    )
    .unwrap();
    let config = Config::load(&path).unwrap();
    let kv = &config.servers["kv"];
    assert!(kv.sandbox_context.require);
    let files = &kv.sandbox_context.gateway_files;
    assert!(files.contains(&path), "{files:?}");
    let rules = kv.sandbox.rules().unwrap();
    assert_eq!(rules.network, Network::None);
    assert_eq!(rules.write, [dir.path().join("data").to_string_lossy()]);
    // A remote server is not confined, and a change of the sandbox does not touch it.
    assert_eq!(
        config.servers["r"].sandbox_context,
        SandboxContext::default()
    );
}

#[test]
fn the_dump_shows_the_sandbox_a_stdio_server_runs_in() {
    let config = load_text(
        "c.toml",
        "[servers.kv]\ncommand = \"kv\"\n[servers.r]\nurl = \"http://127.0.0.1:1/mcp\"\n",
    )
    .unwrap();
    let dump: toml::Table = toml::from_str(&config.dump_masked()).unwrap();
    let servers = &dump["servers"];
    assert_eq!(servers["kv"]["sandbox"]["network"].as_str(), Some("any"));
    assert_eq!(
        servers["kv"]["sandbox"]["memory_mb"].as_integer(),
        Some(4096)
    );
    assert!(servers["r"].get("sandbox").is_none(), "{dump:?}");
}

#[test]
fn the_servers_own_table_wins_over_what_it_inherits() {
    let parent = |name: &str| match name {
        "PATH" => Some("/gateway/bin".into()),
        "LANG" => Some("C.UTF-8".into()),
        "NAMED" => Some("from the gateway".into()),
        _ => None,
    };
    let configured = BTreeMap::from([("PATH".to_owned(), "/server/bin".to_owned())]);
    let environment = child_environment(&configured, &["NAMED".into()], parent);
    let expected: BTreeMap<OsString, OsString> = [
        ("LANG", "C.UTF-8"),
        ("NAMED", "from the gateway"),
        ("PATH", "/server/bin"),
    ]
    .into_iter()
    .map(|(name, value)| (name.into(), value.into()))
    .collect();
    assert_eq!(environment, expected);
}
