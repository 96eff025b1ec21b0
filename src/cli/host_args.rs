//! The flags every subcommand shares: where skills come from and the limits.

use std::path::PathBuf;

use clap::Args;

use crate::config::{ExecConfig, HostConfig, Limits};

/// Where skills come from and the limits; shared by every subcommand.
#[derive(Args, Debug)]
pub(super) struct HostArgs {
    /// Workspace root; its `.agents/skills` is the highest-priority source.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// State directory (managed skills live in `<state-dir>/skills`). Default: `<workspace>/.skillhost`.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Extra skills directory, lowest priority; repeat for more.
    #[arg(long = "skills-dir", value_name = "DIR")]
    skills_dirs: Vec<PathBuf>,
    /// Do not read the global source `${XDG_CONFIG_HOME:-~/.config}/agents/skills`.
    #[arg(long)]
    no_global: bool,
    /// Largest SKILL.md that is parsed.
    #[arg(long, default_value_t = Limits::default().max_skill_md_bytes)]
    max_skill_md_bytes: u64,
    /// Largest number of bytes one skill_read returns.
    #[arg(long, default_value_t = Limits::default().max_file_bytes)]
    max_file_bytes: u64,
    /// Related files listed per skill.
    #[arg(long, default_value_t = Limits::default().max_files_listed)]
    max_files_listed: usize,
    /// Skills accepted across all sources.
    #[arg(long, default_value_t = Limits::default().max_skills)]
    max_skills: usize,
    /// Directory entries read per scan.
    #[arg(long, default_value_t = Limits::default().max_scan_entries)]
    max_scan_entries: usize,
    /// Depth below a skill directory to which files are listed.
    #[arg(long, default_value_t = Limits::default().max_file_depth)]
    max_file_depth: usize,
    /// A value components may receive for an `env` key they declare: `KEY=VALUE`, or `KEY` to pass this process's own variable. Repeatable.
    #[arg(long = "env", value_name = "KEY[=VALUE]")]
    env: Vec<String>,
    /// Longest run allowed, in seconds (also bounds a request's timeout_seconds).
    #[arg(long, default_value_t = ExecConfig::default().max_timeout_ms / 1000)]
    max_timeout_seconds: u64,
    /// Most memory one run may use, in MiB.
    #[arg(long, default_value_t = ExecConfig::default().max_memory_mb)]
    max_memory_mb: u64,
    /// Runs executing at once; more wait until their deadline.
    #[arg(long, default_value_t = ExecConfig::default().max_concurrent_runs)]
    max_concurrent_runs: u32,
    /// Runs that may wait for a slot; more are refused at once with RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = ExecConfig::default().max_waiting_runs)]
    max_waiting_runs: u32,
    /// The bubblewrap binary for script components (default: /usr/bin/bwrap or PATH).
    #[arg(long, value_name = "PATH")]
    bwrap: Option<PathBuf>,
    /// UNSAFE: run scripts without any sandbox when bubblewrap is unusable.
    /// Every such run is logged and reported in its envelope (`sandbox: "none"`).
    #[arg(long)]
    unsafe_allow_unsandboxed_scripts: bool,
    /// Revisions kept per installed skill (older ones are deleted).
    #[arg(long, default_value_t = 10)]
    keep_revisions: usize,
    /// How long files that scripts leave behind are kept under the state dir (0: not kept).
    #[arg(long, default_value_t = ExecConfig::default().artifact_retention_secs)]
    artifact_retention_seconds: u64,
}

impl HostArgs {
    pub(super) fn config(&self) -> HostConfig {
        let mut config = HostConfig::new(&self.workspace);
        if let Some(state_dir) = &self.state_dir {
            config = config.with_state_dir(state_dir);
        }
        if self.no_global {
            config.global_dir = None;
        }
        for dir in &self.skills_dirs {
            config = config.with_extra_dir(dir);
        }
        config.limits = Limits {
            max_skill_md_bytes: self.max_skill_md_bytes,
            max_file_bytes: self.max_file_bytes,
            max_files_listed: self.max_files_listed,
            max_skills: self.max_skills,
            max_scan_entries: self.max_scan_entries,
            max_file_depth: self.max_file_depth,
        };
        config.exec.max_timeout_ms = self.max_timeout_seconds.max(1) * 1000;
        config.exec.default_timeout_ms = config
            .exec
            .default_timeout_ms
            .min(config.exec.max_timeout_ms);
        config.exec.max_memory_mb = self.max_memory_mb.max(1);
        config.exec.default_memory_mb =
            config.exec.default_memory_mb.min(config.exec.max_memory_mb);
        config.exec.max_concurrent_runs = self.max_concurrent_runs.max(1);
        config.exec.max_waiting_runs = self.max_waiting_runs;
        config.exec.bwrap_path = self.bwrap.clone();
        config.exec.allow_unsandboxed_scripts = self.unsafe_allow_unsandboxed_scripts;
        config.exec.artifact_retention_secs = self.artifact_retention_seconds;
        config.keep_revisions = self.keep_revisions.max(1);
        for entry in &self.env {
            match entry.split_once('=') {
                Some((key, value)) => {
                    config.exec.env.insert(key.to_string(), value.to_string());
                }
                None => match std::env::var(entry) {
                    Ok(value) => {
                        config.exec.env.insert(entry.clone(), value);
                    }
                    Err(_) => tracing::warn!("--env {entry}: this process has no such variable"),
                },
            }
        }
        config
    }
}
