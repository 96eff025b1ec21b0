//! A cross-process lock (flock) that serialises every store mutation.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;

/// Held while it lives; released on drop (and by the kernel if the process dies).
pub struct StoreLock {
    _file: File,
}

impl StoreLock {
    /// Block until the exclusive lock on `<store>/lock` is ours.
    pub fn acquire(store: &Path) -> std::io::Result<StoreLock> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(store.join("lock"))?;
        loop {
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(StoreLock { _file: file });
            }
            let error = std::io::Error::last_os_error();
            if error.kind() != std::io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }
}
