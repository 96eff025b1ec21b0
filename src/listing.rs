//! The related files of one skill: a bounded walk of its tree, and the
//! directory stamps that tell whether a cached listing is still current.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::config::Limits;
use crate::registry::ENTRY_FILE;
use crate::skill::manifest::MANIFEST_FILE;

/// Names inside a skill that are never listed as related files.
const IGNORED_NAMES: &[&str] = &["__pycache__", "node_modules"];

/// Identity and version of a file or directory as seen by `stat`. `ctime`
/// is included so that a rewrite which restores the old mtime (`cp -p`,
/// `rsync -a`, `tar x`) is still noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    pub(crate) fn of(meta: &fs::Metadata) -> Self {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// A related file of a skill, relative to the skill directory with `/` separators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    pub path: String,
    pub size: u64,
}

/// The related files of one skill, bounded by [`Limits`].
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// At most `max_files_listed` entries, sorted by path; `SKILL.md` excluded.
    pub files: Vec<FileEntry>,
    /// Files found, including the ones beyond the listing limit.
    pub total_files: usize,
    pub warnings: Vec<String>,
    /// Every directory walked with its stamp; the listing is current while all match.
    dir_stamps: Vec<(PathBuf, Stamp)>,
    /// A symlink's target can change without any walked directory changing,
    /// so a listing that followed one is never reused.
    followed_symlinks: bool,
    /// Some directory could not be read or the entry budget ran out.
    incomplete: bool,
    /// The skill directory has an entry named `skill.yaml`.
    manifest_entry: bool,
}

impl Listing {
    /// The directories walked, the skill directory first.
    pub(crate) fn dirs(&self) -> impl Iterator<Item = &Path> {
        self.dir_stamps.iter().map(|(dir, _)| dir.as_path())
    }

    /// Whether a `skill.yaml` may exist: seen at the top of the skill, or
    /// the walk was incomplete.
    pub(crate) fn has_manifest(&self) -> bool {
        self.manifest_entry || self.incomplete
    }

    /// True when watching [`Listing::dirs`] catches every change to it.
    pub(crate) fn is_watchable(&self) -> bool {
        !self.followed_symlinks && !self.incomplete
    }

    /// True while no walked directory changed (`skill_dir_meta` is a fresh
    /// stat of the skill directory itself).
    pub(crate) fn is_current(&self, skill_dir_meta: &fs::Metadata) -> bool {
        if self.followed_symlinks {
            return false;
        }
        let mut stamps = self.dir_stamps.iter();
        match stamps.next() {
            Some((_, root)) if *root == Stamp::of(skill_dir_meta) => {}
            _ => return false,
        }
        stamps.all(|(dir, stamp)| {
            fs::metadata(dir)
                .map(|m| Stamp::of(&m) == *stamp)
                .unwrap_or(false)
        })
    }
}

/// List a skill's related files. Hidden entries and caches are skipped;
/// symlinks are listed only when cap-std can follow them inside the skill
/// (exactly what `skill_read` will open); depth and entries are bounded.
/// Real directories are walked before symlinked ones, so a directory reached
/// both ways is listed under its real path.
/// `root_meta` is a fresh stat of `skill_dir` when the caller has one.
pub(crate) fn walk_skill(
    skill_dir: &Path,
    root_meta: Option<&fs::Metadata>,
    limits: &Limits,
    budget: &mut usize,
) -> Listing {
    let mut walk = Walk {
        limits,
        budget,
        listing: Listing::default(),
        files: Vec::new(),
        sandbox: None,
        visited: HashSet::new(),
        budget_warned: false,
        depth_warned: false,
    };
    let mut pending: Pending = vec![(
        skill_dir.to_path_buf(),
        String::new(),
        0,
        root_meta.cloned(),
    )];
    let mut via_symlink = Vec::new();
    while let Some(next) = pending.pop().or_else(|| via_symlink.pop()) {
        walk.directory(skill_dir, next, &mut pending, &mut via_symlink);
    }
    walk.finish()
}

struct Walk<'a> {
    limits: &'a Limits,
    budget: &'a mut usize,
    listing: Listing,
    files: Vec<FileEntry>,
    /// The skill directory opened with cap-std, for checking symlinks.
    sandbox: Option<Option<Dir>>,
    visited: HashSet<(u64, u64)>,
    budget_warned: bool,
    depth_warned: bool,
}

/// Directories to walk: path, skill-relative path, depth, metadata if known.
type Pending = Vec<(PathBuf, String, usize, Option<fs::Metadata>)>;

impl Walk<'_> {
    fn directory(
        &mut self,
        skill_dir: &Path,
        (dir, rel, depth, meta): (PathBuf, String, usize, Option<fs::Metadata>),
        pending: &mut Pending,
        via_symlink: &mut Pending,
    ) {
        let meta = match meta {
            Some(meta) => meta,
            None => match fs::metadata(&dir) {
                Ok(meta) => meta,
                Err(_) => return,
            },
        };
        // A directory reached twice (through a symlink inside the skill) is listed once.
        if !self.visited.insert((meta.dev(), meta.ino())) {
            return;
        }
        self.listing
            .dir_stamps
            .push((dir.clone(), Stamp::of(&meta)));
        let Ok(entries) = fs::read_dir(&dir) else {
            self.listing.incomplete = true;
            let shown = if rel.is_empty() { "." } else { rel.as_str() };
            self.listing
                .warnings
                .push(format!("directory `{shown}` cannot be read"));
            return;
        };
        for entry in entries.flatten() {
            if *self.budget == 0 {
                self.listing.incomplete = true;
                if !self.budget_warned {
                    self.budget_warned = true;
                    self.listing.warnings.push(
                        "stopped listing files after max_scan_entries directory entries".into(),
                    );
                }
                return;
            }
            *self.budget -= 1;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if rel.is_empty() && name == MANIFEST_FILE {
                self.listing.manifest_entry = true;
            }
            if name.starts_with('.') || IGNORED_NAMES.contains(&name.as_str()) {
                continue;
            }
            let rel_path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            let is_symlink = file_type.is_symlink();
            let (is_dir, is_file, size, meta) = if is_symlink {
                self.listing.followed_symlinks = true;
                let sandbox = self.sandbox.get_or_insert_with(|| {
                    Dir::open_ambient_dir(skill_dir, ambient_authority()).ok()
                });
                match sandbox.as_ref().map(|d| d.metadata(&rel_path)) {
                    Some(Ok(meta)) => (meta.is_dir(), meta.is_file(), meta.len(), None),
                    _ => {
                        self.listing.warnings.push(format!(
                            "`{rel_path}` is a symlink that is absolute, leads outside the skill or nowhere; it is not listed and cannot be read"
                        ));
                        continue;
                    }
                }
            } else {
                match entry.metadata() {
                    Ok(meta) => (meta.is_dir(), meta.is_file(), meta.len(), Some(meta)),
                    Err(_) => continue,
                }
            };
            if is_dir {
                if depth + 1 < self.limits.max_file_depth {
                    let queue = if is_symlink {
                        &mut *via_symlink
                    } else {
                        &mut *pending
                    };
                    queue.push((entry.path(), rel_path, depth + 1, meta));
                } else if !self.depth_warned {
                    self.depth_warned = true;
                    self.listing.warnings.push(format!(
                        "files deeper than {} levels are not listed",
                        self.limits.max_file_depth
                    ));
                }
            } else if is_file && !(rel.is_empty() && name == ENTRY_FILE) {
                self.files.push(FileEntry {
                    path: rel_path,
                    size,
                });
            }
        }
    }

    fn finish(mut self) -> Listing {
        self.files.sort_by(|a, b| a.path.cmp(&b.path));
        self.listing.warnings.sort();
        self.listing.total_files = self.files.len();
        if self.files.len() > self.limits.max_files_listed {
            self.listing.warnings.push(format!(
                "{} related files found; only the first {} are listed (max_files_listed)",
                self.files.len(),
                self.limits.max_files_listed
            ));
            self.files.truncate(self.limits.max_files_listed);
        }
        self.listing.files = self.files;
        self.listing
    }
}
