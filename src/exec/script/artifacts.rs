//! Files a script leaves in its scratch directory: read from the tar stream
//! the sandbox writes on its side channel (untrusted: the script could have
//! written to it too), listed with sizes and digests, small text ones inline,
//! and optionally kept on disk for a while.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use crate::exec::envelope::Artifact;
use crate::skill::files::hex;

/// Artifacts listed per run.
pub(crate) const MAX_ARTIFACTS: usize = 100;
/// Bytes of a file shown inline in the envelope.
const MAX_INLINE: usize = 16 * 1024;
/// Inline bytes per run.
const MAX_INLINE_TOTAL: usize = 64 * 1024;

/// Regular files from a tar stream, with safe relative paths.
pub(crate) fn from_tar(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut archive = tar::Archive::new(bytes);
    let Ok(entries) = archive.entries() else {
        return out;
    };
    for entry in entries {
        let Ok(mut entry) = entry else { break };
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let Some(path) = entry.path().ok().and_then(|p| safe_relative(&p)) else {
            continue;
        };
        let mut content = Vec::new();
        if entry.read_to_end(&mut content).is_err() {
            break;
        }
        out.push((path, content));
        if out.len() >= MAX_ARTIFACTS {
            break;
        }
    }
    out
}

/// Regular files below a host directory (the unsandboxed fallback).
pub(crate) fn from_dir(root: &Path, max_bytes: usize) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut budget = max_bytes;
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() && out.len() < MAX_ARTIFACTS {
                let path = entry.path();
                let Some(rel) = path.strip_prefix(root).ok().and_then(safe_relative) else {
                    continue;
                };
                let size = entry.metadata().map(|m| m.len() as usize).unwrap_or(0);
                if size > budget {
                    continue;
                }
                if let Ok(bytes) = std::fs::read(&path) {
                    budget -= bytes.len().min(budget);
                    out.push((rel, bytes));
                }
            }
        }
    }
    out.sort();
    out
}

fn safe_relative(path: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?.to_string()),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Describe the files; keep them under `keep_in` when given.
pub(crate) fn describe(files: Vec<(String, Vec<u8>)>, keep_in: Option<&Path>) -> Vec<Artifact> {
    let mut inline_left = MAX_INLINE_TOTAL;
    let mut out = Vec::new();
    for (path, bytes) in files {
        let kept_at = keep_in.and_then(|dir| {
            let target = dir.join(&path);
            let parent = target.parent()?;
            std::fs::create_dir_all(parent).ok()?;
            std::fs::write(&target, &bytes).ok()?;
            Some(target.display().to_string())
        });
        let content = match std::str::from_utf8(&bytes) {
            Ok(text) if bytes.len() <= MAX_INLINE.min(inline_left) && !text.contains('\0') => {
                inline_left -= bytes.len();
                Some(text.to_string())
            }
            _ => None,
        };
        out.push(Artifact {
            sha256: format!("sha256:{}", hex(&Sha256::digest(&bytes))),
            size: bytes.len() as u64,
            path,
            content,
            kept_at,
        });
    }
    out
}

/// Remove kept artifacts older than `retention` (best effort).
pub(crate) fn prune(root: &Path, retention: Duration) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > retention);
        if old {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Where one run's artifacts are kept.
pub(crate) fn run_dir(root: &Path, execution_id: &str) -> PathBuf {
    root.join(execution_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tar_streams_yield_only_safe_regular_files() {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(5);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header.clone(), "./report.txt", &b"hello"[..])
            .unwrap();
        builder
            .append_data(&mut header.clone(), "sub/data.bin", &[0u8, 1, 2, 3, 4][..])
            .unwrap();
        let bytes = builder.into_inner().unwrap();
        let files = from_tar(&bytes);
        assert_eq!(
            files,
            vec![
                ("report.txt".to_string(), b"hello".to_vec()),
                ("sub/data.bin".to_string(), vec![0, 1, 2, 3, 4])
            ]
        );
        assert!(from_tar(b"not a tar stream at all").is_empty());
        assert_eq!(safe_relative(Path::new("../x")), None);
        assert_eq!(safe_relative(Path::new("/etc/passwd")), None);
        let described = describe(files, None);
        assert_eq!(described[0].content.as_deref(), Some("hello"));
        assert_eq!(described[1].content, None);
        assert!(described[1].sha256.starts_with("sha256:"));
    }
}
