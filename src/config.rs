//! Host configuration: where skills live and the limits that bound every scan and read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a skills directory comes from. Lower variants win on name clashes
/// (project beats managed beats global beats extra).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// `<workspace>/.agents/skills`
    Project,
    /// `<state_dir>/skills`
    Managed,
    /// `${XDG_CONFIG_HOME:-~/.config}/agents/skills`
    Global,
    /// A directory given with `--skills-dir`.
    Extra,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Project => "project",
            SourceKind::Managed => "managed",
            SourceKind::Global => "global",
            SourceKind::Extra => "extra",
        }
    }
}

/// One directory whose immediate children are skills.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceDir {
    pub kind: SourceKind,
    pub path: PathBuf,
}

/// Every size and count bound. Each has a safe default and a CLI flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest `SKILL.md` that is parsed; bigger ones are skipped with a warning.
    pub max_skill_md_bytes: u64,
    /// Largest related file `skill_read` returns in one call.
    pub max_file_bytes: u64,
    /// Related files listed per skill (the rest are counted in a warning).
    pub max_files_listed: usize,
    /// Skills accepted across all sources.
    pub max_skills: usize,
    /// Directory entries read per scan across all sources and skill trees.
    pub max_scan_entries: usize,
    /// How deep below a skill directory related files are listed.
    pub max_file_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_skill_md_bytes: 1024 * 1024,
            max_file_bytes: 4 * 1024 * 1024,
            max_files_listed: 500,
            max_skills: 10_000,
            max_scan_entries: 200_000,
            max_file_depth: 8,
        }
    }
}

/// Defaults and bounds for running components. A component's `limits` ask
/// for values; unset ones take the defaults and every one is capped by the bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecConfig {
    pub default_timeout_ms: u64,
    /// Longest run the host allows (a request's `timeout_seconds` included).
    pub max_timeout_ms: u64,
    pub default_memory_mb: u64,
    pub max_memory_mb: u64,
    /// Default WebAssembly work budget (about one unit per instruction).
    pub default_fuel: u64,
    pub default_max_output_bytes: u64,
    pub max_output_bytes: u64,
    /// WebAssembly stack for one run.
    pub max_wasm_stack_bytes: usize,
    /// Largest component file that is compiled.
    pub max_component_bytes: u64,
    /// Runs executing at once; more wait (WebAssembly instances are pooled).
    pub max_concurrent_runs: u32,
    /// Runs that may wait for a slot; beyond that a run is RESOURCE_EXHAUSTED at once.
    pub max_waiting_runs: u32,
    /// Bytes copied into a run's scratch space for `write` permissions.
    pub max_scratch_bytes: u64,
    /// Values the operator provides for the `env` keys components declare.
    /// A component receives only keys it declared that are present here.
    pub env: BTreeMap<String, String>,
    /// bubblewrap to use; found in the usual places when `None`.
    pub bwrap_path: Option<PathBuf>,
    /// Run scripts without a sandbox when bubblewrap is unusable. Unsafe;
    /// off by default, logged on every use, reported in the envelope.
    pub allow_unsandboxed_scripts: bool,
    /// How long files scripts leave behind are kept under the state dir (0: not kept).
    pub artifact_retention_secs: u64,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            default_timeout_ms: 30_000,
            max_timeout_ms: 60_000,
            default_memory_mb: 128,
            max_memory_mb: 1024,
            default_fuel: 1_000_000_000_000,
            default_max_output_bytes: 1024 * 1024,
            max_output_bytes: 16 * 1024 * 1024,
            max_wasm_stack_bytes: 1024 * 1024,
            max_component_bytes: 64 * 1024 * 1024,
            max_concurrent_runs: 16,
            max_waiting_runs: 64,
            max_scratch_bytes: 64 * 1024 * 1024,
            env: BTreeMap::new(),
            bwrap_path: None,
            allow_unsandboxed_scripts: false,
            artifact_retention_secs: 3600,
        }
    }
}

/// Everything a [`crate::Host`] needs to know.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The project root; its `.agents/skills` is the highest-priority source.
    pub workspace: PathBuf,
    /// Host state (managed skills, caches). Default `<workspace>/.skillhost`.
    pub state_dir: PathBuf,
    /// The global user source; `None` when no home directory is known or it was disabled.
    pub global_dir: Option<PathBuf>,
    /// Extra sources, lowest priority, in the order given.
    pub extra_dirs: Vec<PathBuf>,
    pub limits: Limits,
    pub exec: ExecConfig,
    /// Revisions kept per installed skill (older ones are deleted).
    pub keep_revisions: usize,
}

impl HostConfig {
    /// Defaults for a workspace: state dir `<workspace>/.skillhost`, the global
    /// source from `XDG_CONFIG_HOME`/`HOME`, no extras.
    pub fn new(workspace: impl AsRef<Path>) -> Self {
        let workspace = absolute(workspace.as_ref());
        HostConfig {
            state_dir: workspace.join(".skillhost"),
            workspace,
            global_dir: default_global_dir(),
            extra_dirs: Vec::new(),
            limits: Limits::default(),
            exec: ExecConfig::default(),
            keep_revisions: 10,
        }
    }

    /// Use another state directory (made absolute).
    pub fn with_state_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.state_dir = absolute(dir.as_ref());
        self
    }

    /// Add an extra skills directory (made absolute).
    pub fn with_extra_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.extra_dirs.push(absolute(dir.as_ref()));
        self
    }

    /// The managed store (revisions and catalog).
    pub fn store_dir(&self) -> PathBuf {
        self.state_dir.join("store")
    }

    /// Where compiled WebAssembly artifacts are cached.
    pub fn wasm_cache_dir(&self) -> PathBuf {
        self.state_dir.join("cache").join("wasm")
    }

    /// The sources in priority order (project, managed, global, extras).
    /// A directory listed twice is kept only at its first (highest) position.
    pub fn sources(&self) -> Vec<SourceDir> {
        let mut out: Vec<SourceDir> = Vec::new();
        let mut push = |kind, path: PathBuf| {
            if !out.iter().any(|s| s.path == path) {
                out.push(SourceDir { kind, path });
            }
        };
        push(
            SourceKind::Project,
            self.workspace.join(".agents").join("skills"),
        );
        push(SourceKind::Managed, self.state_dir.join("skills"));
        if let Some(global) = &self.global_dir {
            push(SourceKind::Global, global.clone());
        }
        for extra in &self.extra_dirs {
            push(SourceKind::Extra, extra.clone());
        }
        out
    }
}

/// `${XDG_CONFIG_HOME:-~/.config}/agents/skills`. A relative `XDG_CONFIG_HOME`
/// is ignored, as the XDG base directory spec requires.
pub fn default_global_dir() -> Option<PathBuf> {
    let config_home = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|home| home.join(".config"))
        })?;
    Some(config_home.join("agents").join("skills"))
}

/// Make a path absolute against the current directory without resolving symlinks.
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
