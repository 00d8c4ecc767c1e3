use super::*;
use crate::config::SandboxRules;

/// A home folder with secrets, an install, a project, and the rest of a machine.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl World {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for folder in [
            "home/.ssh",
            "home/.config/gcloud",
            "home/.config/git",
            "home/projects/site",
            "home/.local/share/mcp-gateway/servers/fs",
            "srv/app/node_modules/@scope/server/dist",
            "srv/app/node_modules/dep",
            "srv/venv/bin",
            "srv/python/bin",
            "srv/python/lib",
            "srv/tool/bin",
            "srv/tool/lib",
            "srv/tool/share",
        ] {
            std::fs::create_dir_all(root.join(folder)).unwrap();
        }
        for (file, text) in [
            ("home/.ssh/id_rsa", "secret"),
            ("home/.gitconfig", "[user]"),
            ("home/.config/git/credentials", "secret"),
            ("home/projects/site/index.html", "<p>"),
            (
                "srv/app/node_modules/@scope/server/dist/index.js",
                "#!/usr/bin/env node\n",
            ),
            ("srv/app/node_modules/@scope/server/package.json", "{}"),
            ("srv/venv/pyvenv.cfg", "home = ROOT/srv/python/bin\n"),
            ("srv/venv/bin/server", "#!ROOT/srv/venv/bin/python\n"),
            ("srv/python/bin/python3", ""),
            ("srv/tool/bin/tool", ""),
        ] {
            let text = text.replace("ROOT", &root.display().to_string());
            std::fs::write(root.join(file), text).unwrap();
        }
        std::os::unix::fs::symlink(
            root.join("srv/python/bin/python3"),
            root.join("srv/venv/bin/python"),
        )
        .unwrap();
        Self { _dir: dir, root }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    fn env(&self) -> BTreeMap<OsString, OsString> {
        BTreeMap::from([
            ("HOME".into(), self.path("home").into_os_string()),
            ("PATH".into(), "/usr/bin:/bin".into()),
        ])
    }

    /// The rules of `command args…` run in `cwd`, under `rules`.
    fn plan(&self, command: &str, args: &[&str], cwd: &str, rules: &SandboxRules) -> FileRules {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let env = self.env();
        let context = SandboxContext::default();
        let gateway_dirs = [self.path("home/.local/share/mcp-gateway")];
        plan(&Inputs {
            command,
            args: &args,
            cwd: &self.path(cwd),
            env: &env,
            rules,
            context: &context,
            state_dir: &self.path("home/.local/share/mcp-gateway/servers/fs"),
            gateway_dirs: &gateway_dirs,
            create: false,
        })
    }
}

fn granted(files: &FileRules, path: &Path) -> Option<(Access, Why)> {
    files
        .grants
        .iter()
        .find(|grant| grant.path == path)
        .map(|grant| (grant.access, grant.why))
}

#[test]
fn home_secrets_stay_hidden_inside_any_grant_of_home_unless_named() {
    let world = World::new();
    let rules = SandboxRules {
        read: vec!["~".into(), "~/.config/git/credentials".into()],
        ..SandboxRules::default()
    };
    let files = world.plan("/bin/true", &[], "srv", &rules);
    let ssh_key = world.path("home/.ssh/id_rsa");
    assert!(files.hidden.contains(&world.path("home/.ssh")), "{files:?}");
    assert_eq!(files.allows(&ssh_key), None);
    assert!(files.is_hidden(&ssh_key));
    assert_eq!(
        files.allows(&world.path("home/projects/site/index.html")),
        Some(Access::Read)
    );
    // Named, a secret is granted; its neighbours are not.
    assert_eq!(
        files.allows(&world.path("home/.config/git/credentials")),
        Some(Access::Read)
    );
    assert_eq!(files.allows(&world.path("home/.config/gcloud/x")), None);
    // The gateway's own data folder is hidden, the server's own state in it is not.
    assert_eq!(
        files.allows(&world.path("home/.local/share/mcp-gateway/oauth/x.json")),
        None
    );
    assert_eq!(
        files.allows(&world.path("home/.local/share/mcp-gateway/servers/fs/db")),
        Some(Access::Write)
    );
    // Landlock gets home's entries but the secret, never home itself.
    let rules = files.rules();
    let home = world.path("home");
    assert!(!rules.iter().any(|(path, _)| *path == home), "{rules:?}");
    assert!(
        rules
            .iter()
            .any(|(path, _)| *path == world.path("home/projects")),
        "{rules:?}"
    );
    assert!(
        !rules
            .iter()
            .any(|(path, _)| path.starts_with(world.path("home/.ssh"))),
        "{rules:?}"
    );
    assert!(
        rules
            .iter()
            .any(|(path, _)| *path == world.path("home/.config/git/credentials"))
    );
}

#[test]
fn a_link_to_a_secret_inside_a_grant_is_not_followed_into_it() {
    let world = World::new();
    std::os::unix::fs::symlink(world.path("home/.ssh"), world.path("home/keys")).unwrap();
    let rules = SandboxRules {
        read: vec!["~".into()],
        ..SandboxRules::default()
    };
    let files = world.plan("/bin/true", &[], "srv", &rules);
    assert!(
        !files
            .rules()
            .iter()
            .any(|(path, _)| path.starts_with(world.path("home/.ssh"))),
        "{:?}",
        files.rules()
    );
}

#[test]
fn the_home_folder_is_never_guessed() {
    let world = World::new();
    // Run from home, told to serve home: neither is granted without a name.
    let files = world.plan(
        "/bin/true",
        &[&world.path("home").display().to_string()],
        "home",
        &SandboxRules::default(),
    );
    assert_eq!(
        files.allows(&world.path("home/projects/site/index.html")),
        None
    );
    assert!(
        files.notes.iter().any(|note| note.contains("home folder")),
        "{:?}",
        files.notes
    );
}

#[test]
fn the_folder_a_server_is_told_to_serve_is_writable_and_its_working_folder_readable() {
    let world = World::new();
    let site = world.path("home/projects/site");
    let files = world.plan(
        "/bin/true",
        &["--root", &site.display().to_string()],
        "srv/tool",
        &SandboxRules::default(),
    );
    assert_eq!(granted(&files, &site), Some((Access::Write, Why::Argument)));
    assert_eq!(
        granted(&files, &world.path("srv/tool")),
        Some((Access::Read, Why::WorkingFolder))
    );
    // `--flag=PATH` and a file: the file writable, its folder readable.
    let page = site.join("index.html");
    let files = world.plan(
        "/bin/true",
        &[&format!("--page={}", page.display())],
        "srv",
        &SandboxRules::default(),
    );
    assert_eq!(files.allows(&page), Some(Access::Write));
    assert_eq!(files.allows(&site.join("other.html")), Some(Access::Read));
    // An argument naming a secret grants nothing.
    let key = world.path("home/.ssh/id_rsa");
    let files = world.plan(
        "/bin/true",
        &[&key.display().to_string()],
        "srv",
        &SandboxRules::default(),
    );
    assert_eq!(files.allows(&key), None);
    assert!(
        files.notes.iter().any(|note| note.contains("hidden")),
        "{:?}",
        files.notes
    );
}

#[test]
fn an_install_is_found_from_its_command() {
    let world = World::new();
    // A Node package: its node_modules readable, its own package folder writable.
    let script = world.path("srv/app/node_modules/@scope/server/dist/index.js");
    let files = world.plan(
        &script.display().to_string(),
        &[],
        "home/projects/site",
        &SandboxRules::default(),
    );
    assert_eq!(
        granted(&files, &world.path("srv/app/node_modules")),
        Some((Access::Read, Why::Install))
    );
    assert_eq!(
        granted(&files, &world.path("srv/app/node_modules/@scope/server")),
        Some((Access::Write, Why::Install))
    );
    assert_eq!(
        files.allows(&world.path("srv/app/node_modules/dep/x.js")),
        Some(Access::Read)
    );
    // A virtualenv's script: the virtualenv, and the Python it was made from.
    let files = world.plan(
        &world.path("srv/venv/bin/server").display().to_string(),
        &[],
        "home/projects/site",
        &SandboxRules::default(),
    );
    assert_eq!(
        files.allows(&world.path("srv/venv/pyvenv.cfg")),
        Some(Access::Read)
    );
    assert_eq!(
        files.allows(&world.path("srv/python/lib/os.py")),
        Some(Access::Read)
    );
    // A program in a prefix's bin: its bin and lib, not its share.
    let files = world.plan(
        &world.path("srv/tool/bin/tool").display().to_string(),
        &[],
        "home/projects/site",
        &SandboxRules::default(),
    );
    assert_eq!(
        files.allows(&world.path("srv/tool/lib/x.so")),
        Some(Access::Read)
    );
    assert_eq!(files.allows(&world.path("srv/tool/share/x")), None);
}

#[test]
fn system_folders_are_readable_and_nothing_else_by_default() {
    let world = World::new();
    let files = world.plan("/bin/true", &[], "srv", &SandboxRules::default());
    assert_eq!(files.allows(Path::new("/usr/lib")), Some(Access::Read));
    assert_eq!(files.allows(Path::new("/dev/null")), Some(Access::Write));
    assert_eq!(files.allows(Path::new("/tmp/x")), None);
    assert_eq!(
        files.allows(&world.path("home/.gitconfig")),
        Some(Access::Read)
    );
    assert_eq!(files.allows(&world.path("home/projects")), None);
}

#[test]
fn a_shebang_names_its_interpreter_directly_or_through_env() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s");
    std::fs::write(&script, "#!/usr/bin/env -S node --flag\n").unwrap();
    let found = interpreter(&script, Some(OsStr::new("/usr/bin:/bin")), dir.path());
    let node_on_path = which("node", Some(OsStr::new("/usr/bin:/bin")), dir.path());
    assert_eq!(found, node_on_path);
    std::fs::write(&script, "#!/opt/python/bin/python3 -u\n").unwrap();
    assert_eq!(
        interpreter(&script, None, dir.path()),
        Some(PathBuf::from("/opt/python/bin/python3"))
    );
    std::fs::write(&script, "plain text").unwrap();
    assert_eq!(interpreter(&script, None, dir.path()), None);
}

#[test]
fn a_shell_wrappers_script_names_the_programs_it_runs() {
    let world = World::new();
    let tool = world.path("srv/tool/bin/tool");
    let script = format!("sleep 1 && exec {} --flag", tool.display());
    let files = world.plan(
        "sh",
        &["-c", &script],
        "home/projects/site",
        &SandboxRules::default(),
    );
    assert_eq!(files.allows(&tool), Some(Access::Read));
    assert_eq!(
        files.allows(&world.path("srv/tool/lib/x.so")),
        Some(Access::Read)
    );
    // Not for a program that is no shell.
    let files = world.plan(
        "/bin/true",
        &["-c", &script],
        "home/projects/site",
        &SandboxRules::default(),
    );
    assert_eq!(files.allows(&tool), None);
}
