//! Issue 5 through the gateway: `mcp-gateway sdk` for server-everything,
//! server-filesystem and server-memory federated together type-checks under the real
//! TypeScript compiler, a program calling three of them compiles, and a wrong argument
//! type does not.

use std::process::Command;

use mcp_gateway_tests::*;

fn tsc(dir: &std::path::Path, files: &[&str]) -> std::process::Output {
    Command::new(npm_bin("tsc"))
        .args([
            "--noEmit", "--strict", "--target", "es2022", "--lib", "es2022",
        ])
        .args(files)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn the_sdk_of_three_real_servers_type_checks() {
    let root = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(&format!(
        "{}{}{}",
        npm_server("everything", "mcp-server-everything", &["stdio"]),
        npm_server(
            "filesystem",
            "mcp-server-filesystem",
            &[&root.path().to_string_lossy()]
        ),
        npm_server("memory", "mcp-server-memory", &[]),
    ));
    let output = workspace.cli(&["sdk"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let sdk = String::from_utf8(output.stdout).unwrap();
    assert!(sdk.contains("everything") && sdk.contains("filesystem") && sdk.contains("memory"));
    let again = workspace.cli(&["sdk"]);
    assert_eq!(sdk.as_bytes(), again.stdout, "byte-identical on every run");
    let dir = workspace.dir.path();
    std::fs::write(dir.join("sdk.d.ts"), &sdk).unwrap();
    std::fs::write(
        dir.join("good.ts"),
        r#"async function main() {
  const sum: string = await tools.everything["get-sum"]({ a: 1, b: 2 });
  const text = await tools.filesystem.read_text_file({ path: "/tmp/x" });
  const graph = await tools.memory.read_graph({});
  console.log(sum, text, graph);
}
export {};
"#,
    )
    .unwrap();
    let good = tsc(dir, &["sdk.d.ts", "good.ts"]);
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stdout)
    );
    std::fs::write(
        dir.join("bad.ts"),
        "async function main() {\n  await tools.everything[\"get-sum\"]({ a: \"one\", b: 2 });\n}\nexport {};\n",
    )
    .unwrap();
    let bad = tsc(dir, &["sdk.d.ts", "bad.ts"]);
    assert!(
        !bad.status.success(),
        "a wrong argument type must not compile"
    );
    let message = String::from_utf8_lossy(&bad.stdout);
    assert!(message.contains("bad.ts(2,"), "{message}");
}
