//! One full scan: walking the sources and the store in priority order,
//! examining each skill directory (reusing cached parses when nothing
//! changed), precedence, and the warnings for what is skipped or shadowed.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::{CachedSkill, Dependencies, DirStatus, ENTRY_FILE, Registry, Scan, Skill, StoreEntry};
use crate::config::{SourceDir, SourceKind};
use crate::listing::{Stamp, walk_skill};
use crate::skill::ParsedSkillMd;
use crate::skill::files::{describe_io, load_entry, load_manifest};
use crate::skill::manifest::MANIFEST_FILE;
use crate::store::Store;
use crate::watch::is_local_filesystem;

/// A skill whose `SKILL.md` parsed, on its way to [`ScanRun::accept`].
struct Found<'a> {
    skill_dir: &'a Path,
    dir_meta: &'a fs::Metadata,
    entry_path: PathBuf,
    parsed: Arc<ParsedSkillMd>,
    store: Option<StoreEntry>,
}

/// The state of one full scan.
pub(super) struct ScanRun<'a> {
    registry: &'a Registry,
    scan: Scan,
    deps: Dependencies,
    by_name: HashMap<String, usize>,
    budget: usize,
    skills_limit_warned: bool,
}

impl<'a> ScanRun<'a> {
    /// Scan every source of `registry` in priority order; `cache` holds the
    /// parses of the previous scan and is refilled with this one's.
    pub(super) fn full(
        registry: &'a Registry,
        cache: &mut HashMap<PathBuf, CachedSkill>,
    ) -> (Scan, Dependencies) {
        let mut old = std::mem::take(cache);
        let mut run = ScanRun {
            registry,
            scan: Scan::default(),
            deps: Dependencies::default(),
            by_name: HashMap::new(),
            budget: registry.limits.max_scan_entries,
            skills_limit_warned: false,
        };
        for source in &registry.sources {
            if source.kind == SourceKind::Managed
                && let Some(store) = &registry.store
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
