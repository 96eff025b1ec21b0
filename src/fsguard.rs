//! Skill-relative path checks and bounded reads. Every path from a client is
//! hostile: it is checked syntactically (no `..`, no absolute path, no hidden
//! component such as `.git` or `.env`, which may hold credentials and are
//! never listed), then opened through a cap-std `Dir` rooted at the skill
//! directory, so no symlink can reach a file outside the skill.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

use crate::error::{ErrorKind, HostError};

/// cap-std's message for an open that would leave the directory.
const CAP_STD_ESCAPE: &str = "a path led outside of the filesystem";

/// Check a client-supplied skill-relative path and return it normalized
/// (`/`-separated, no `.` or empty segments). `\` counts as a separator so
/// that Windows-style traversal (`..\\x`) is caught too.
pub fn normalize_relative(path: &str) -> Result<String, HostError> {
    if path.contains('\0') {
        return Err(HostError::new(
            ErrorKind::InvalidPath,
            "the path contains a NUL byte",
        ));
    }
    if path.trim().is_empty() {
        return Err(HostError::new(
            ErrorKind::InvalidPath,
            "the path is empty; pass a file path relative to the skill directory, as listed by skill_load",
        ));
    }
    let bytes = path.as_bytes();
    let windows_drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if path.starts_with('/') || path.starts_with('\\') || windows_drive {
        return Err(HostError::new(
            ErrorKind::PathOutsideSkill,
            format!("`{path}` is absolute; pass a path relative to the skill directory"),
        ));
    }
    let mut parts = Vec::new();
    for part in path.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => {
                return Err(HostError::new(
                    ErrorKind::PathOutsideSkill,
                    format!("`{path}` contains `..`; only paths inside the skill can be read"),
                ));
            }
            hidden if hidden.starts_with('.') => {
                return Err(HostError::new(
                    ErrorKind::AccessDenied,
                    format!(
                        "`{path}` names a hidden entry (`{hidden}`); hidden files such as .git or .env are never served"
                    ),
                ));
            }
            other => parts.push(other),
        }
    }
    if parts.is_empty() {
        return Err(HostError::new(
            ErrorKind::InvalidPath,
            format!("`{path}` names the skill directory itself, not a file"),
        ));
    }
    Ok(parts.join("/"))
}

/// Open the regular file `rel` (already normalized) inside `skill_dir`
/// through cap-std: no symlink may lead outside the skill, and a FIFO or
/// device never blocks the caller.
pub fn open_in_skill(skill_dir: &Path, rel: &str) -> Result<std::fs::File, HostError> {
    let dir = Dir::open_ambient_dir(skill_dir, ambient_authority()).map_err(|e| {
        HostError::new(
            ErrorKind::IoError,
            format!(
                "the skill directory {} cannot be opened: {e}",
                skill_dir.display()
            ),
        )
    })?;
    let mut options = OpenOptions::new();
    options.read(true);
    // A FIFO must not block the server; a terminal must not become ours.
    options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    let file = dir
        .open_with(rel, &options)
        .map_err(|e| open_error(e, rel))?
        .into_std();
    let meta = file
        .metadata()
        .map_err(|e| HostError::new(ErrorKind::IoError, format!("`{rel}`: {e}")))?;
    if meta.is_dir() {
        return Err(HostError::new(
            ErrorKind::InvalidPath,
            format!("`{rel}` is a directory; pass one of the file paths listed by skill_load"),
        ));
    }
    if !meta.is_file() {
        return Err(HostError::new(
            ErrorKind::InvalidPath,
            format!("`{rel}` is not a regular file"),
        ));
    }
    Ok(file)
}

/// Bytes read from a skill file, with the file's size and where they start.
#[derive(Debug, Clone)]
pub struct ReadBytes {
    pub bytes: Vec<u8>,
    pub size: u64,
    pub offset: u64,
}

/// Read `rel` (already normalized) inside `skill_dir`, from `offset`, at most
/// `length` bytes (the rest of the file when `None`), never more than
/// `max_bytes`. Without `length`, a rest larger than `max_bytes` is
/// `FILE_TOO_LARGE` rather than a silent cut.
pub fn read_in_skill(
    skill_dir: &Path,
    rel: &str,
    offset: u64,
    length: Option<u64>,
    max_bytes: u64,
) -> Result<ReadBytes, HostError> {
    let mut file = open_in_skill(skill_dir, rel)?;
    let size = file
        .metadata()
        .map_err(|e| HostError::new(ErrorKind::IoError, format!("`{rel}`: {e}")))?
        .len();
    if offset > size {
        return Err(HostError::new(
            ErrorKind::InvalidInput,
            format!("offset {offset} is past the end of `{rel}` ({size} bytes)"),
        ));
    }
    let rest = size - offset;
    let want = match length {
        None if rest > max_bytes => {
            return Err(HostError::new(
                ErrorKind::FileTooLarge,
                format!(
                    "`{rel}` is {size} bytes; one read returns at most {max_bytes}. Pass offset and length to read it in parts, or raise --max-file-bytes"
                ),
            ));
        }
        None => rest,
        Some(length) => length.min(rest).min(max_bytes),
    };
    if offset > 0 {
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| HostError::new(ErrorKind::IoError, format!("`{rel}`: {e}")))?;
    }
    let mut bytes = Vec::with_capacity(want as usize);
    file.take(want)
        .read_to_end(&mut bytes)
        .map_err(|e| HostError::new(ErrorKind::IoError, format!("`{rel}`: {e}")))?;
    Ok(ReadBytes {
        bytes,
        size,
        offset,
    })
}

fn open_error(error: io::Error, rel: &str) -> HostError {
    if error.kind() == io::ErrorKind::PermissionDenied && error.to_string() == CAP_STD_ESCAPE {
        return HostError::new(
            ErrorKind::PathOutsideSkill,
            format!(
                "`{rel}` goes through a symlink that is absolute or leads outside the skill directory; it cannot be read"
            ),
        );
    }
    match error.kind() {
        io::ErrorKind::NotFound => HostError::new(
            ErrorKind::FileNotFound,
            format!("no file `{rel}` in this skill; skill_load lists its files"),
        ),
        io::ErrorKind::PermissionDenied => HostError::new(
            ErrorKind::AccessDenied,
            format!("`{rel}` exists but the host may not read it (permission denied)"),
        ),
        io::ErrorKind::NotADirectory => HostError::new(
            ErrorKind::FileNotFound,
            format!("no file `{rel}` in this skill: a part of the path is not a directory"),
        ),
        _ if error.raw_os_error() == Some(libc::ELOOP) => {
            HostError::new(ErrorKind::InvalidPath, format!("`{rel}` is a symlink loop"))
        }
        _ => HostError::new(
            ErrorKind::IoError,
            format!("`{rel}` cannot be opened: {error}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_harmless_paths() {
        assert_eq!(normalize_relative("a/b.md").unwrap(), "a/b.md");
        assert_eq!(normalize_relative("./a//b.md").unwrap(), "a/b.md");
        assert_eq!(normalize_relative("a\\b.md").unwrap(), "a/b.md");
    }

    #[test]
    fn refuses_hostile_paths() {
        for (path, kind) in [
            ("../x", ErrorKind::PathOutsideSkill),
            ("a/../../x", ErrorKind::PathOutsideSkill),
            ("a/..", ErrorKind::PathOutsideSkill),
            ("..\\..\\etc\\passwd", ErrorKind::PathOutsideSkill),
            ("/etc/passwd", ErrorKind::PathOutsideSkill),
            ("\\\\server\\share", ErrorKind::PathOutsideSkill),
            ("C:\\Windows", ErrorKind::PathOutsideSkill),
            ("a\0b", ErrorKind::InvalidPath),
            ("", ErrorKind::InvalidPath),
            ("./", ErrorKind::InvalidPath),
            (".env", ErrorKind::AccessDenied),
            (".git/config", ErrorKind::AccessDenied),
            ("a/.secret/b", ErrorKind::AccessDenied),
        ] {
            assert_eq!(normalize_relative(path).unwrap_err().kind, kind, "{path:?}");
        }
    }
}
