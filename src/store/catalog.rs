//! The store's catalog: which skills are installed, their revisions, the
//! active one, a version counter per skill, enabled flags and config
//! values. Written whole to a temp file, fsynced and renamed over the old
//! one, so a reader always sees one complete catalog.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The catalog file inside the store directory.
pub const CATALOG_FILE: &str = "catalog.json";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    /// Format of this file.
    pub format: u32,
    pub skills: BTreeMap<String, Entry>,
    /// Revisions no longer referenced, deleted once a grace period has
    /// passed so that a reader holding an older catalog can finish.
    #[serde(default)]
    pub retired: Vec<Retired>,
    /// The last version of each removed skill, so a reinstall continues the
    /// count and a stale `expected_version` can never match again.
    #[serde(default)]
    pub removed: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Retired {
    pub name: String,
    pub id: String,
    /// Seconds since the Unix epoch.
    pub since: u64,
}

/// One installed skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The revision that is served.
    pub active: String,
    /// Bumped by every change to this entry; callers pass it back as
    /// `expected_version` to detect another writer's change.
    pub version: u64,
    pub enabled: bool,
    /// Oldest first.
    pub revisions: Vec<RevisionInfo>,
    /// Config values set through the store (secrets included; never echoed).
    #[serde(default)]
    pub config: BTreeMap<String, StoredValue>,
}

/// A config value and whether it was secret when set. Secrecy sticks to
/// the value: a later revision that stops declaring the key secret does not
/// reveal it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredValue {
    pub value: Value,
    pub secret: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevisionInfo {
    /// `sha256:` and the hex digest of the revision's file manifest.
    pub id: String,
    /// RFC 3339.
    pub created_at: String,
    /// Where it was installed from (a path, `package`, `parts`).
    pub source: String,
    pub files: usize,
    pub bytes: u64,
}

impl Catalog {
    /// The entry of an installed skill, or SKILL_NOT_FOUND.
    pub fn installed(&self, name: &str) -> Result<&Entry, crate::error::HostError> {
        self.skills
            .get(name)
            .ok_or_else(|| super::not_installed(name))
    }

    /// Read the catalog; a missing file is an empty catalog.
    pub fn read(store: &Path) -> std::io::Result<Catalog> {
        match fs::read(store.join(CATALOG_FILE)) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::other(format!("{} is not a valid catalog: {e}", CATALOG_FILE))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Catalog {
                format: 1,
                ..Catalog::default()
            }),
            Err(e) => Err(e),
        }
    }

    /// Replace the catalog atomically: temp file, fsync, rename, fsync dir.
    pub fn write(&self, store: &Path) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let mut temp = tempfile::NamedTempFile::new_in(store)?;
        temp.write_all(&bytes)?;
        temp.as_file().sync_all()?;
        set_private(temp.path())?;
        temp.persist(store.join(CATALOG_FILE))
            .map_err(|e| e.error)?;
        fs::File::open(store)?.sync_all()
    }
}

/// The catalog holds secret config values: owner-only permissions.
fn set_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
}
