//! Host configuration: where skills live and the limits that bound every scan and read.

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
