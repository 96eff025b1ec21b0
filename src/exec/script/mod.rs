//! The script executor: Python and Bash components in a bubblewrap sandbox
//! that fails closed. Without a usable sandbox every run is
//! `SANDBOX_UNAVAILABLE`, unless the operator explicitly allowed
//! unsandboxed scripts (logged on every use and reported in the envelope).

mod artifacts;
mod process;
mod sandbox;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use self::process::{Ended, Finished, Rlimits, Spec};
pub(crate) use self::sandbox::Bwrap;
use super::envelope::SandboxKind;
use super::outcome::Outcome;
use crate::config::{ExecConfig, HostConfig};
use crate::error::ErrorKind;
use crate::skill::manifest::Runtime;

/// Runs `"$@"`, then streams the files left in /work as tar on fd 3 (when
/// there are any) and exits with the script's status.
const WRAPPER: &str = r#""$@"
status=$?
for f in /work/* /work/.[!.]* /work/..?*; do
  if [ -e "$f" ] || [ -L "$f" ]; then
    cd /work && /usr/bin/tar -cf - . >&3 2>/dev/null
    break
  fi
done
exit $status
"#;

/// Processes a run may start beyond the ones the user already has.
const EXTRA_PROCESSES: u64 = 64;
/// Largest file a script may write.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Artifact bytes collected per run.
const MAX_ARTIFACT_BYTES: usize = 16 * 1024 * 1024;

/// Everything one script run needs.
pub(crate) struct ScriptJob {
    pub(crate) skill_dir: PathBuf,
    /// Script path relative to the skill.
    pub(crate) script: String,
    pub(crate) runtime: Runtime,
    pub(crate) input: String,
    /// Time left for the run (its limit minus any wait for a run slot).
    pub(crate) timeout: Duration,
    /// The configured limit, for messages.
    pub(crate) timeout_ms: u64,
    pub(crate) memory_bytes: u64,
    pub(crate) max_output_bytes: u64,
    pub(crate) env: Vec<(String, String)>,
    /// Per-run copies of `write` directories: (host copy, skill-relative path).
    pub(crate) writable: Vec<(PathBuf, String)>,
    pub(crate) cancel: Option<Arc<AtomicBool>>,
    pub(crate) execution_id: String,
}

pub(crate) struct ScriptRuntime {
    exec: ExecConfig,
    sandbox: OnceLock<Result<Bwrap, String>>,
    artifacts_root: PathBuf,
}

impl ScriptRuntime {
    pub(crate) fn new(config: &HostConfig) -> Self {
        ScriptRuntime {
            exec: config.exec.clone(),
            sandbox: OnceLock::new(),
            artifacts_root: config.state_dir.join("artifacts"),
        }
    }

    /// The probed sandbox, or why there is none (checked once, then cached).
    pub(crate) fn sandbox(&self) -> Result<&Bwrap, &str> {
        self.sandbox
            .get_or_init(|| {
                let probed = sandbox::probe(self.exec.bwrap_path.as_deref());
                match &probed {
                    Ok(bwrap) => tracing::info!(path = %bwrap.path.display(), version = %bwrap.version, "bubblewrap sandbox available"),
                    Err(why) => tracing::warn!("script sandbox unavailable: {why}"),
                }
                probed
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// Whether scripts of `runtime` can run: interpreter present, sandbox usable.
    pub(crate) fn check(&self, runtime: Runtime) -> Result<(), String> {
        interpreter(runtime)?;
        match self.sandbox() {
            Ok(_) => Ok(()),
            Err(_) if self.exec.allow_unsandboxed_scripts => Ok(()),
            Err(why) => Err(format!(
                "scripts need a bubblewrap sandbox and none is usable: {why}"
            )),
        }
    }

    pub(crate) fn run(&self, job: &ScriptJob) -> (Outcome, SandboxKind) {
        let interpreter = match interpreter(job.runtime) {
            Ok(path) => path,
            Err(why) => {
                return (
                    Outcome::failed(ErrorKind::SandboxUnavailable, why),
                    SandboxKind::Bubblewrap,
                );
            }
        };
        let keep = (self.exec.artifact_retention_secs > 0).then(|| {
            artifacts::prune(
                &self.artifacts_root,
                Duration::from_secs(self.exec.artifact_retention_secs),
            );
            artifacts::run_dir(&self.artifacts_root, &job.execution_id)
        });
        match self.sandbox() {
            Ok(bwrap) => (
                self.run_sandboxed(bwrap, &interpreter, job, keep.as_deref()),
                SandboxKind::Bubblewrap,
            ),
            Err(why) if !self.exec.allow_unsandboxed_scripts => (
                Outcome::failed(
                    ErrorKind::SandboxUnavailable,
                    format!("scripts run only in a bubblewrap sandbox and none is usable: {why}"),
                ),
                SandboxKind::Bubblewrap,
            ),
            Err(why) => {
                tracing::warn!(
                    script = %job.script,
                    "running a script WITHOUT a sandbox (--unsafe-allow-unsandboxed-scripts): {why}"
                );
                (
                    self.run_unsandboxed(&interpreter, job, keep.as_deref()),
                    SandboxKind::None,
                )
            }
        }
    }

    fn run_sandboxed(
        &self,
        bwrap: &Bwrap,
        interpreter: &Path,
        job: &ScriptJob,
        keep: Option<&Path>,
    ) -> Outcome {
        if sandbox::sandbox_owner().is_some()
            && let Err(why) = readable_by_others(&job.skill_dir)
        {
            return Outcome::failed(
                ErrorKind::SandboxUnavailable,
                format!(
                    "this host runs as root and starts script sandboxes as `nobody`, who cannot read the skill: {why}; make it world-readable (chmod o+rX) or run skillhost as a regular user"
                ),
            );
        }
        let mut args = sandbox::base_args(self.exec.max_scratch_bytes);
        for (key, value) in sandbox_env(job, "/work", "/skill") {
            args.extend([OsString::from("--setenv"), key.into(), value.into()]);
        }
        args.extend([
            OsString::from("--ro-bind"),
            job.skill_dir.clone().into(),
            "/skill".into(),
        ]);
        for (host, rel) in &job.writable {
            if let Some((uid, gid)) = sandbox::sandbox_owner() {
                // The per-run scratch root holding the copy, then the copy.
                if let Some(parent) = host.parent() {
                    let _ = std::os::unix::fs::lchown(parent, Some(uid), Some(gid));
                }
                chown_tree(host, uid, gid);
            }
            args.extend([
                OsString::from("--bind"),
                host.clone().into(),
                format!("/skill/{rel}").into(),
            ]);
        }
        args.extend(["--chdir", "/skill", "--"].map(OsString::from));
        let tar = Path::new("/usr/bin/tar").is_file();
        if tar {
            args.extend(["/usr/bin/sh", "-c", WRAPPER, "skillhost-run"].map(OsString::from));
        }
        args.push(interpreter.into());
        args.extend(interpreter_args(
            job.runtime,
            &format!("/skill/{}", job.script),
        ));
        let finished = process::run(Spec {
            program: bwrap.path.clone(),
            args,
            env: Vec::new(),
            cwd: None,
            stdin: job.input.clone().into_bytes(),
            limits: self.rlimits(job),
            timeout: job.timeout,
            cancel: job.cancel.clone(),
            max_output: job.max_output_bytes as usize,
            side_channel: tar.then_some(MAX_ARTIFACT_BYTES),
            run_as: sandbox::sandbox_owner(),
        });
        match finished {
            Ok(finished) => {
                let files = if finished.side_channel.truncated {
                    Vec::new()
                } else {
                    artifacts::from_tar(&finished.side_channel.bytes)
                };
                outcome(finished, artifacts::describe(files, keep), job)
            }
            Err(error) => Outcome::failed(
                ErrorKind::SandboxUnavailable,
                format!("bubblewrap could not be started: {error}"),
            ),
        }
    }

    fn run_unsandboxed(&self, interpreter: &Path, job: &ScriptJob, keep: Option<&Path>) -> Outcome {
        let scratch = match tempfile::Builder::new()
            .prefix("skillhost-unsafe-")
            .tempdir()
        {
            Ok(dir) => dir,
            Err(error) => {
                return Outcome::failed(
                    ErrorKind::IoError,
                    format!("no scratch directory: {error}"),
                );
            }
        };
        let work = scratch.path().display().to_string();
        let skill = job.skill_dir.display().to_string();
        let finished = process::run(Spec {
            program: interpreter.to_path_buf(),
            args: interpreter_args(
                job.runtime,
                &job.skill_dir.join(&job.script).display().to_string(),
            ),
            env: sandbox_env(job, &work, &skill),
            cwd: Some(job.skill_dir.clone()),
            stdin: job.input.clone().into_bytes(),
            limits: self.rlimits(job),
            timeout: job.timeout,
            cancel: job.cancel.clone(),
            max_output: job.max_output_bytes as usize,
            side_channel: None,
            run_as: None,
        });
        match finished {
            Ok(finished) => {
                let files = artifacts::from_dir(scratch.path(), MAX_ARTIFACT_BYTES);
                outcome(finished, artifacts::describe(files, keep), job)
            }
            Err(error) => Outcome::failed(
                ErrorKind::IoError,
                format!("the interpreter could not be started: {error}"),
            ),
        }
    }

    fn rlimits(&self, job: &ScriptJob) -> Rlimits {
        Rlimits {
            cpu_seconds: job.timeout.as_secs() + 1,
            address_space: job.memory_bytes,
            file_size: MAX_FILE_BYTES,
            open_files: 256,
            processes: sandbox::process_budget(EXTRA_PROCESSES),
        }
    }
}

/// The interpreter for a runtime, as installed on the host (and so under
/// the sandbox's read-only /usr). Never a `python3` found on PATH: that may
/// be a shim the sandbox cannot see.
fn interpreter(runtime: Runtime) -> Result<PathBuf, String> {
    let candidates: &[&str] = match runtime {
        Runtime::Python => &["/usr/bin/python3"],
        Runtime::Bash => &["/usr/bin/bash", "/bin/bash"],
        Runtime::Wasi => &[],
    };
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "{runtime:?} scripts need {} on this host, which is not installed",
                candidates.join(" or ")
            )
        })
}

fn interpreter_args(runtime: Runtime, script: &str) -> Vec<OsString> {
    match runtime {
        // -B: no .pyc files; -s: no user site-packages. The script's own
        // directory stays on sys.path, and PYTHONPATH adds the skill root,
        // so both sibling imports and `scripts.x` package imports work.
        Runtime::Python => vec!["-B".into(), "-s".into(), script.into()],
        Runtime::Bash => vec!["--noprofile".into(), "--norc".into(), script.into()],
        Runtime::Wasi => vec![script.into()],
    }
}

/// The whole environment a script sees: a fixed minimum and the declared keys.
fn sandbox_env(job: &ScriptJob, work: &str, skill: &str) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("PATH", "/usr/bin:/bin"),
        ("HOME", work),
        ("TMPDIR", work),
        ("LANG", "C.UTF-8"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("PYTHONPATH", skill),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    env.extend(job.env.iter().cloned());
    env
}

/// Messages that mean a limit stopped the script rather than a bug in it.
const RESOURCE_SIGNS: &[&str] = &[
    "MemoryError",
    "Cannot allocate memory",
    "cannot allocate memory",
    "Resource temporarily unavailable",
    "File size limit exceeded",
    "No space left on device",
];

fn outcome(
    finished: Finished,
    artifacts: Vec<crate::exec::envelope::Artifact>,
    job: &ScriptJob,
) -> Outcome {
    let stderr = String::from_utf8_lossy(&finished.stderr.bytes);
    let resource_sign = RESOURCE_SIGNS.iter().find(|sign| stderr.contains(*sign));
    let exit_code = match finished.ended {
        Ended::Exited(code) => Some(code),
        Ended::Signaled(signal) => Some(128 + signal),
    };
    let error = if finished.cancelled {
        Some((
            ErrorKind::Cancelled,
            "the request was cancelled".to_string(),
        ))
    } else if let Some(sign) = resource_sign.filter(|_| exit_code != Some(0)) {
        Some((
            ErrorKind::ResourceExhausted,
            format!(
                "the script hit a resource limit (\"{sign}\"; memory {} bytes, {EXTRA_PROCESSES} extra processes, {MAX_FILE_BYTES}-byte files)",
                job.memory_bytes
            ),
        ))
    } else if finished.timed_out {
        Some((
            ErrorKind::ExecutionTimeout,
            format!(
                "the script passed its {} ms deadline and was killed with its whole sandbox",
                job.timeout_ms
            ),
        ))
    } else {
        match exit_code {
            Some(0) => None,
            Some(152) => Some((
                ErrorKind::ExecutionTimeout,
                "the script used up its CPU-time limit".to_string(),
            )),
            Some(153) => Some((
                ErrorKind::ResourceExhausted,
                format!("the script wrote a file over the {MAX_FILE_BYTES}-byte limit"),
            )),
            Some(137) => Some((
                ErrorKind::ResourceExhausted,
                "the script was killed (out of memory?)".to_string(),
            )),
            Some(code) => Some((
                ErrorKind::ScriptExecutionError,
                format!("the script exited with status {code}"),
            )),
            None => None,
        }
    };
    Outcome {
        exit_code: if finished.timed_out || finished.cancelled {
            None
        } else {
            exit_code
        },
        returned: None,
        stdout: finished.stdout.bytes,
        stdout_truncated: finished.stdout.truncated,
        stderr: finished.stderr.bytes,
        stderr_truncated: finished.stderr.truncated,
        memory_peak_bytes: finished.max_rss_bytes,
        fuel_consumed: None,
        cpu_time: finished.cpu_time,
        artifacts,
        error,
    }
}

/// Give a per-run copy to the sandbox's owner (best effort; a failure shows
/// up as a permission error inside the sandbox).
fn chown_tree(root: &Path, uid: u32, gid: u32) {
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        let _ = std::os::unix::fs::lchown(&path, Some(uid), Some(gid));
        if let Ok(entries) = std::fs::read_dir(&path) {
            pending.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() || t.is_file()))
                    .map(|e| e.path()),
            );
        }
    }
}

/// Whether every directory down to `dir` lets others through and `dir`
/// itself lets them list it (the sandbox user is not the file owner).
fn readable_by_others(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let real = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut path = PathBuf::from("/");
    for component in real.components().skip(1) {
        path.push(component);
        let mode = std::fs::metadata(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .permissions()
            .mode();
        let needed = if path == real { 0o005 } else { 0o001 };
        if mode & needed != needed {
            return Err(format!("{} has mode {:o}", path.display(), mode & 0o777));
        }
    }
    Ok(())
}
