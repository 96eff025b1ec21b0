//! Shared fixtures for the integration tests: an isolated workspace, state
//! dir and global config dir in a temp directory, and helpers that run the
//! real `skillhost` binary against them.
#![allow(dead_code)]

pub mod cli_json;
pub mod guests;
pub mod http;
pub mod lib_host;
pub mod mcp;
pub mod scripts;
pub mod skills;
pub mod store;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Path of the binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_skillhost"))
}

/// A temp tree: `<root>/ws` (workspace), `<root>/state`, `<root>/xdg` (XDG_CONFIG_HOME).
pub struct Fixture {
    pub root: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        // World-readable like a normal checkout: a host running as root
        // starts script sandboxes as `nobody`, who must be able to read skills.
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(root.path(), fs::Permissions::from_mode(0o755)).unwrap();
        for dir in ["ws", "state", "xdg", "home"] {
            fs::create_dir_all(root.path().join(dir)).unwrap();
        }
        Fixture { root }
    }

    pub fn path(&self) -> &Path {
        self.root.path()
    }
    pub fn workspace(&self) -> PathBuf {
        self.path().join("ws")
    }
    pub fn state_dir(&self) -> PathBuf {
        self.path().join("state")
    }
    /// `<workspace>/.agents/skills`
    pub fn project_dir(&self) -> PathBuf {
        self.workspace().join(".agents/skills")
    }
    /// `<state>/skills`
    pub fn managed_dir(&self) -> PathBuf {
        self.state_dir().join("skills")
    }
    /// `<xdg>/agents/skills`
    pub fn global_dir(&self) -> PathBuf {
        self.path().join("xdg/agents/skills")
    }

    /// Write `<source>/<dir>/SKILL.md` with the given full text; returns the skill dir.
    pub fn skill_md(&self, source: &Path, dir: &str, text: &str) -> PathBuf {
        let skill = source.join(dir);
        fs::create_dir_all(&skill).unwrap();
        fs::write(skill.join("SKILL.md"), text).unwrap();
        skill
    }

    /// A valid skill named like its directory, with a body.
    pub fn skill(&self, source: &Path, name: &str, description: &str) -> PathBuf {
        self.skill_md(
            source,
            name,
            &format!(
                "---\nname: {name}\ndescription: {description}\n---\n# {name}\nBody of {name}.\n"
            ),
        )
    }

    /// Write a related file (parents created).
    pub fn file(&self, skill_dir: &Path, rel: &str, bytes: impl AsRef<[u8]>) {
        let path = skill_dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    /// A `skillhost` command with the fixture's workspace, state dir and an
    /// isolated XDG_CONFIG_HOME/HOME; `args` go first (the subcommand).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin());
        cmd.args(args)
            .arg("--workspace")
            .arg(self.workspace())
            .arg("--state-dir")
            .arg(self.state_dir())
            .env("XDG_CONFIG_HOME", self.path().join("xdg"))
            .env("HOME", self.path().join("home"))
            .env_remove("RUST_LOG");
        cmd
    }

    /// Run a CLI subcommand to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run skillhost")
    }

    /// Run with `--json` appended; return (exit code, parsed stdout).
    pub fn json(&self, args: &[&str]) -> (i32, Value) {
        let mut all: Vec<&str> = args.to_vec();
        all.push("--json");
        let out = self.run(&all);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let value: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!(
                "stdout of {all:?} is not JSON ({e}):\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap_or(-1), value)
    }
}

/// True when bubblewrap is installed, so sandboxed script tests can run.
/// Where it is missing they skip with a printed reason, except when
/// `SKILLHOST_REQUIRE_BWRAP=1` (as CI sets it): then they fail.
pub fn bwrap_available(test: &str) -> bool {
    let found = ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"]
        .iter()
        .any(|p| Path::new(p).is_file());
    if found {
        return true;
    }
    if std::env::var("SKILLHOST_REQUIRE_BWRAP").as_deref() == Ok("1") {
        panic!("{test}: bubblewrap is not installed and SKILLHOST_REQUIRE_BWRAP=1");
    }
    eprintln!(
        "SKIPPED {test}: bubblewrap (bwrap) is not installed; install it to run the sandbox tests"
    );
    false
}
