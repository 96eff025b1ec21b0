//! Skill discovery: sources in priority order, a bounded scan on every call,
//! precedence and warnings, and a cache that never re-reads an unchanged
//! `SKILL.md` or re-walks an unchanged skill tree.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::config::{Limits, SourceDir, SourceKind};
use crate::listing::{Listing, Stamp, walk_skill};
use crate::skill::{ParsedSkillMd, parse_skill_md};

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
}

impl Skill {
    /// Parse and listing warnings together.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = self.parsed.warnings.clone();
        out.extend(self.listing.warnings.iter().cloned());
        out
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
}

struct CachedSkill {
    md_stamp: Stamp,
    parsed: Result<Arc<ParsedSkillMd>, String>,
    listing: Option<Arc<Listing>>,
}

/// The registry: owns the source list, the limits and the scan cache.
pub struct Registry {
    sources: Vec<SourceDir>,
    limits: Limits,
    cache: Mutex<HashMap<PathBuf, CachedSkill>>,
}

impl Registry {
    pub fn new(sources: Vec<SourceDir>, limits: Limits) -> Self {
        Registry {
            sources,
            limits,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub fn sources(&self) -> &[SourceDir] {
        &self.sources
    }

    /// Rescan every source. Unchanged `SKILL.md` files and skill trees come
    /// from the cache; entries for skills that disappeared are dropped.
    pub fn scan(&self) -> Scan {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let mut old = std::mem::take(&mut *cache);
        let mut scan = Scan::default();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut budget = self.limits.max_scan_entries;
        let mut skills_limit_warned = false;

        for source in &self.sources {
            let names = match read_dir_names(&source.path, &mut budget) {
                Ok(Some((names, complete))) => {
                    if !complete {
                        scan.warnings.push(format!(
                            "{}: stopped reading after {} directory entries (max_scan_entries); some skills are not listed",
                            source.path.display(),
                            self.limits.max_scan_entries
                        ));
                    }
                    scan.dirs.push(DirStatus {
                        source: source.kind,
                        path: source.path.clone(),
                        exists: true,
                    });
                    names
                }
                Ok(None) => {
                    scan.dirs.push(DirStatus {
                        source: source.kind,
                        path: source.path.clone(),
                        exists: false,
                    });
                    continue;
                }
                Err(error) => {
                    scan.warnings.push(format!(
                        "{} skills directory {} cannot be read: {error}",
                        source.kind.as_str(),
                        source.path.display()
                    ));
                    scan.dirs.push(DirStatus {
                        source: source.kind,
                        path: source.path.clone(),
                        exists: true,
                    });
                    continue;
                }
            };

            for dir_name in names {
                let Some(dir_name) = dir_name.to_str().map(str::to_owned) else {
                    scan.warnings.push(format!(
                        "skipped {}: the directory name is not UTF-8",
                        source.path.join(&dir_name).display()
                    ));
                    continue;
                };
                if dir_name.starts_with('.') {
                    continue;
                }
                let skill_dir = source.path.join(&dir_name);
                let dir_meta = match fs::metadata(&skill_dir) {
                    Ok(meta) if meta.is_dir() => meta,
                    Ok(_) => continue, // a plain file beside the skills (README.md, ...)
                    Err(error) => {
                        scan.warnings.push(format!(
                            "skipped {}: {}",
                            skill_dir.display(),
                            describe_io(&error)
                        ));
                        continue;
                    }
                };
                let entry_path = skill_dir.join(ENTRY_FILE);
                let md_meta = match fs::metadata(&entry_path) {
                    Ok(meta) if meta.is_file() => meta,
                    Ok(_) => {
                        scan.warnings.push(format!(
                            "skipped {}: SKILL.md is not a regular file",
                            skill_dir.display()
                        ));
                        continue;
                    }
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {
                        scan.warnings.push(format!(
                            "skipped {}: it has no SKILL.md",
                            skill_dir.display()
                        ));
                        continue;
                    }
                    Err(error) => {
                        scan.warnings.push(format!(
                            "skipped {}: SKILL.md cannot be read: {}",
                            skill_dir.display(),
                            describe_io(&error)
                        ));
                        continue;
                    }
                };

                let md_stamp = Stamp::of(&md_meta);
                let mut cached = match old.remove(&skill_dir) {
                    Some(hit) if hit.md_stamp == md_stamp => hit,
                    previous => CachedSkill {
                        md_stamp,
                        parsed: self.parse_entry(&entry_path, &md_meta, &dir_name),
                        listing: previous.and_then(|p| p.listing),
                    },
                };

                if let Err(reason) = &cached.parsed {
                    scan.warnings
                        .push(format!("skipped {}: {reason}", skill_dir.display()));
                } else if let Ok(parsed) = &cached.parsed {
                    if let Some(&winner) = by_name.get(&parsed.name) {
                        let winner: &Skill = &scan.skills[winner];
                        scan.warnings.push(if winner.source == source.kind {
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
                        });
                    } else if scan.skills.len() >= self.limits.max_skills {
                        if !skills_limit_warned {
                            skills_limit_warned = true;
                            scan.warnings.push(format!(
                                "more than {} skills found (max_skills); the rest are not listed",
                                self.limits.max_skills
                            ));
                        }
                    } else {
                        let listing = match cached.listing.take() {
                            Some(listing) if listing.is_current(&dir_meta) => listing,
                            _ => Arc::new(walk_skill(&skill_dir, &self.limits, &mut budget)),
                        };
                        cached.listing = Some(listing.clone());
                        by_name.insert(parsed.name.clone(), scan.skills.len());
                        scan.skills.push(Skill {
                            name: parsed.name.clone(),
                            source: source.kind,
                            source_path: source.path.clone(),
                            skill_dir: skill_dir.clone(),
                            entry_path,
                            parsed: parsed.clone(),
                            listing,
                        });
                    }
                }
                cache.insert(skill_dir, cached);
            }
        }
        scan.skills.sort_by(|a, b| a.name.cmp(&b.name));
        scan
    }

    /// Walk one skill's tree afresh (current sizes), ignoring the cache.
    pub fn fresh_listing(&self, skill: &Skill) -> Listing {
        let mut budget = self.limits.max_scan_entries;
        walk_skill(&skill.skill_dir, &self.limits, &mut budget)
    }

    fn parse_entry(
        &self,
        entry_path: &Path,
        meta: &fs::Metadata,
        dir_name: &str,
    ) -> Result<Arc<ParsedSkillMd>, String> {
        let limit = self.limits.max_skill_md_bytes;
        if meta.len() > limit {
            let reason = format!(
                "SKILL.md is {} bytes; the limit is {limit} (--max-skill-md-bytes)",
                meta.len()
            );
            tracing::warn!(path = %entry_path.display(), "{reason}");
            return Err(reason);
        }
        let result = read_bounded(entry_path, limit)
            .map_err(|e| format!("SKILL.md cannot be read: {}", describe_io(&e)))
            .and_then(|bytes| {
                String::from_utf8(bytes).map_err(|_| "SKILL.md is not valid UTF-8".to_string())
            })
            .and_then(|text| parse_skill_md(&text, dir_name));
        match &result {
            Ok(parsed) => {
                for warning in &parsed.warnings {
                    tracing::warn!(path = %entry_path.display(), "{warning}");
                }
            }
            Err(reason) => tracing::warn!(path = %entry_path.display(), "skill skipped: {reason}"),
        }
        result.map(Arc::new)
    }
}

/// Names in a directory, sorted; `None` when it does not exist. The bool is
/// false when the entry budget ran out before the end.
fn read_dir_names(path: &Path, budget: &mut usize) -> io::Result<Option<(Vec<OsString>, bool)>> {
    let entries = match fs::read_dir(path) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let mut names = Vec::new();
    let mut complete = true;
    for entry in entries {
        if *budget == 0 {
            complete = false;
            break;
        }
        *budget -= 1;
        names.push(entry?.file_name());
    }
    names.sort();
    Ok(Some((names, complete)))
}

/// Read at most `limit` bytes; more than that is an error (the file grew).
pub(crate) fn read_bounded(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = fs::File::open(path)?;
    let mut bytes = Vec::new();
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
