//! bubblewrap: finding it, probing that a sandbox with the real flags runs
//! (fail closed otherwise), and the argument list for one run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::process::{self, Ended, Rlimits, Spec};

/// The unprivileged user inside the sandbox.
const SANDBOX_ID: &str = "65534";
/// Oldest bubblewrap with every flag used here (`--disable-userns`, `--size`).
const MIN_VERSION: (u32, u32, u32) = (0, 8, 0);

/// A usable bubblewrap.
#[derive(Debug, Clone)]
pub(crate) struct Bwrap {
    pub(crate) path: PathBuf,
    pub(crate) version: String,
}

/// Find bubblewrap (the configured path, or the usual places and PATH),
/// check its version and run a probe sandbox with the real flags.
pub(crate) fn probe(configured: Option<&Path>) -> Result<Bwrap, String> {
    let path = match configured {
        Some(path) => path.to_path_buf(),
        None => find_bwrap().ok_or_else(|| {
            "bubblewrap (bwrap) is not installed; install it (Debian: apt-get install bubblewrap) or pass --bwrap PATH".to_string()
        })?,
    };
    let output = Command::new(&path)
        .arg("--version")
        .env_clear()
        .output()
        .map_err(|e| format!("{} cannot be run: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let version = text.rsplit(' ').next().unwrap_or("").to_string();
    let parsed = parse_version(&version)
        .ok_or_else(|| format!("{} printed an unknown version: {text:?}", path.display()))?;
    if parsed < MIN_VERSION {
        return Err(format!(
            "{} is bubblewrap {version}; skillhost needs {}.{}.{} or newer",
            path.display(),
            MIN_VERSION.0,
            MIN_VERSION.1,
            MIN_VERSION.2
        ));
    }
    let mut args = base_args(16 * 1024 * 1024);
    args.extend(["--chdir", "/"].map(OsString::from));
    args.push("--".into());
    args.push("/usr/bin/true".into());
    let finished = process::run(Spec {
        program: path.clone(),
        args,
        env: Vec::new(),
        cwd: None,
        stdin: Vec::new(),
        limits: Rlimits {
            cpu_seconds: 10,
            address_space: 1 << 30,
            file_size: 1 << 20,
            open_files: 64,
            processes: process_budget(16),
        },
        timeout: Duration::from_secs(10),
        cancel: None,
        max_output: 4096,
        side_channel: None,
        run_as: sandbox_owner(),
    })
    .map_err(|e| format!("{} cannot be started: {e}", path.display()))?;
    if finished.ended != Ended::Exited(0) {
        return Err(format!(
            "a probe sandbox did not run ({:?}): {}",
            finished.ended,
            String::from_utf8_lossy(&finished.stderr.bytes).trim()
        ));
    }
    Ok(Bwrap { path, version })
}

/// Who starts bubblewrap. A host running as root starts it as `nobody`:
/// the kernel never enforces `RLIMIT_NPROC` for root, so a fork bomb in a
/// sandbox owned by root could exhaust the host's process table.
pub(crate) fn sandbox_owner() -> Option<(u32, u32)> {
    // SAFETY: plain syscall.
    (unsafe { libc::geteuid() } == 0).then_some((65534, 65534))
}

fn find_bwrap() -> Option<PathBuf> {
    let fixed = ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"].map(PathBuf::from);
    let from_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("bwrap"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    fixed.into_iter().chain(from_path).find(|p| p.is_file())
}

fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

/// Namespaces, identity, capabilities, a fresh environment, read-only
/// system directories, fresh /proc and /dev, and a size-capped /work
/// (HOME, TMPDIR) and /tmp. Never the host's `/`, home or sockets.
pub(crate) fn base_args(scratch_bytes: u64) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--unshare-cgroup",
        // The command itself is PID 1: when it exits the whole PID namespace
        // dies, and bwrap's wait4 then carries the command's CPU time and
        // peak memory (a separate reaper would hide them).
        "--as-pid-1",
        "--disable-userns",
        "--uid",
        SANDBOX_ID,
        "--gid",
        SANDBOX_ID,
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    .map(OsString::from)
    .to_vec();
    for dir in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        match std::fs::read_link(dir) {
            Ok(target) => {
                args.push("--symlink".into());
                args.push(target.into_os_string());
                args.push(dir.into());
            }
            Err(_) if Path::new(dir).is_dir() => {
                args.extend(["--ro-bind", dir, dir].map(OsString::from));
            }
            Err(_) => {}
        }
    }
    for file in ["/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime"] {
        args.extend(["--ro-bind-try", file, file].map(OsString::from));
    }
    args.extend(["--proc", "/proc", "--dev", "/dev"].map(OsString::from));
    args.extend(["--size".into(), OsString::from(scratch_bytes.to_string())]);
    args.extend(["--perms", "0700", "--tmpfs", "/work"].map(OsString::from));
    args.extend(["--size".into(), OsString::from((16u64 << 20).to_string())]);
    args.extend(["--tmpfs", "/tmp"].map(OsString::from));
    args
}

/// An `RLIMIT_NPROC` value that lets a run start `extra` more processes
/// than the user it runs as has now (the limit counts that user's
/// processes host-wide).
pub(crate) fn process_budget(extra: u64) -> u64 {
    // SAFETY: plain syscall.
    let uid = sandbox_owner().map_or_else(|| unsafe { libc::getuid() }, |(uid, _)| uid);
    processes_of(uid) + extra
}

/// Processes whose owner is `uid` (the owner of their /proc directory).
fn processes_of(uid: u32) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare() {
        assert_eq!(parse_version("0.8.0"), Some((0, 8, 0)));
        assert_eq!(parse_version("0.11"), Some((0, 11, 0)));
        assert!(parse_version("0.7.9").unwrap() < MIN_VERSION);
        assert_eq!(parse_version("x"), None);
    }

    #[test]
    fn the_sandbox_never_binds_the_host_root_or_home() {
        let args: Vec<String> = base_args(1024)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        for window in args.windows(2) {
            if window[0].contains("bind") {
                assert_ne!(window[1], "/", "{args:?}");
                assert!(!window[1].starts_with("/home") && !window[1].starts_with("/root"));
            }
        }
        for flag in [
            "--unshare-net",
            "--disable-userns",
            "--new-session",
            "--clearenv",
            "--die-with-parent",
        ] {
            assert!(args.iter().any(|a| a == flag), "{flag}");
        }
    }
}
