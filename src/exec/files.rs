//! The directories a run may see: each declared `filesystem` permission,
//! resolved inside the skill; `write` ones as a private per-run copy so the
//! installed skill never changes.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::error::{ErrorKind, HostError};
use crate::fsguard;
use crate::skill::manifest::{Access, FsPermission};

/// Entries copied into a run's scratch space at most.
const MAX_SCRATCH_ENTRIES: usize = 10_000;

/// A directory to give the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    pub(crate) host: PathBuf,
    /// The skill-relative path, which is also the guest path.
    pub(crate) guest: String,
    pub(crate) write: bool,
}

/// The mounts of one run; the scratch copies are removed when this drops.
#[derive(Debug)]
pub(crate) struct RunFiles {
    pub(crate) mounts: Vec<Mount>,
    _scratch: Option<tempfile::TempDir>,
}

/// Resolve `permissions` for a run of a component in `skill_dir`.
pub(crate) fn prepare(
    skill_dir: &Path,
    permissions: &[FsPermission],
    max_scratch_bytes: u64,
) -> Result<RunFiles, HostError> {
    let mut mounts = Vec::new();
    let mut scratch: Option<tempfile::TempDir> = None;
    let mut budget = max_scratch_bytes;
    for (index, permission) in permissions.iter().enumerate() {
        let rel = fsguard::normalize_relative(&permission.path)?;
        let host = resolve_inside(skill_dir, &rel)?;
        let write = permission.access == Access::Write;
        let host = if write {
            let root = match &scratch {
                Some(dir) => dir.path().to_path_buf(),
                None => {
                    let dir = tempfile::Builder::new()
                        .prefix("skillhost-run-")
                        .tempdir()
                        .map_err(|e| io_error("cannot create a scratch directory", e))?;
                    let path = dir.path().to_path_buf();
                    scratch = Some(dir);
                    path
                }
            };
            let copy = root.join(index.to_string());
            let mut entries = 0;
            copy_tree(&host, &copy, &mut budget, &mut entries)?;
            copy
        } else {
            host
        };
        mounts.push(Mount {
            host,
            guest: rel,
            write,
        });
    }
    Ok(RunFiles {
        mounts,
        _scratch: scratch,
    })
}

/// The real path of the skill-relative directory `rel`, refused when it
/// leads outside the skill or is not a directory.
pub(crate) fn resolve_inside(skill_dir: &Path, rel: &str) -> Result<PathBuf, HostError> {
    let dir = Dir::open_ambient_dir(skill_dir, ambient_authority())
        .map_err(|e| io_error("cannot open the skill directory", e))?;
    match dir.open_dir(rel) {
        Ok(_) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(HostError::new(
                ErrorKind::FileNotFound,
                format!("the declared directory `{rel}` does not exist in the skill"),
            ));
        }
        Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {
            return Err(HostError::new(
                ErrorKind::AccessDenied,
                format!(
                    "the declared directory `{rel}` leads outside the skill; it is not mounted"
                ),
            ));
        }
        Err(error) => {
            return Err(HostError::new(
                ErrorKind::InvalidPath,
                format!("the declared path `{rel}` is not a directory: {error}"),
            ));
        }
    }
    let real = fs::canonicalize(skill_dir.join(rel)).map_err(|e| io_error(rel, e))?;
    let root = fs::canonicalize(skill_dir).map_err(|e| io_error("the skill directory", e))?;
    if !real.starts_with(&root) {
        return Err(HostError::new(
            ErrorKind::AccessDenied,
            format!("the declared directory `{rel}` leads outside the skill; it is not mounted"),
        ));
    }
    Ok(real)
}

/// Copy regular files and directories (never symlinks or devices), bounded.
fn copy_tree(
    from: &Path,
    to: &Path,
    budget: &mut u64,
    entries: &mut usize,
) -> Result<(), HostError> {
    fs::create_dir_all(to).map_err(|e| io_error("cannot create a scratch directory", e))?;
    let listing =
        fs::read_dir(from).map_err(|e| io_error("cannot read a declared directory", e))?;
    for entry in listing {
        let entry = entry.map_err(|e| io_error("cannot read a declared directory", e))?;
        *entries += 1;
        if *entries > MAX_SCRATCH_ENTRIES {
            return Err(too_large(format!(
                "more than {MAX_SCRATCH_ENTRIES} entries"
            )));
        }
        let file_type = entry
            .file_type()
            .map_err(|e| io_error("cannot read a declared directory", e))?;
        let target = to.join(entry.file_name());
        if file_type.is_dir() {
            copy_tree(&entry.path(), &target, budget, entries)?;
        } else if file_type.is_file() {
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            if size > *budget {
                return Err(too_large(format!("more than {} bytes", *budget)));
            }
            *budget -= size;
            fs::copy(entry.path(), &target).map_err(|e| io_error("cannot copy into scratch", e))?;
        }
    }
    Ok(())
}

fn too_large(what: String) -> HostError {
    HostError::new(
        ErrorKind::ResourceExhausted,
        format!("a writable directory holds {what}; raise --max-scratch-bytes or declare less"),
    )
}

fn io_error(what: &str, error: io::Error) -> HostError {
    HostError::new(ErrorKind::IoError, format!("{what}: {error}"))
}
