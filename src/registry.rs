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
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::config::{Limits, SourceDir, SourceKind};
use crate::listing::{Listing, Stamp, walk_skill};
use crate::skill::files::{Loaded, describe_io, load_entry, load_manifest};
use crate::skill::manifest::{MANIFEST_FILE, Manifest, implied_components};
use crate::skill::{Component, ParsedSkillMd};
use crate::store::Store;
use crate::watch::{Watcher, is_local_filesystem};
use sha2::{Digest, Sha256};

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
        let mut old = std::mem::take(cache);
        let mut run = ScanRun {
            registry: self,
            scan: Scan::default(),
            deps: Dependencies::default(),
            by_name: HashMap::new(),
            budget: self.limits.max_scan_entries,
            skills_limit_warned: false,
        };
        for source in &self.sources {
            if source.kind == SourceKind::Managed
                && let Some(store) = &self.store
            {
                run.scan_store(source, store, &mut old, cache);
            }
            let Some(children) = run.open_source(source) else {
                continue;
            };
            for (dir_name, is_symlink) in children {
                run.examine(source, dir_name, is_symlink, &mut old, cache);
            }
        }
        run.scan.skills.sort_by(|a, b| a.name.cmp(&b.name));
        run.scan.disabled.sort_by(|a, b| a.name.cmp(&b.name));
        (run.scan, run.deps)
    }
}

/// A skill whose `SKILL.md` parsed, on its way to [`ScanRun::accept`].
struct Found<'a> {
    skill_dir: &'a Path,
    dir_meta: &'a fs::Metadata,
    entry_path: PathBuf,
    parsed: Arc<ParsedSkillMd>,
    store: Option<StoreEntry>,
}

/// What the store's catalog says about an installed skill.
#[derive(Debug, Clone)]
pub struct StoreEntry {
    pub revision: String,
    pub version: u64,
    pub enabled: bool,
    pub config: BTreeMap<String, crate::store::catalog::StoredValue>,
}

/// The state of one full scan.
struct ScanRun<'a> {
    registry: &'a Registry,
    scan: Scan,
    deps: Dependencies,
    by_name: HashMap<String, usize>,
    budget: usize,
    skills_limit_warned: bool,
}

impl ScanRun<'_> {
    /// Read a source directory's children (name, is-symlink), sorted; record
    /// its status. `None` when it is missing or unreadable.
    fn open_source(&mut self, source: &SourceDir) -> Option<Vec<(OsString, bool)>> {
        let limits = &self.registry.limits;
        let (children, exists) = match read_children(&source.path, &mut self.budget) {
            Ok(Some((children, complete))) => {
                if !complete {
                    self.deps.volatile = true;
                    self.scan.warnings.push(format!(
                        "{}: stopped reading after {} directory entries (max_scan_entries); some skills are not listed",
                        source.path.display(),
                        limits.max_scan_entries
                    ));
                }
                (Some(children), true)
            }
            Ok(None) => (None, false),
            Err(error) => {
                self.deps.volatile = true;
                self.scan.warnings.push(format!(
                    "{} skills directory {} cannot be read: {error}",
                    source.kind.as_str(),
                    source.path.display()
                ));
                (None, true)
            }
        };
        self.scan.dirs.push(DirStatus {
            source: source.kind,
            path: source.path.clone(),
            exists,
        });
        if children.is_some() {
            if !is_local_filesystem(&source.path) {
                self.deps.volatile = true;
            }
            self.deps.dirs.push(source.path.clone());
        }
        children
    }

    /// The managed store's skills: each catalog entry's active revision.
    fn scan_store(
        &mut self,
        source: &SourceDir,
        store: &Store,
        old: &mut HashMap<PathBuf, CachedSkill>,
        cache: &mut HashMap<PathBuf, CachedSkill>,
    ) {
        let exists = store.dir().is_dir();
        self.scan.dirs.push(DirStatus {
            source: SourceKind::Managed,
            path: store.dir().to_path_buf(),
            exists,
        });
        if !exists {
            return;
        }
        self.deps.dirs.push(store.dir().to_path_buf());
        let catalog = match store.catalog() {
            Ok(catalog) => catalog,
            Err(error) => {
                self.deps.volatile = true;
                self.scan.warnings.push(error.message);
                return;
            }
        };
        for (name, entry) in catalog.skills {
            let dir = store.revision_dir(&name, &entry.active);
            let info = StoreEntry {
                revision: entry.active.clone(),
                version: entry.version,
                enabled: entry.enabled,
                config: entry.config.clone(),
            };
            self.examine_at(source, &name, dir, Some(info), old, cache);
        }
    }

    /// Look at one child of a source: skip it with a warning, or accept,
    /// shadow or refuse the skill in it.
    fn examine(
        &mut self,
        source: &SourceDir,
        dir_name: OsString,
        is_symlink: bool,
        old: &mut HashMap<PathBuf, CachedSkill>,
        cache: &mut HashMap<PathBuf, CachedSkill>,
    ) {
        let Some(dir_name) = dir_name.to_str().map(str::to_owned) else {
            self.scan.warnings.push(format!(
                "skipped {}: the directory name is not UTF-8",
                source.path.join(&dir_name).display()
            ));
            return;
        };
        if dir_name.starts_with('.') {
            return;
        }
        let skill_dir = source.path.join(&dir_name);
        // The watcher sees entries of directories, not what a symlink points to.
        if is_symlink {
            self.deps.volatile = true;
        }
        self.examine_at(source, &dir_name, skill_dir, None, old, cache);
    }

    /// Examine the skill directory `skill_dir` (`store` set for a revision
    /// of the managed store).
    fn examine_at(
        &mut self,
        source: &SourceDir,
        dir_name: &str,
        skill_dir: PathBuf,
        store: Option<StoreEntry>,
        old: &mut HashMap<PathBuf, CachedSkill>,
        cache: &mut HashMap<PathBuf, CachedSkill>,
    ) {
        let dir_meta = match fs::metadata(&skill_dir) {
            Ok(meta) if meta.is_dir() => meta,
            Ok(_) => return, // a plain file beside the skills (README.md, ...)
            Err(error) => {
                self.skip(&skill_dir, describe_io(&error));
                return;
            }
        };
        self.deps.dirs.push(skill_dir.clone());
        let entry_path = skill_dir.join(ENTRY_FILE);
        let Some(md_meta) = self.entry_metadata(&skill_dir, &entry_path) else {
            return;
        };

        let md_stamp = Stamp::of(&md_meta);
        let limit = self.registry.limits.max_skill_md_bytes;
        let mut cached = match old.remove(&skill_dir) {
            Some(hit) if hit.md_stamp == md_stamp => hit,
            previous => CachedSkill {
                md_stamp,
                entry: load_entry(&entry_path, &md_meta, dir_name, limit),
                manifest: previous.as_ref().and_then(|p| p.manifest.clone()),
                listing: previous.and_then(|p| p.listing),
            },
        };
        match &cached.entry.result {
            Err(reason) => self.skip(&skill_dir, reason.clone()),
            Ok(parsed) => {
                let found = Found {
                    skill_dir: &skill_dir,
                    dir_meta: &dir_meta,
                    entry_path,
                    parsed: Arc::clone(parsed),
                    store,
                };
                self.accept(source, found, &mut cached);
            }
        }
        cache.insert(skill_dir, cached);
    }

    /// `skill.yaml`'s metadata when there is one (followed when a symlink).
    fn manifest_metadata(&mut self, skill_dir: &Path) -> Option<fs::Metadata> {
        let path = skill_dir.join(MANIFEST_FILE);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                self.deps.volatile = true;
                fs::metadata(&path).ok().filter(fs::Metadata::is_file)
            }
            Ok(meta) => meta.is_file().then_some(meta),
            Err(_) => None,
        }
    }

    /// `SKILL.md`'s metadata (followed when it is a symlink), or a warning.
    fn entry_metadata(&mut self, skill_dir: &Path, entry_path: &Path) -> Option<fs::Metadata> {
        let meta = match fs::symlink_metadata(entry_path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                self.deps.volatile = true;
                fs::metadata(entry_path)
            }
            other => other,
        };
        match meta {
            Ok(meta) if meta.is_file() => Some(meta),
            Ok(_) => {
                self.skip(skill_dir, "SKILL.md is not a regular file".into());
                None
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                self.skip(skill_dir, "it has no SKILL.md".into());
                None
            }
            Err(error) => {
                self.skip(
                    skill_dir,
                    format!("SKILL.md cannot be read: {}", describe_io(&error)),
                );
                None
            }
        }
    }

    /// Add a parsed skill unless a higher-priority one has its name or the
    /// skills limit is reached. Returns the listing to cache.
    fn accept(&mut self, source: &SourceDir, found: Found<'_>, cached: &mut CachedSkill) {
        let Found {
            skill_dir,
            dir_meta,
            entry_path,
            parsed,
            store,
        } = found;
        let enabled = store.as_ref().is_none_or(|s| s.enabled);
        if !enabled {
            // A disabled skill takes no part in precedence.
        } else if let Some(&winner) = self.by_name.get(&parsed.name) {
            let winner = &self.scan.skills[winner];
            let warning = if winner.source == source.kind {
                format!(
                    "skipped {}: skill `{}` is already defined by {} in the same {} source",
                    skill_dir.display(),
                    parsed.name,
                    winner.skill_dir.display(),
                    source.kind.as_str()
                )
            } else {
                format!(
                    "{} skill `{}` at {} is shadowed by the {} one at {}",
                    source.kind.as_str(),
                    parsed.name,
                    skill_dir.display(),
                    winner.source.as_str(),
                    winner.skill_dir.display()
                )
            };
            self.scan.warnings.push(warning);
            return;
        }
        let limits = &self.registry.limits;
        if self.scan.skills.len() >= limits.max_skills {
            self.deps.volatile = true;
            if !self.skills_limit_warned {
                self.skills_limit_warned = true;
                self.scan.warnings.push(format!(
                    "more than {} skills found (max_skills); the rest are not listed",
                    limits.max_skills
                ));
            }
            return;
        }
        let listing = match cached.listing.take() {
            Some(listing) if listing.is_current(dir_meta) => listing,
            _ => Arc::new(walk_skill(
                skill_dir,
                Some(dir_meta),
                limits,
                &mut self.budget,
            )),
        };
        if !listing.is_watchable() {
            self.deps.volatile = true;
        }
        self.deps
            .dirs
            .extend(listing.dirs().skip(1).map(Path::to_path_buf));
        // Only a skill whose directory holds a skill.yaml pays for its stat.
        let manifest_meta = if listing.has_manifest() {
            self.manifest_metadata(skill_dir)
        } else {
            None
        };
        let limit = limits.max_skill_md_bytes;
        cached.manifest = match (manifest_meta, cached.manifest.take()) {
            (None, _) => None,
            (Some(meta), Some((stamp, loaded))) if stamp == Stamp::of(&meta) => {
                Some((stamp, loaded))
            }
            (Some(meta), _) => Some((
                Stamp::of(&meta),
                load_manifest(&skill_dir.join(MANIFEST_FILE), &meta, limit),
            )),
        };
        let mut hasher = Sha256::new();
        hasher.update(cached.entry.digest);
        if let Some((_, manifest)) = &cached.manifest {
            hasher.update(manifest.digest);
        }
        let skill = Skill {
            name: parsed.name.clone(),
            source: source.kind,
            source_path: source.path.clone(),
            skill_dir: skill_dir.to_path_buf(),
            entry_path,
            parsed,
            listing: Arc::clone(&listing),
            manifest: cached.manifest.as_ref().map(|(_, m)| m.result.clone()),
            content_digest: hasher.finalize().into(),
            store,
        };
        if enabled {
            self.by_name
                .insert(skill.name.clone(), self.scan.skills.len());
            self.scan.skills.push(skill);
        } else {
            self.scan.disabled.push(skill);
        }
        cached.listing = Some(listing);
    }

    fn skip(&mut self, skill_dir: &Path, reason: String) {
        self.scan
            .warnings
            .push(format!("skipped {}: {reason}", skill_dir.display()));
    }
}

/// Children of a directory as (name, is-symlink), sorted by name; `None`
/// when it does not exist. The bool is false when the entry budget ran out.
type Children = (Vec<(OsString, bool)>, bool);

fn read_children(path: &Path, budget: &mut usize) -> io::Result<Option<Children>> {
    let entries = match fs::read_dir(path) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let mut children = Vec::new();
    let mut complete = true;
    for entry in entries {
        if *budget == 0 {
            complete = false;
            break;
        }
        *budget -= 1;
        let entry = entry?;
        let is_symlink = entry.file_type().map(|t| t.is_symlink()).unwrap_or(true);
        children.push((entry.file_name(), is_symlink));
    }
    children.sort();
    Ok(Some((children, complete)))
}
