//! Running one sandboxed process to completion: rlimits and a fresh process
//! group set in `pre_exec`, every inherited descriptor but 0-2 (and the
//! artifact channel) closed, stdin fed, stdout/stderr drained concurrently
//! with caps, a deadline and cancellation that SIGKILL the whole group, and
//! the exit status and rusage from `wait4`.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How often a waiting run checks for cancellation.
const POLL: Duration = Duration::from_millis(20);
/// How long a stopped process's parent gets to reap it before the whole
/// process group is killed.
const KILL_GRACE: Duration = Duration::from_millis(200);
/// How long output is still read after the process ended.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Resource limits applied to the process (and inherited by its children).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rlimits {
    pub(crate) cpu_seconds: u64,
    pub(crate) address_space: u64,
    pub(crate) file_size: u64,
    pub(crate) open_files: u64,
    /// Processes of the calling user, counted host-wide (`RLIMIT_NPROC`).
    pub(crate) processes: u64,
}

pub(crate) struct Spec {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<OsString>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) stdin: Vec<u8>,
    pub(crate) limits: Rlimits,
    pub(crate) timeout: Duration,
    pub(crate) cancel: Option<Arc<AtomicBool>>,
    pub(crate) max_output: usize,
    /// Give the process a pipe as fd 3 and collect up to this many bytes from it.
    pub(crate) side_channel: Option<usize>,
    /// Switch to this (uid, gid), without supplementary groups, before exec.
    pub(crate) run_as: Option<(u32, u32)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    Exited(i32),
    Signaled(i32),
}

#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) ended: Ended,
    pub(crate) timed_out: bool,
    pub(crate) cancelled: bool,
    pub(crate) stdout: Captured,
    pub(crate) stderr: Captured,
    pub(crate) side_channel: Captured,
    pub(crate) cpu_time: Duration,
    pub(crate) max_rss_bytes: u64,
}

/// Bytes read from a pipe: the first `cap`, and whether more came.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    pub(crate) bytes: Vec<u8>,
    pub(crate) truncated: bool,
}

/// Run `spec` to completion. `Err` when the process could not be started.
pub(crate) fn run(spec: Spec) -> std::io::Result<Finished> {
    let side = match spec.side_channel {
        Some(_) => Some(pipe()?),
        None => None,
    };
    let side_write = side.as_ref().map(|(_, write)| write.as_raw_fd());
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    let limits = spec.limits;
    let run_as = spec.run_as;
    // SAFETY: only async-signal-safe calls (setpgid, setrlimit, setgroups,
    // setgid, setuid, dup2, close_range) run between fork and exec.
    unsafe {
        command.pre_exec(move || prepare_child(limits, side_write, run_as));
    }
    let mut child = command.spawn()?;
    let pid = child.id() as libc::pid_t;
    let side_read = side.map(|(read, write)| {
        drop(write);
        read
    });

    let stdin = child.stdin.take();
    let input = spec.stdin;
    let feeder = std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            // The process may exit without reading; a broken pipe is fine.
            let _ = stdin.write_all(&input);
        }
    });
    let out = drain(child.stdout.take(), spec.max_output);
    let err = drain(child.stderr.take(), spec.max_output);
    let side_reader = drain(
        side_read.map(std::fs::File::from),
        spec.side_channel.unwrap_or(0),
    );

    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut status = 0;
        // SAFETY: rusage is plain data, written by the kernel.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let waited = loop {
            // SAFETY: waiting for our own child with valid out pointers.
            let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            if r == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            }
            break r;
        };
        let _ = sender.send((waited, status, usage));
    });

    let deadline = Instant::now() + spec.timeout;
    let mut timed_out = false;
    let mut cancelled = false;
    let mut kill_deadline: Option<Instant> = None;
    let (waited, status, usage) = loop {
        let now = Instant::now();
        let slice = deadline.saturating_duration_since(now).min(POLL);
        match receiver.recv_timeout(slice) {
            Ok(result) => break result,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break (-1, 0, unsafe { std::mem::zeroed() });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let cancel = spec
                    .cancel
                    .as_ref()
                    .is_some_and(|c| c.load(Ordering::Relaxed));
                if !(timed_out || cancelled) && (cancel || Instant::now() >= deadline) {
                    cancelled = cancel;
                    timed_out = !cancel;
                    stop(pid);
                    kill_deadline = Some(Instant::now() + KILL_GRACE);
                }
                if kill_deadline.is_some_and(|at| Instant::now() >= at) {
                    kill_group(pid);
                    kill_deadline = None;
                }
            }
        }
    };
    // The pipes reach their end when every holder is gone. Inside the
    // sandbox the PID namespace dies with the process; outside it a detached
    // grandchild could keep a pipe open, so waiting for that is bounded.
    let grace = Instant::now() + DRAIN_GRACE;
    let stdout = out.finish(grace);
    let stderr = err.finish(grace);
    let side_channel = side_reader.finish(grace);
    drop(feeder);
    drop(child);

    let ended = if waited == -1 {
        Ended::Signaled(libc::SIGKILL)
    } else if libc::WIFEXITED(status) {
        Ended::Exited(libc::WEXITSTATUS(status))
    } else {
        Ended::Signaled(libc::WTERMSIG(status))
    };
    let cpu = |tv: libc::timeval| {
        Duration::new(tv.tv_sec.max(0) as u64, (tv.tv_usec.max(0) as u32) * 1000)
    };
    Ok(Finished {
        ended,
        timed_out,
        cancelled,
        stdout,
        stderr,
        side_channel,
        cpu_time: cpu(usage.ru_utime) + cpu(usage.ru_stime),
        max_rss_bytes: (usage.ru_maxrss.max(0) as u64) * 1024,
    })
}

/// In the child, between fork and exec.
fn prepare_child(
    limits: Rlimits,
    side_write: Option<i32>,
    run_as: Option<(u32, u32)>,
) -> std::io::Result<()> {
    // SAFETY: async-signal-safe syscalls on our own process.
    unsafe {
        if libc::setpgid(0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        for (resource, value) in [
            (libc::RLIMIT_CPU, limits.cpu_seconds),
            (libc::RLIMIT_AS, limits.address_space),
            (libc::RLIMIT_FSIZE, limits.file_size),
            (libc::RLIMIT_NOFILE, limits.open_files),
            (libc::RLIMIT_CORE, 0),
        ] {
            let limit = libc::rlimit {
                rlim_cur: value as libc::rlim_t,
                rlim_max: value as libc::rlim_t,
            };
            if libc::setrlimit(resource, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        // Best effort: RLIMIT_NPROC counts the user's processes host-wide.
        let nproc = libc::rlimit {
            rlim_cur: limits.processes as libc::rlim_t,
            rlim_max: limits.processes as libc::rlim_t,
        };
        libc::setrlimit(libc::RLIMIT_NPROC, &nproc);
        if let Some((uid, gid)) = run_as
            && (libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(gid) != 0
                || libc::setuid(uid) != 0)
        {
            return Err(std::io::Error::last_os_error());
        }
        let first_closed = match side_write {
            Some(fd) => {
                if libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                4
            }
            None => 3,
        };
        libc::syscall(
            libc::SYS_close_range,
            first_closed as libc::c_uint,
            libc::c_uint::MAX,
            0,
        );
    }
    Ok(())
}

/// Stop a run so that its usage is still accounted: `pid` is bubblewrap,
/// its child the sandbox's PID 1 (the shell wrapper or the script). Kill
/// everything below PID 1 first, so PID 1 reaps its child and exits, and
/// bubblewrap reaps PID 1: `wait4` on bubblewrap then includes the script's
/// CPU time and memory. Without such processes, kill PID 1 (whose death
/// ends the PID namespace), or else `pid`'s whole process group.
fn stop(pid: libc::pid_t) {
    let init = children_of(pid);
    let below: Vec<libc::pid_t> = init.iter().flat_map(|&p| descendants_of(p)).collect();
    let targets = if !below.is_empty() {
        below
    } else if !init.is_empty() {
        init
    } else {
        kill_group(pid);
        return;
    };
    for target in targets {
        // SAFETY: signalling a process inside the sandbox we started.
        unsafe { libc::kill(target, libc::SIGKILL) };
    }
}

/// Direct children of every thread of `pid`.
fn children_of(pid: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect::<Vec<libc::pid_t>>()
        })
        .collect()
}

/// All processes below `pid` (bounded, in case of a fork storm).
fn descendants_of(pid: libc::pid_t) -> Vec<libc::pid_t> {
    let mut out = Vec::new();
    let mut pending = children_of(pid);
    while let Some(next) = pending.pop() {
        if out.len() >= 4096 {
            break;
        }
        out.push(next);
        pending.extend(children_of(next));
    }
    out
}

fn kill_group(pid: libc::pid_t) {
    // SAFETY: signalling the process group we created for the child.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
        libc::kill(pid, libc::SIGKILL);
    }
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: a valid two-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A pipe read to its end on a thread, keeping the first `cap` bytes.
struct Drain {
    shared: Arc<std::sync::Mutex<Captured>>,
    done: mpsc::Receiver<()>,
}

impl Drain {
    /// What was read, once the pipe ended or (at the latest) at `until`.
    fn finish(self, until: Instant) -> Captured {
        let _ = self
            .done
            .recv_timeout(until.saturating_duration_since(Instant::now()));
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *shared)
    }
}

fn drain<R: Read + Send + 'static>(pipe: Option<R>, cap: usize) -> Drain {
    let shared = Arc::new(std::sync::Mutex::new(Captured::default()));
    let sink = Arc::clone(&shared);
    let (finished, done) = mpsc::channel();
    std::thread::spawn(move || {
        let _finished = DrainDone(finished);
        let Some(mut pipe) = pipe else {
            return;
        };
        let mut buffer = [0u8; 16 * 1024];
        loop {
            match pipe.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => {
                    let mut captured = sink.lock().unwrap_or_else(|e| e.into_inner());
                    let room = cap.saturating_sub(captured.bytes.len());
                    if n > room {
                        captured.truncated = true;
                    }
                    captured.bytes.extend_from_slice(&buffer[..n.min(room)]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    });
    Drain { shared, done }
}

/// Signals the end of a drain however its thread ends.
struct DrainDone(mpsc::Sender<()>);

impl Drop for DrainDone {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}
