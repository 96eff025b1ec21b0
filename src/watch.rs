//! An inotify-based "did anything change?" oracle for the registry.
//!
//! The registry's stat-based scan is exact but costs a few `stat` calls per
//! skill. When every directory the scan depends on is watched and no event
//! arrived since the last scan, the previous result is still exact and can be
//! reused. Any event, a queue overflow or any doubt means a full scan.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Events that mean "an entry of this directory, or the directory itself,
/// changed". Reads (`IN_ACCESS`, `IN_OPEN`, `IN_CLOSE_NOWRITE`) are not
/// watched, so the scan's own reads never wake it.
const MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_ONLYDIR;

/// Filesystems whose inotify events cover every change (all writers are
/// local). Network and FUSE filesystems are polled instead.
const LOCAL_FILESYSTEMS: &[i64] = &[
    0xEF53,      // ext2/3/4
    0x5846_5342, // xfs
    0x9123_683E, // btrfs
    0x0102_1994, // tmpfs
    0x858_458F6, // ramfs
    0x794C_7630, // overlayfs
    0x2FC1_2FC1, // zfs
    0xF2F5_2010, // f2fs
];

/// True when `path` is on a filesystem whose changes inotify reports fully.
pub(crate) fn is_local_filesystem(path: &Path) -> bool {
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is a valid NUL-terminated string and stat a valid out pointer.
    if unsafe { libc::statfs(c_path.as_ptr(), &mut stat) } != 0 {
        return false;
    }
    #[allow(clippy::unnecessary_cast)]
    LOCAL_FILESYSTEMS.contains(&(stat.f_type as i64))
}

/// What [`Watcher::sync`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SyncOutcome {
    /// New watches.
    pub added: usize,
    /// Directories that could not be watched (e.g. removed meanwhile).
    pub failed: usize,
    /// The user's inotify watch limit is reached; retrying is pointless.
    pub limit_reached: bool,
}

impl SyncOutcome {
    /// Every directory was already watched before this sync.
    pub(crate) fn unchanged(&self) -> bool {
        self.added == 0 && self.failed == 0
    }
}

/// An inotify instance and the directories it watches.
pub(crate) struct Watcher {
    fd: OwnedFd,
    watches: HashMap<PathBuf, i32>,
}

impl Watcher {
    /// A new non-blocking inotify instance; `None` where inotify is unavailable.
    pub(crate) fn new() -> Option<Self> {
        // SAFETY: plain syscall; the returned fd is owned below.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            tracing::debug!(error = %io::Error::last_os_error(), "inotify unavailable; the registry polls");
            return None;
        }
        Some(Watcher {
            // SAFETY: fd is a fresh descriptor nobody else owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            watches: HashMap::new(),
        })
    }

    /// Read every pending event. True when anything happened (including a
    /// queue overflow or a read error): the caller must rescan.
    pub(crate) fn drain(&mut self) -> bool {
        let mut changed = false;
        let mut buffer = [0u8; 16 * 1024];
        loop {
            // SAFETY: the buffer is valid for its length; the fd is ours.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                )
            };
            if n > 0 {
                changed = true;
                continue;
            }
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock {
                return changed;
            }
            // EOF or a real error: the watcher cannot be trusted any more.
            return true;
        }
    }

    /// Watch exactly `dirs`: add missing watches, drop the others.
    pub(crate) fn sync(&mut self, dirs: &[PathBuf]) -> SyncOutcome {
        let wanted: std::collections::HashSet<&PathBuf> = dirs.iter().collect();
        let stale: Vec<PathBuf> = self
            .watches
            .keys()
            .filter(|p| !wanted.contains(p))
            .cloned()
            .collect();
        for path in stale {
            if let Some(wd) = self.watches.remove(&path) {
                // Two paths can share one watch (the same inode); keep it while used.
                if !self.watches.values().any(|&other| other == wd) {
                    // SAFETY: plain syscall on our fd.
                    unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), wd) };
                }
            }
        }
        let mut outcome = SyncOutcome::default();
        for dir in dirs {
            if self.watches.contains_key(dir) {
                continue;
            }
            let Ok(c_path) = CString::new(dir.as_os_str().as_bytes()) else {
                outcome.failed += 1;
                continue;
            };
            // SAFETY: c_path is NUL-terminated; the fd is ours.
            let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c_path.as_ptr(), MASK) };
            if wd < 0 {
                let error = io::Error::last_os_error();
                outcome.failed += 1;
                if error.raw_os_error() == Some(libc::ENOSPC) {
                    outcome.limit_reached = true;
                    return outcome;
                }
                tracing::debug!(dir = %dir.display(), %error, "cannot watch; the next scan polls");
            } else {
                self.watches.insert(dir.clone(), wd);
                outcome.added += 1;
            }
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_changes_in_watched_dirs_only() {
        let root = tempfile::tempdir().unwrap();
        let watched = root.path().join("watched");
        let other = root.path().join("other");
        std::fs::create_dir_all(&watched).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let Some(mut watcher) = Watcher::new() else {
            panic!("inotify is available on Linux");
        };
        let first = watcher.sync(std::slice::from_ref(&watched));
        assert_eq!((first.added, first.failed), (1, 0));
        assert!(watcher.sync(std::slice::from_ref(&watched)).unchanged());
        assert!(!watcher.drain(), "nothing happened yet");
        std::fs::write(other.join("x"), "x").unwrap();
        assert!(!watcher.drain(), "unwatched dirs are silent");
        let _ = std::fs::read_dir(&watched).unwrap().count();
        assert!(!watcher.drain(), "reads are silent");
        std::fs::write(watched.join("x"), "x").unwrap();
        assert!(watcher.drain(), "a new file is a change");
        assert!(!watcher.drain(), "events are consumed");
        let missing = watcher.sync(&[root.path().join("missing")]);
        assert_eq!(
            (missing.added, missing.failed, missing.limit_reached),
            (0, 1, false)
        );
    }

    #[test]
    fn tmpfs_or_ext4_counts_as_local() {
        let root = tempfile::tempdir().unwrap();
        assert!(is_local_filesystem(root.path()));
        assert!(!is_local_filesystem(Path::new("/proc")));
    }
}
