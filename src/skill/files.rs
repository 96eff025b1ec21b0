//! Reading a skill's own files (`SKILL.md`, `skill.yaml`) with a size bound,
//! parsing them and keeping the digest of the bytes that were parsed.

use std::fs;
use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::frontmatter::{ParsedSkillMd, parse_skill_md};
use super::manifest::{Manifest, parse_manifest};

/// A parsed file (or why it could not be used) and the sha256 of its bytes.
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    pub result: Result<Arc<T>, String>,
    pub digest: [u8; 32],
}

/// Read and parse `SKILL.md` (`meta` is a fresh stat of it).
pub fn load_entry(
    path: &Path,
    meta: &fs::Metadata,
    dir_name: &str,
    limit: u64,
) -> Loaded<ParsedSkillMd> {
    let loaded = load(path, meta, limit, "SKILL.md", |text| {
        parse_skill_md(text, dir_name)
    });
    match &loaded.result {
        Ok(parsed) => {
            for warning in &parsed.warnings {
                tracing::warn!(path = %path.display(), "{warning}");
            }
        }
        Err(reason) => tracing::warn!(path = %path.display(), "skill skipped: {reason}"),
    }
    loaded
}

/// Read and parse `skill.yaml` (`meta` is a fresh stat of it).
pub fn load_manifest(path: &Path, meta: &fs::Metadata, limit: u64) -> Loaded<Manifest> {
    let loaded = load(path, meta, limit, "skill.yaml", parse_manifest);
    if let Err(reason) = &loaded.result {
        tracing::warn!(path = %path.display(), "{reason}");
    }
    loaded
}

fn load<T>(
    path: &Path,
    meta: &fs::Metadata,
    limit: u64,
    label: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Loaded<T> {
    if meta.len() > limit {
        return Loaded {
            result: Err(format!(
                "{label} is {} bytes; the limit is {limit} (--max-skill-md-bytes)",
                meta.len()
            )),
            digest: [0; 32],
        };
    }
    match read_bounded(path, meta.len(), limit) {
        Err(error) => Loaded {
            result: Err(format!("{label} cannot be read: {}", describe_io(&error))),
            digest: [0; 32],
        },
        Ok(bytes) => {
            let digest = Sha256::digest(&bytes).into();
            let result = String::from_utf8(bytes)
                .map_err(|_| format!("{label} is not valid UTF-8"))
                .and_then(|text| parse(&text))
                .map(Arc::new);
            Loaded { result, digest }
        }
    }
}

/// Read a file expected to be `expected` bytes, at most `limit`; more than
/// `limit` is an error (the file grew past it).
pub(crate) fn read_bounded(path: &Path, expected: u64, limit: u64) -> io::Result<Vec<u8>> {
    let file = fs::File::open(path)?;
    let mut bytes = Vec::with_capacity(expected.min(limit) as usize + 1);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::other(format!(
            "file is larger than the {limit}-byte limit"
        )));
    }
    Ok(bytes)
}

/// A short, human description of an I/O error.
pub(crate) fn describe_io(error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::NotFound => "it does not exist (a broken symlink?)".into(),
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => error.to_string(),
    }
}

/// Lowercase hex of a digest.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}
