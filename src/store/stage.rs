//! Building a revision's content in a staging directory from a directory,
//! a `.tar.gz` package or raw parts. Everything is untrusted: paths are
//! normalized, hidden entries dropped, links out of the tree refused, sizes
//! bounded, and a package whose expansion ratio looks like a bomb refused.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{ErrorKind, HostError};
use crate::fsguard;
use crate::skill::files::hex;

/// Bounds on what one install may bring in.
#[derive(Debug, Clone, Copy)]
pub struct StageLimits {
    pub max_files: usize,
    pub max_file_bytes: u64,
    pub max_total_bytes: u64,
    /// Refuse packages that expand more than this many times (with > 1 MiB out).
    pub max_ratio: u64,
}

impl Default for StageLimits {
    fn default() -> Self {
        StageLimits {
            max_files: 10_000,
            max_file_bytes: 64 * 1024 * 1024,
            max_total_bytes: 256 * 1024 * 1024,
            max_ratio: 200,
        }
    }
}

/// A file given inline (the raw-parts install).
#[derive(Debug, Clone)]
pub struct Part {
    pub path: String,
    pub bytes: Vec<u8>,
}

/// Staged content: relative path -> sha256, and totals.
#[derive(Debug, Clone, Default)]
pub struct Staged {
    pub files: BTreeMap<String, String>,
    pub bytes: u64,
    pub warnings: Vec<String>,
}

impl Staged {
    /// The revision id: sha256 over the sorted (path, digest) list.
    pub fn revision_id(&self) -> String {
        let mut hasher = Sha256::new();
        for (path, digest) in &self.files {
            hasher.update(path.as_bytes());
            hasher.update([0]);
            hasher.update(digest.as_bytes());
            hasher.update([b'\n']);
        }
        format!("sha256:{}", hex(&hasher.finalize()))
    }
}

/// A path with a hidden part (`.git/config`, `.DS_Store`); `.` and `..`
/// are not hidden (normalization deals with them).
fn is_hidden(path: &str) -> bool {
    path.split(['/', '\\'])
        .any(|part| part.starts_with('.') && part != "." && part != "..")
}

fn refuse(message: impl Into<String>) -> HostError {
    HostError::new(ErrorKind::InvalidInput, message)
}

fn io(what: &str, error: std::io::Error) -> HostError {
    HostError::new(ErrorKind::IoError, format!("{what}: {error}"))
}

/// Writes files into the staging directory while enforcing the limits.
struct Writer<'a> {
    root: &'a Path,
    limits: StageLimits,
    staged: Staged,
}

impl Writer<'_> {
    fn add(
        &mut self,
        rel: &str,
        source: &mut dyn Read,
        declared: Option<u64>,
    ) -> Result<(), HostError> {
        if is_hidden(rel) {
            self.staged
                .warnings
                .push(format!("`{rel}` is hidden and was not installed"));
            return Ok(());
        }
        let rel = fsguard::normalize_relative(rel).map_err(|e| refuse(e.message))?;
        if self.staged.files.contains_key(&rel) {
            return Err(refuse(format!("`{rel}` appears twice")));
        }
        if self.staged.files.len() >= self.limits.max_files {
            return Err(refuse(format!("more than {} files", self.limits.max_files)));
        }
        if declared.is_some_and(|size| size > self.limits.max_file_bytes) {
            return Err(refuse(format!(
                "`{rel}` is larger than {} bytes",
                self.limits.max_file_bytes
            )));
        }
        let target = self.root.join(&rel);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|e| io("staging", e))?;
        }
        let mut file = fs::File::create(&target).map_err(|e| io("staging", e))?;
        let mut hasher = Sha256::new();
        let mut written = 0u64;
        let mut buffer = [0u8; 64 * 1024];
        loop {
            let n = source.read(&mut buffer).map_err(|e| io(&rel, e))?;
            if n == 0 {
                break;
            }
            written += n as u64;
            if written > self.limits.max_file_bytes {
                return Err(refuse(format!(
                    "`{rel}` is larger than {} bytes",
                    self.limits.max_file_bytes
                )));
            }
            if self.staged.bytes + written > self.limits.max_total_bytes {
                return Err(refuse(format!(
                    "the skill is larger than {} bytes",
                    self.limits.max_total_bytes
                )));
            }
            hasher.update(&buffer[..n]);
            file.write_all(&buffer[..n]).map_err(|e| io("staging", e))?;
        }
        file.sync_all().map_err(|e| io("staging", e))?;
        self.staged.bytes += written;
        self.staged
            .files
            .insert(rel, format!("sha256:{}", hex(&hasher.finalize())));
        Ok(())
    }
}

/// Copy a skill directory: regular files, and symlinks only when they
/// resolve to a regular file inside the directory; hidden entries skipped.
pub fn from_dir(source: &Path, root: &Path, limits: StageLimits) -> Result<Staged, HostError> {
    let base = fs::canonicalize(source).map_err(|e| io(&source.display().to_string(), e))?;
    if !base.is_dir() {
        return Err(refuse(format!("{} is not a directory", source.display())));
    }
    let mut writer = Writer {
        root,
        limits,
        staged: Staged::default(),
    };
    let mut pending: Vec<(PathBuf, String)> = vec![(base.clone(), String::new())];
    while let Some((dir, rel)) = pending.pop() {
        let mut entries: Vec<_> = fs::read_dir(&dir)
            .map_err(|e| io(&dir.display().to_string(), e))?
            .flatten()
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                return Err(refuse(format!(
                    "a file name under {} is not UTF-8",
                    dir.display()
                )));
            };
            let child = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if name.starts_with('.') {
                continue;
            }
            let kind = entry.file_type().map_err(|e| io(&child, e))?;
            let path = entry.path();
            if kind.is_dir() {
                pending.push((path, child));
            } else if kind.is_file() {
                let mut file = fs::File::open(&path).map_err(|e| io(&child, e))?;
                let size = file.metadata().map(|m| m.len()).ok();
                writer.add(&child, &mut file, size)?;
            } else if kind.is_symlink() {
                match fs::canonicalize(&path) {
                    Ok(target) if target.starts_with(&base) && target.is_file() => {
                        let mut file = fs::File::open(&target).map_err(|e| io(&child, e))?;
                        let size = file.metadata().map(|m| m.len()).ok();
                        writer.add(&child, &mut file, size)?;
                    }
                    _ => {
                        return Err(refuse(format!(
                            "`{child}` is a symlink that leads outside the skill (or to a directory); install a copy instead"
                        )));
                    }
                }
            } else {
                return Err(refuse(format!("`{child}` is not a regular file")));
            }
        }
    }
    Ok(writer.staged)
}

/// Unpack a `.tar.gz` package. One top-level directory holding SKILL.md is
/// stripped. Absolute paths, `..`, links, devices and oversize or bomb-like
/// content are refused.
pub fn from_package(package: &[u8], root: &Path, limits: StageLimits) -> Result<Staged, HostError> {
    let prefix = package_prefix(package, limits)?;
    let decoder = flate2::read::GzDecoder::new(package);
    let mut archive = tar::Archive::new(decoder);
    let mut writer = Writer {
        root,
        limits,
        staged: Staged::default(),
    };
    let mut declared_manifest: Option<String> = None;
    let entries = archive
        .entries()
        .map_err(|e| refuse(format!("not a .tar.gz package: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| refuse(format!("the package is damaged: {e}")))?;
        let path = entry
            .path()
            .map_err(|e| refuse(format!("the package is damaged: {e}")))?
            .to_string_lossy()
            .into_owned();
        let rel = match &prefix {
            Some(prefix) => match path.trim_start_matches("./").strip_prefix(prefix.as_str()) {
                Some(rest) => rest.trim_start_matches('/').to_string(),
                None => {
                    return Err(refuse(format!(
                        "`{path}` is outside the package's top directory"
                    )));
                }
            },
            None => path.clone(),
        };
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                // Directories are created with their files; only check the path.
                if !rel.is_empty() && !is_hidden(&rel) {
                    fsguard::normalize_relative(&rel)
                        .map_err(|e| refuse(format!("`{path}`: {}", e.message)))?;
                }
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if rel.is_empty() {
                    continue;
                }
                if rel == MANIFEST_NAME {
                    let mut text = String::new();
                    (&mut entry)
                        .take(limits.max_file_bytes)
                        .read_to_string(&mut text)
                        .map_err(|e| refuse(format!("{MANIFEST_NAME} is not text: {e}")))?;
                    declared_manifest = Some(text);
                    continue;
                }
                let size = entry.header().size().ok();
                writer.add(&rel, &mut entry, size)?;
                let ratio_exceeded = writer.staged.bytes > 1024 * 1024
                    && writer.staged.bytes / (package.len() as u64).max(1) > limits.max_ratio;
                if ratio_exceeded {
                    return Err(refuse(format!(
                        "the package expands more than {}x; refused as a likely decompression bomb",
                        limits.max_ratio
                    )));
                }
            }
            tar::EntryType::Symlink | tar::EntryType::Link => {
                return Err(refuse(format!(
                    "`{path}` is a link; packages may hold only files and directories"
                )));
            }
            other => {
                return Err(refuse(format!(
                    "`{path}` is a {other:?} entry; packages may hold only files and directories"
                )));
            }
        }
    }
    if let Some(manifest) = declared_manifest {
        verify_manifest(&manifest, &writer.staged)?;
    }
    Ok(writer.staged)
}

/// The digest list `skillhost package` adds to a package.
const MANIFEST_NAME: &str = "MANIFEST.sha256";

/// Check a package's MANIFEST.sha256 against what was unpacked.
fn verify_manifest(manifest: &str, staged: &Staged) -> Result<(), HostError> {
    let mut listed = 0;
    for line in manifest.lines().filter(|l| !l.trim().is_empty()) {
        let (digest, path) = line
            .split_once("  ")
            .ok_or_else(|| refuse(format!("{MANIFEST_NAME}: unreadable line `{line}`")))?;
        listed += 1;
        match staged.files.get(path.trim()) {
            Some(actual) if actual.trim_start_matches("sha256:") == digest.trim() => {}
            Some(_) => {
                return Err(refuse(format!(
                    "{MANIFEST_NAME}: `{path}` does not match its digest; the package was altered"
                )));
            }
            None => {
                return Err(refuse(format!(
                    "{MANIFEST_NAME} lists `{path}`, which the package lacks"
                )));
            }
        }
    }
    if listed != staged.files.len() {
        return Err(refuse(format!(
            "the package holds files that {MANIFEST_NAME} does not list"
        )));
    }
    Ok(())
}

/// When SKILL.md is not at the top but in exactly one top directory, that
/// directory's name (to strip).
fn package_prefix(package: &[u8], limits: StageLimits) -> Result<Option<String>, HostError> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(package));
    let entries = archive
        .entries()
        .map_err(|e| refuse(format!("not a .tar.gz package: {e}")))?;
    let mut tops = std::collections::BTreeSet::new();
    let mut entry_at_top = false;
    for (count, entry) in entries.enumerate() {
        if count > limits.max_files * 2 {
            return Err(refuse(format!("more than {} entries", limits.max_files)));
        }
        let entry = entry.map_err(|e| refuse(format!("the package is damaged: {e}")))?;
        let path = entry
            .path()
            .map_err(|e| refuse(format!("the package is damaged: {e}")))?
            .to_string_lossy()
            .into_owned();
        let clean = path.trim_start_matches("./");
        if clean == "SKILL.md" {
            entry_at_top = true;
        }
        if let Some(top) = clean.split('/').next().filter(|t| !t.is_empty()) {
            tops.insert(top.to_string());
        }
    }
    if entry_at_top || tops.len() != 1 {
        return Ok(None);
    }
    Ok(tops.into_iter().next())
}

/// Write raw parts (SKILL.md text plus files).
pub fn from_parts(
    skill_md: &str,
    parts: &[Part],
    root: &Path,
    limits: StageLimits,
) -> Result<Staged, HostError> {
    let mut writer = Writer {
        root,
        limits,
        staged: Staged::default(),
    };
    writer.add(
        "SKILL.md",
        &mut skill_md.as_bytes(),
        Some(skill_md.len() as u64),
    )?;
    for part in parts {
        if fsguard::normalize_relative(&part.path).is_ok_and(|p| p == "SKILL.md") {
            return Err(refuse(
                "SKILL.md is given twice (as skill_md and as a file)",
            ));
        }
        writer.add(
            &part.path,
            &mut part.bytes.as_slice(),
            Some(part.bytes.len() as u64),
        )?;
    }
    Ok(writer.staged)
}

/// Write a reproducible `.tar.gz` of a skill directory: sorted entries,
/// fixed mtimes, owner and modes, plus a MANIFEST.sha256 of every file.
pub fn package(source: &Path, limits: StageLimits) -> Result<Vec<u8>, HostError> {
    let staging = tempfile::tempdir().map_err(|e| io("staging", e))?;
    let staged = from_dir(source, staging.path(), limits)?;
    let name = source
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("skill")
        .to_string();
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut builder = tar::Builder::new(encoder);
    builder.mode(tar::HeaderMode::Deterministic);
    let mut manifest = String::new();
    for (rel, digest) in &staged.files {
        manifest.push_str(&format!(
            "{}  {rel}\n",
            digest.trim_start_matches("sha256:")
        ));
        let bytes = fs::read(staging.path().join(rel)).map_err(|e| io(rel, e))?;
        append(
            &mut builder,
            &format!("{name}/{rel}"),
            &bytes,
            mode_of(&source.join(rel)),
        )?;
    }
    append(
        &mut builder,
        &format!("{name}/MANIFEST.sha256"),
        manifest.as_bytes(),
        0o644,
    )?;
    let encoder = builder.into_inner().map_err(|e| io("package", e))?;
    encoder.finish().map_err(|e| io("package", e))
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    let executable = fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false);
    if executable { 0o755 } else { 0o644 }
}

fn append<W: Write>(
    builder: &mut tar::Builder<W>,
    path: &str,
    bytes: &[u8],
    mode: u32,
) -> Result<(), HostError> {
    let mut header = tar::Header::new_ustar();
    header.set_size(bytes.len() as u64);
    header.set_mode(mode);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header.set_entry_type(tar::EntryType::Regular);
    builder
        .append_data(&mut header, path, bytes)
        .map_err(|e| io("package", e))
}
