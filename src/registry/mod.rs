//! Skill discovery: sources in priority order, a bounded scan on every call,
//! precedence and warnings.
//!
//! Every call sees the disk as it is, at a small cost:
//! - a `SKILL.md` whose (device, inode, size, mtime, ctime) is unchanged is
//!   never read or parsed again, and a skill tree whose directories are
//!   unchanged is not walked again (a full scan is a few `stat`s per skill);
//! - from the second scan on, every directory the result depends on is
//!   watched with inotify; while no event arrives, the sources are the same
//!   directories and nothing is "volatile" (symlinked skills, symlinks
//!   followed in a listing, network filesystems, limits reached), the last
//!   result is reused without touching each skill.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::config::{Limits, SourceDir, SourceKind};
use crate::listing::{Listing, Stamp, walk_skill};
use crate::skill::files::{Loaded, load_entry, load_manifest};
use crate::skill::manifest::{MANIFEST_FILE, Manifest, implied_components};
use crate::skill::{Component, ParsedSkillMd};
use crate::store::Store;
use crate::watch::Watcher;
use sha2::{Digest, Sha256};

mod scan_run;

use self::scan_run::ScanRun;

/// The entry file of every skill.
pub const ENTRY_FILE: &str = "SKILL.md";

/// One accepted skill.
#[derive(Debug, Clone)]
pub struct Skill {
    pub name: String,
    pub source: SourceKind,
    /// The skills directory this skill was found in.
    pub source_path: PathBuf,
    /// The skill directory as discovered (may be a symlink).
    pub skill_dir: PathBuf,
    pub entry_path: PathBuf,
    pub parsed: Arc<ParsedSkillMd>,
    pub listing: Arc<Listing>,
    /// The parsed `skill.yaml`, the reason it is unusable, or `None` without one.
    pub manifest: Option<Result<Arc<Manifest>, String>>,
    /// sha256 over the bytes of `SKILL.md` and `skill.yaml`.
    pub content_digest: [u8; 32],
    /// Set for a skill installed in the managed store.
    pub store: Option<StoreEntry>,
}

impl Skill {
    /// Parse, manifest and listing warnings together.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = self.parsed.warnings.clone();
        out.extend(self.manifest_warning());
        out.extend(self.listing.warnings.iter().cloned());
        out
    }

    /// Why `skill.yaml` is unusable, when it is.
    pub fn manifest_warning(&self) -> Option<String> {
        match &self.manifest {
            Some(Err(reason)) => Some(format!(
                "{reason}; the skill has no runnable components until it is fixed"
            )),
            _ => None,
        }
    }

    /// Declared components, or (without `skill.yaml`) the ones implied by
    /// the files of `listing` (the skill's cached listing when `None`).
    pub fn components(&self, listing: Option<&Listing>) -> Vec<Component> {
        match &self.manifest {
            Some(Ok(manifest)) => manifest.components.clone(),
            Some(Err(_)) => Vec::new(),
            None => {
                let listing = listing.unwrap_or(&self.listing);
                implied_components(listing.files.iter().map(|f| f.path.as_str()))
            }
        }
    }
}

/// A skills directory and whether it exists right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirStatus {
    pub source: SourceKind,
    pub path: PathBuf,
    pub exists: bool,
}

/// The result of one scan: accepted skills sorted by name, the ordered
/// sources, and everything that was skipped or shadowed.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    pub skills: Vec<Skill>,
    /// Installed skills that are disabled (hidden unless asked for).
    pub disabled: Vec<Skill>,
    pub dirs: Vec<DirStatus>,
    pub warnings: Vec<String>,
}

impl Scan {
    pub fn find(&self, name: &str) -> Option<&Skill> {
        self.skills
            .binary_search_by(|s| s.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.skills[i])
    }

    /// A disabled skill of this name, when no enabled one exists.
    pub fn find_disabled(&self, name: &str) -> Option<&Skill> {
        self.disabled.iter().find(|s| s.name == name)
    }
}

struct CachedSkill {
    md_stamp: Stamp,
    entry: Loaded<ParsedSkillMd>,
    /// `skill.yaml` with the stamp it was read at; `None` when there is none.
    manifest: Option<(Stamp, Loaded<Manifest>)>,
    listing: Option<Arc<Listing>>,
}

/// What a full scan depends on, for the watcher.
#[derive(Default)]
struct Dependencies {
    /// Directories whose changes can change the result.
    dirs: Vec<PathBuf>,
    /// Something the watcher cannot vouch for: the next call must scan fully.
    volatile: bool,
}

/// Identity of a source directory path: which inode it names now.
type SourceId = Option<(u64, u64)>;

fn source_id(path: &Path) -> SourceId {
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// How scans were answered so far (for diagnostics, tests and metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Scans that stat-ed every source and skill.
    pub full_scans: u64,
    /// Scans answered from the previous result because the watcher saw no change.
    pub reused: u64,
    /// Time spent in full scans.
    pub full_scan_time: std::time::Duration,
}

#[derive(Default)]
struct State {
    cache: HashMap<PathBuf, CachedSkill>,
    last: Option<Arc<Scan>>,
    full_scans: u64,
    reused: u64,
    full_scan_time: std::time::Duration,
    watcher: Option<Watcher>,
    /// The last full scan ran with every dependency already watched and
    /// nothing volatile, so "no event" means "no change".
    trusted: bool,
    /// Watching gave up for good (the watch limit was reached).
    watching_disabled: bool,
    source_ids: Vec<SourceId>,
}

/// The registry: owns the source list, the limits and the scan cache.
pub struct Registry {
    sources: Vec<SourceDir>,
    store: Option<Store>,
    limits: Limits,
    state: Mutex<State>,
}

impl Registry {
    pub fn new(sources: Vec<SourceDir>, store: Option<Store>, limits: Limits) -> Self {
        Registry {
            sources,
            store,
            limits,
            state: Mutex::new(State::default()),
        }
    }

    pub fn sources(&self) -> &[SourceDir] {
        &self.sources
    }

    /// The skills as they are on disk now.
    pub fn scan(&self) -> Arc<Scan> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Drain first: events that arrive during a full scan stay queued
        // and force the next call to scan again.
        let quiet = state.watcher.as_mut().is_some_and(|w| !w.drain());
        if quiet && state.trusted {
            let ids = self.source_ids();
            if ids == state.source_ids
                && let Some(last) = state.last.clone()
            {
                state.reused += 1;
                return last;
            }
        }
        let source_ids = self.source_ids();
        let started = std::time::Instant::now();
        let (scan, deps) = self.full_scan(&mut state.cache);
        state.full_scan_time += started.elapsed();
        let scan = Arc::new(scan);
        state.full_scans += 1;
        state.source_ids = source_ids;
        state.last = Some(Arc::clone(&scan));
        // A process that scans once (the CLI) never pays for watches.
        if state.full_scans >= 2 && state.watcher.is_none() && !state.watching_disabled {
            state.watcher = Watcher::new();
        }
        state.trusted = false;
        if let Some(watcher) = state.watcher.as_mut() {
            let outcome = watcher.sync(&deps.dirs);
            if outcome.limit_reached {
                tracing::info!(
                    "the inotify watch limit (fs.inotify.max_user_watches) is reached; \
                     the registry falls back to stat-based scans"
                );
                state.watcher = None;
                state.watching_disabled = true;
            } else {
                // Watches added now came after this scan read the disk, so
                // only a scan that needed no new watch can be trusted.
                state.trusted = outcome.unchanged() && !deps.volatile;
            }
        }
        scan
    }

    /// Which inode each source path (and the store) names now.
    fn source_ids(&self) -> Vec<SourceId> {
        let store = self.store.as_ref().map(|s| s.dir());
        self.sources
            .iter()
            .map(|s| s.path.as_path())
            .chain(store)
            .map(source_id)
            .collect()
    }

    /// How scans were answered so far.
    pub fn stats(&self) -> ScanStats {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        ScanStats {
            full_scans: state.full_scans,
            reused: state.reused,
            full_scan_time: state.full_scan_time,
        }
    }

    /// A skill installed in the managed store, at one of its kept revisions.
    pub fn pinned(&self, name: &str, revision: &str) -> Result<Skill, crate::error::HostError> {
        use crate::error::{ErrorKind, HostError};
        let not_found = |why: String| HostError::new(ErrorKind::RevisionNotFound, why);
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| not_found("this host has no managed store".into()))?;
        let catalog = store.catalog()?;
        let entry = catalog.skills.get(name).ok_or_else(|| {
            not_found(format!(
                "`{name}` is not installed in the managed store; only installed skills keep revisions"
            ))
        })?;
        if !entry.revisions.iter().any(|r| r.id == revision) {
            let kept: Vec<&str> = entry.revisions.iter().map(|r| r.id.as_str()).collect();
            return Err(not_found(format!(
                "skill `{name}` has no revision {revision}; it keeps: {}",
                kept.join(", ")
            )));
        }
        if !entry.enabled {
            return Err(HostError::new(
                ErrorKind::SkillDisabled,
                format!("skill `{name}` is disabled; enable it to use it"),
            ));
        }
        let dir = store.revision_dir(name, revision);
        let entry_path = dir.join(ENTRY_FILE);
        let limit = self.limits.max_skill_md_bytes;
        let broken = |why: String| {
            HostError::new(
                ErrorKind::IoError,
                format!("revision {revision} of `{name}`: {why}"),
            )
        };
        let meta = fs::metadata(&entry_path).map_err(|e| broken(e.to_string()))?;
        let loaded = load_entry(&entry_path, &meta, name, limit);
        let parsed = loaded.result.clone().map_err(broken)?;
        let manifest = fs::metadata(dir.join(MANIFEST_FILE))
            .ok()
            .map(|meta| load_manifest(&dir.join(MANIFEST_FILE), &meta, limit));
        let mut hasher = Sha256::new();
        hasher.update(loaded.digest);
        if let Some(manifest) = &manifest {
            hasher.update(manifest.digest);
        }
        let mut budget = self.limits.max_scan_entries;
        let listing = walk_skill(&dir, None, &self.limits, &mut budget);
        Ok(Skill {
            name: parsed.name.clone(),
            source: SourceKind::Managed,
            source_path: store.dir().to_path_buf(),
            skill_dir: dir,
            entry_path,
            parsed,
            listing: Arc::new(listing),
            manifest: manifest.map(|m| m.result),
            content_digest: hasher.finalize().into(),
            store: Some(StoreEntry {
                revision: revision.to_string(),
                version: entry.version,
                enabled: entry.enabled,
                config: entry.config.clone(),
            }),
        })
    }

    /// Walk one skill's tree afresh (current sizes), ignoring the cache.
    pub fn fresh_listing(&self, skill: &Skill) -> Listing {
        let mut budget = self.limits.max_scan_entries;
        walk_skill(&skill.skill_dir, None, &self.limits, &mut budget)
    }

    /// Stat every source and skill; parse and walk only what changed.
    fn full_scan(&self, cache: &mut HashMap<PathBuf, CachedSkill>) -> (Scan, Dependencies) {
        ScanRun::full(self, cache)
    }
}

/// What the store's catalog says about an installed skill.
#[derive(Debug, Clone)]
pub struct StoreEntry {
    pub revision: String,
    pub version: u64,
    pub enabled: bool,
    pub config: BTreeMap<String, crate::store::catalog::StoredValue>,
}
