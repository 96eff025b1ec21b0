//! The managed store: immutable revisions of installed skills and a catalog
//! that points each skill to its active revision.
//!
//! Layout under `<state-dir>/store`:
//! - `catalog.json` — see [`catalog::Catalog`]; replaced atomically;
//! - `revisions/<name>/<hex>/` — one immutable revision (the skill's files
//!   and a hidden `.manifest.json` with the sha256 of each);
//! - `tmp/` — staging; `lock` — the cross-process mutation lock.
//!
//! Readers take no lock: they read the catalog once per call and find every
//! revision it names complete (content is staged, fsynced and renamed into
//! place before the catalog that names it is written). Writers take the lock,
//! check `expected_version`, and swap the catalog.

pub mod catalog;
mod lock;
pub mod stage;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use self::catalog::{Catalog, Entry, Retired, RevisionInfo, StoredValue};
use self::lock::StoreLock;
use self::stage::Staged;
use crate::error::{ErrorKind, HostError};

/// How long a revision that nothing references any more is kept before it
/// is deleted (readers holding an older catalog may still be using it).
const RETIRE_GRACE: Duration = Duration::from_secs(60);
/// Staging directories older than this are leftovers of a killed writer.
const STALE_STAGING: Duration = Duration::from_secs(3600);

/// The store directory and its operations.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// A mutation's result: the entry as it is now.
#[derive(Debug, Clone)]
pub struct Changed {
    pub name: String,
    pub entry: Option<Entry>,
    /// For installs: false when the content equals an existing revision.
    pub new_revision: bool,
}

pub(crate) fn io_error(what: &str, error: std::io::Error) -> HostError {
    HostError::new(ErrorKind::IoError, format!("{what}: {error}"))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The hex part of a revision id (its directory name).
fn revision_hex(id: &str) -> &str {
    id.strip_prefix("sha256:").unwrap_or(id)
}

impl Store {
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The catalog as it is now (no lock; an absent store is empty).
    pub fn catalog(&self) -> Result<Catalog, HostError> {
        Catalog::read(&self.dir).map_err(|e| io_error("the store's catalog cannot be read", e))
    }

    /// Where a revision's content lives.
    pub fn revision_dir(&self, name: &str, id: &str) -> PathBuf {
        self.dir.join("revisions").join(name).join(revision_hex(id))
    }

    /// A fresh staging directory (removed when dropped).
    pub fn staging(&self) -> Result<tempfile::TempDir, HostError> {
        self.ensure_dirs()?;
        tempfile::Builder::new()
            .prefix("stage-")
            .tempdir_in(self.dir.join("tmp"))
            .map_err(|e| io_error("cannot create a staging directory", e))
    }

    fn ensure_dirs(&self) -> Result<(), HostError> {
        use std::os::unix::fs::DirBuilderExt;
        for (dir, mode) in [
            (self.dir.clone(), 0o755),
            (self.dir.join("revisions"), 0o755),
            (self.dir.join("tmp"), 0o700),
        ] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(mode)
                .create(&dir)
                .map_err(|e| io_error(&format!("cannot create {}", dir.display()), e))?;
        }
        Ok(())
    }

    /// Run `change` on the catalog under the lock; write it if it returns Ok.
    fn mutate<T>(
        &self,
        change: impl FnOnce(&mut Catalog) -> Result<T, HostError>,
    ) -> Result<T, HostError> {
        self.ensure_dirs()?;
        let _lock =
            StoreLock::acquire(&self.dir).map_err(|e| io_error("cannot lock the store", e))?;
        let mut catalog = self.catalog()?;
        let result = change(&mut catalog)?;
        self.collect_garbage(&mut catalog);
        catalog
            .write(&self.dir)
            .map_err(|e| io_error("cannot write the store's catalog", e))?;
        Ok(result)
    }

    /// Make `staged` (content in `content_dir`) the active revision of `name`.
    pub fn install(
        &self,
        name: &str,
        staged: &Staged,
        content_dir: &Path,
        source: &str,
        expected_version: Option<u64>,
        keep_revisions: usize,
    ) -> Result<Changed, HostError> {
        let id = staged.revision_id();
        let manifest = serde_json::json!({"id": id, "files": staged.files});
        fs::write(
            content_dir.join(".manifest.json"),
            serde_json::to_vec_pretty(&manifest).unwrap_or_default(),
        )
        .map_err(|e| io_error("cannot write the revision manifest", e))?;
        fsync_tree(content_dir);
        self.mutate(|catalog| {
            let current = catalog.skills.get(name);
            let removed_at = catalog.removed.get(name).copied();
            check_version(
                name,
                current.map(|e| e.version).or(removed_at),
                expected_version,
                true,
            )?;
            let new_revision = !current.is_some_and(|e| e.revisions.iter().any(|r| r.id == id));
            let target = self.revision_dir(name, &id);
            if !target.exists() {
                fs::create_dir_all(target.parent().unwrap_or(&self.dir))
                    .map_err(|e| io_error("cannot create the revision directory", e))?;
                fs::rename(content_dir, &target)
                    .map_err(|e| io_error("cannot move the revision into place", e))?;
                if let Some(parent) = target.parent() {
                    let _ = fs::File::open(parent).and_then(|d| d.sync_all());
                }
            }
            catalog.retired.retain(|r| !(r.name == name && r.id == id));
            let info = RevisionInfo {
                id: id.clone(),
                created_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
                source: source.to_string(),
                files: staged.files.len(),
                bytes: staged.bytes,
            };
            catalog.removed.remove(name);
            let entry = catalog
                .skills
                .entry(name.to_string())
                .or_insert_with(|| Entry {
                    active: id.clone(),
                    version: removed_at.unwrap_or(0),
                    enabled: true,
                    revisions: Vec::new(),
                    config: Default::default(),
                });
            entry.revisions.retain(|r| r.id != id);
            entry.revisions.push(info);
            entry.active = id.clone();
            entry.version += 1;
            let dropped = prune(entry, keep_revisions);
            let entry = entry.clone();
            retire(catalog, name, dropped);
            Ok(Changed {
                name: name.to_string(),
                entry: Some(entry),
                new_revision,
            })
        })
    }

    /// Remove a skill; its revisions are deleted after the grace period.
    pub fn remove(&self, name: &str, expected_version: Option<u64>) -> Result<Changed, HostError> {
        self.mutate(|catalog| {
            let entry = catalog
                .skills
                .get(name)
                .ok_or_else(|| missing(catalog, name, expected_version))?;
            check_version(name, Some(entry.version), expected_version, false)?;
            let ids: Vec<String> = entry.revisions.iter().map(|r| r.id.clone()).collect();
            let version = entry.version + 1;
            catalog.skills.remove(name);
            catalog.removed.insert(name.to_string(), version);
            retire(catalog, name, ids);
            Ok(Changed {
                name: name.to_string(),
                entry: None,
                new_revision: false,
            })
        })
    }

    /// Enable or disable a skill.
    pub fn set_enabled(
        &self,
        name: &str,
        enabled: bool,
        expected_version: Option<u64>,
    ) -> Result<Changed, HostError> {
        self.update(name, expected_version, |entry| {
            entry.enabled = enabled;
            Ok(())
        })
    }

    /// Make an earlier (kept) revision the active one.
    pub fn activate(
        &self,
        name: &str,
        revision: &str,
        expected_version: Option<u64>,
    ) -> Result<Changed, HostError> {
        self.update(name, expected_version, |entry| {
            if !entry.revisions.iter().any(|r| r.id == revision) {
                let known: Vec<&str> = entry.revisions.iter().map(|r| r.id.as_str()).collect();
                return Err(HostError::new(
                    ErrorKind::RevisionNotFound,
                    format!(
                        "skill `{name}` has no revision {revision}; it keeps: {}",
                        known.join(", ")
                    ),
                ));
            }
            entry.active = revision.to_string();
            Ok(())
        })
    }

    /// Set (or, with `None`, unset) one config value.
    pub fn set_config(
        &self,
        name: &str,
        key: &str,
        value: Option<Value>,
        secret: bool,
        expected_version: Option<u64>,
    ) -> Result<Changed, HostError> {
        self.update(name, expected_version, |entry| {
            match value {
                Some(value) => entry
                    .config
                    .insert(key.to_string(), StoredValue { value, secret }),
                None => entry.config.remove(key),
            };
            Ok(())
        })
    }

    fn update(
        &self,
        name: &str,
        expected_version: Option<u64>,
        change: impl FnOnce(&mut Entry) -> Result<(), HostError>,
    ) -> Result<Changed, HostError> {
        self.mutate(|catalog| {
            if !catalog.skills.contains_key(name) {
                return Err(missing(catalog, name, expected_version));
            }
            let entry = catalog
                .skills
                .get_mut(name)
                .ok_or_else(|| not_installed(name))?;
            check_version(name, Some(entry.version), expected_version, false)?;
            change(entry)?;
            entry.version += 1;
            Ok(Changed {
                name: name.to_string(),
                entry: Some(entry.clone()),
                new_revision: false,
            })
        })
    }

    /// Delete retired revisions past their grace period, revisions nothing
    /// names (left by a killed writer) and stale staging directories.
    fn collect_garbage(&self, catalog: &mut Catalog) {
        let now = now_secs();
        let (expired, kept): (Vec<Retired>, Vec<Retired>) = std::mem::take(&mut catalog.retired)
            .into_iter()
            .partition(|r| now.saturating_sub(r.since) >= RETIRE_GRACE.as_secs());
        catalog.retired = kept;
        for revision in expired {
            let _ = fs::remove_dir_all(self.revision_dir(&revision.name, &revision.id));
        }
        if let Ok(names) = fs::read_dir(self.dir.join("revisions")) {
            for name_dir in names.flatten() {
                let name = name_dir.file_name().to_string_lossy().into_owned();
                let Ok(revisions) = fs::read_dir(name_dir.path()) else {
                    continue;
                };
                for revision in revisions.flatten() {
                    let hex = revision.file_name().to_string_lossy().into_owned();
                    let id = format!("sha256:{hex}");
                    let referenced = catalog
                        .skills
                        .get(&name)
                        .is_some_and(|e| e.revisions.iter().any(|r| r.id == id))
                        || catalog.retired.iter().any(|r| r.name == name && r.id == id);
                    if !referenced {
                        let _ = fs::remove_dir_all(revision.path());
                    }
                }
                let _ = fs::remove_dir(name_dir.path());
            }
        }
        if let Ok(stages) = fs::read_dir(self.dir.join("tmp")) {
            for stage in stages.flatten() {
                let old = stage
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| SystemTime::now().duration_since(t).ok())
                    .is_some_and(|age| age > STALE_STAGING);
                if old {
                    let _ = fs::remove_dir_all(stage.path());
                }
            }
        }
    }
}

/// A change to a skill that is not installed: a conflict when the caller
/// expected a version (the skill was removed since), else not found.
fn missing(catalog: &Catalog, name: &str, expected_version: Option<u64>) -> HostError {
    match (catalog.removed.get(name), expected_version) {
        (Some(version), Some(expected)) => HostError::new(
            ErrorKind::VersionConflict,
            format!(
                "skill `{name}` was removed (at version {version}), not at version {expected}: another writer changed it"
            ),
        ),
        _ => not_installed(name),
    }
}

pub(crate) fn not_installed(name: &str) -> HostError {
    HostError::new(
        ErrorKind::SkillNotFound,
        format!("no skill `{name}` is installed in the managed store"),
    )
}

/// `expected_version`: the entry's current version (0 for a skill that is
/// not installed, which only an install accepts).
fn check_version(
    name: &str,
    current: Option<u64>,
    expected: Option<u64>,
    install: bool,
) -> Result<(), HostError> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let actual = current.unwrap_or(0);
    if current.is_none() && !install {
        return Err(not_installed(name));
    }
    if actual != expected {
        return Err(HostError::new(
            ErrorKind::VersionConflict,
            format!(
                "skill `{name}` is at version {actual}, not {expected}: another writer changed it; read it again and retry with expected_version {actual}"
            ),
        ));
    }
    Ok(())
}

/// Drop the oldest revisions beyond `keep` (never the active one).
fn prune(entry: &mut Entry, keep: usize) -> Vec<String> {
    let keep = keep.max(1);
    let mut dropped = Vec::new();
    while entry.revisions.len() > keep {
        let Some(index) = entry.revisions.iter().position(|r| r.id != entry.active) else {
            break;
        };
        dropped.push(entry.revisions.remove(index).id);
    }
    dropped
}

fn retire(catalog: &mut Catalog, name: &str, ids: Vec<String>) {
    let since = now_secs();
    for id in ids {
        catalog.retired.push(Retired {
            name: name.to_string(),
            id,
            since,
        });
    }
}

/// fsync every file and directory below `root` (best effort).
fn fsync_tree(root: &Path) {
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        if let Ok(entries) = fs::read_dir(&path) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    pending.push(entry.path());
                } else if let Ok(file) = fs::File::open(entry.path()) {
                    let _ = file.sync_all();
                }
            }
        }
        if let Ok(dir) = fs::File::open(&path) {
            let _ = dir.sync_all();
        }
    }
}
