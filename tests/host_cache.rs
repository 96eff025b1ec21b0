//! One long-lived `Host` must see every change on disk at its next call,
//! although the registry caches parsed `SKILL.md` files and skill listings.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::Path;
use std::time::Duration;

use common::Fixture;
use common::lib_host::{find, host, list, names};
use skillhost::api::{LoadedSkill, ReadRequest};
use skillhost::{ErrorKind, Host, SourceKind};

fn load(host: &Host, name: &str) -> LoadedSkill {
    host.load(name)
        .unwrap_or_else(|e| panic!("load {name}: {e}"))
}

fn sizes(loaded: &LoadedSkill) -> Vec<(&str, u64)> {
    loaded
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.size))
        .collect()
}

/// Let the clock move past the file-system timestamp granularity so that a
/// rewrite gets a ctime different from the one the cache recorded.
fn tick() {
    std::thread::sleep(Duration::from_millis(30));
}

fn md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n{description} body\n")
}

#[test]
fn skill_added_between_lists_appears() {
    let fx = Fixture::new();
    let host = host(&fx);

    let first = list(&host);
    assert!(first.skills.is_empty(), "{first:#?}");
    assert!(first.warnings.is_empty(), "{first:#?}");
    let dirs: Vec<(SourceKind, bool)> = first
        .skills_dirs
        .iter()
        .map(|d| (d.source, d.exists))
        .collect();
    assert_eq!(
        dirs,
        [
            (SourceKind::Project, false),
            (SourceKind::Managed, false),
            (SourceKind::Managed, false),
            (SourceKind::Global, false),
        ]
    );

    fx.skill(&fx.project_dir(), "alpha", "First");
    let second = list(&host);
    assert_eq!(names(&second), ["alpha"]);
    assert_eq!(find(&second, "alpha").source, SourceKind::Project);
    assert!(second.skills_dirs[0].exists);

    fx.skill(&fx.global_dir(), "beta", "Second");
    fx.skill(&fx.project_dir(), "aardvark", "Third");
    let third = list(&host);
    assert_eq!(names(&third), ["aardvark", "alpha", "beta"]);
    assert_eq!(find(&third, "beta").source, SourceKind::Global);
    assert_eq!(load(&host, "beta").description, "Second");
}

#[test]
fn edited_description_is_seen_at_next_call() {
    let fx = Fixture::new();
    let host = host(&fx);
    let dir = fx.skill_md(&fx.project_dir(), "demo", &md("demo", "Old text"));
    assert_eq!(find(&list(&host), "demo").description, "Old text");
    assert_eq!(load(&host, "demo").instructions, "# demo\nOld text body\n");

    tick();
    fs::write(
        dir.join("SKILL.md"),
        md("demo", "A longer, newer description"),
    )
    .unwrap();
    let after = list(&host);
    assert_eq!(
        find(&after, "demo").description,
        "A longer, newer description"
    );
    let loaded = load(&host, "demo");
    assert_eq!(loaded.description, "A longer, newer description");
    assert_eq!(
        loaded.instructions,
        "# demo\nA longer, newer description body\n"
    );
    assert_eq!(
        loaded.frontmatter["description"],
        "A longer, newer description"
    );
}

#[test]
fn same_size_edit_with_restored_mtime_is_seen() {
    let fx = Fixture::new();
    let host = host(&fx);
    let dir = fx.skill_md(&fx.project_dir(), "demo", &md("demo", "alpha-one"));
    let entry = dir.join("SKILL.md");
    assert_eq!(find(&list(&host), "demo").description, "alpha-one");
    let before = fs::metadata(&entry).unwrap();
    let old_mtime = before.modified().unwrap();

    // Rewrite in place (same inode, same size), then put the old mtime back,
    // as `cp -p`, `rsync -a` or `tar x` would.
    tick();
    fs::write(&entry, md("demo", "bravo-two")).unwrap();
    fs::File::options()
        .write(true)
        .open(&entry)
        .unwrap()
        .set_modified(old_mtime)
        .unwrap();
    let after = fs::metadata(&entry).unwrap();
    assert_eq!(after.len(), before.len(), "the edit must keep the size");
    assert_eq!(after.ino(), before.ino(), "the edit must keep the inode");
    assert_eq!(after.modified().unwrap(), old_mtime, "mtime not restored");
    assert_ne!(
        (after.ctime(), after.ctime_nsec()),
        (before.ctime(), before.ctime_nsec()),
        "ctime should have changed"
    );

    assert_eq!(find(&list(&host), "demo").description, "bravo-two");
    assert_eq!(load(&host, "demo").instructions, "# demo\nbravo-two body\n");

    // Replacing the file by a rename (new inode), again same size and mtime.
    tick();
    let staged = fx.path().join("staged.md");
    fs::write(&staged, md("demo", "charlie-3")).unwrap();
    fs::File::options()
        .write(true)
        .open(&staged)
        .unwrap()
        .set_modified(old_mtime)
        .unwrap();
    fs::rename(&staged, &entry).unwrap();
    assert_eq!(fs::metadata(&entry).unwrap().len(), before.len());
    assert_eq!(find(&list(&host), "demo").description, "charlie-3");
}

#[test]
fn skill_that_turns_invalid_is_skipped_and_returns_when_fixed() {
    let fx = Fixture::new();
    let host = host(&fx);
    let dir = fx.skill(&fx.project_dir(), "demo", "Valid");
    assert_eq!(names(&list(&host)), ["demo"]);

    tick();
    fs::write(
        dir.join("SKILL.md"),
        "---\nname: demo\n---\nno description\n",
    )
    .unwrap();
    let broken = list(&host);
    assert!(broken.skills.is_empty(), "{broken:#?}");
    assert_eq!(
        broken.warnings,
        [format!(
            "skipped {}: frontmatter has no `description`",
            dir.display()
        )]
    );
    assert_eq!(
        host.load("demo").unwrap_err().kind,
        ErrorKind::SkillNotFound
    );

    tick();
    fs::write(dir.join("SKILL.md"), md("demo", "Fixed")).unwrap();
    let fixed = list(&host);
    assert_eq!(names(&fixed), ["demo"]);
    assert_eq!(find(&fixed, "demo").description, "Fixed");
    assert!(fixed.warnings.is_empty(), "{fixed:#?}");
}

#[test]
fn deleted_skill_disappears() {
    let fx = Fixture::new();
    let host = host(&fx);
    let gone = fx.skill(&fx.project_dir(), "gone", "Will be deleted");
    fx.file(&gone, "references/a.md", "a");
    fx.skill(&fx.project_dir(), "kept", "Stays");
    assert_eq!(names(&list(&host)), ["gone", "kept"]);
    assert_eq!(load(&host, "gone").files.len(), 1);

    fs::remove_dir_all(&gone).unwrap();
    let after = list(&host);
    assert_eq!(names(&after), ["kept"]);
    assert!(after.warnings.is_empty(), "{after:#?}");
    assert_eq!(
        host.load("gone").unwrap_err().kind,
        ErrorKind::SkillNotFound
    );
    let read = host.read(&ReadRequest {
        name: "gone".into(),
        path: "references/a.md".into(),
        offset: None,
        length: None,
        revision: None,
    });
    assert_eq!(read.unwrap_err().kind, ErrorKind::SkillNotFound);

    // Only SKILL.md removed: the directory is skipped with a warning.
    let kept = fx.project_dir().join("kept");
    fs::remove_file(kept.join("SKILL.md")).unwrap();
    let after = list(&host);
    assert!(after.skills.is_empty(), "{after:#?}");
    assert_eq!(
        after.warnings,
        [format!("skipped {}: it has no SKILL.md", kept.display())]
    );
}

#[test]
fn file_added_in_nested_subdirectory_is_listed() {
    let fx = Fixture::new();
    let host = host(&fx);
    let dir = fx.skill(&fx.project_dir(), "demo", "Nested files");
    fx.file(&dir, "references/deep/old.md", "old");
    fx.file(&dir, "scripts/run.py", "print()");
    assert_eq!(
        find(&list(&host), "demo").files,
        ["references/deep/old.md", "scripts/run.py"]
    );

    // Into a directory that already existed (only its own stamp changes).
    fx.file(&dir, "references/deep/x.md", "new");
    assert_eq!(
        find(&list(&host), "demo").files,
        [
            "references/deep/old.md",
            "references/deep/x.md",
            "scripts/run.py"
        ]
    );

    // Into directories that did not exist yet.
    fx.file(&dir, "references/deep/deeper/still/y.md", "y");
    assert_eq!(
        find(&list(&host), "demo").files,
        [
            "references/deep/deeper/still/y.md",
            "references/deep/old.md",
            "references/deep/x.md",
            "scripts/run.py"
        ]
    );

    // Removed deep down.
    fs::remove_file(dir.join("references/deep/old.md")).unwrap();
    fs::remove_dir_all(dir.join("scripts")).unwrap();
    assert_eq!(
        find(&list(&host), "demo").files,
        ["references/deep/deeper/still/y.md", "references/deep/x.md"]
    );
    let loaded = load(&host, "demo");
    assert_eq!(
        sizes(&loaded),
        [
            ("references/deep/deeper/still/y.md", 1),
            ("references/deep/x.md", 3)
        ]
    );
}

#[test]
fn removing_shadowing_project_skill_reveals_managed_one() {
    let fx = Fixture::new();
    let host = host(&fx);
    let project = fx.skill(&fx.project_dir(), "dup", "from project");
    let managed = fx.skill(&fx.managed_dir(), "dup", "from managed");
    fx.file(&managed, "references/managed-only.md", "m");

    let first = list(&host);
    let dup = find(&first, "dup");
    assert_eq!(dup.source, SourceKind::Project);
    assert_eq!(dup.description, "from project");
    assert!(dup.files.is_empty(), "{dup:#?}");
    assert_eq!(
        first.warnings,
        [format!(
            "managed skill `dup` at {} is shadowed by the project one at {}",
            managed.display(),
            project.display()
        )]
    );

    fs::remove_dir_all(&project).unwrap();
    let second = list(&host);
    assert_eq!(names(&second), ["dup"]);
    let dup = find(&second, "dup");
    assert_eq!(dup.source, SourceKind::Managed);
    assert_eq!(dup.description, "from managed");
    assert_eq!(dup.source_path, fx.managed_dir().display().to_string());
    assert_eq!(
        dup.entry_path,
        managed.join("SKILL.md").display().to_string()
    );
    assert_eq!(dup.files, ["references/managed-only.md"]);
    assert!(second.warnings.is_empty(), "{second:#?}");
    let loaded = load(&host, "dup");
    assert_eq!(loaded.source, SourceKind::Managed);
    assert_eq!(loaded.skill_dir, managed.display().to_string());

    // And back: a new project skill shadows it again.
    fx.skill(&fx.project_dir(), "dup", "project again");
    let third = list(&host);
    assert_eq!(find(&third, "dup").source, SourceKind::Project);
    assert_eq!(find(&third, "dup").description, "project again");
    assert_eq!(third.warnings.len(), 1, "{third:#?}");
    assert!(third.warnings[0].contains("is shadowed by the project one"));
}

#[test]
fn load_and_read_report_current_sizes_after_a_file_grows() {
    let fx = Fixture::new();
    let host = host(&fx);
    let dir = fx.skill(&fx.project_dir(), "demo", "Growing file");
    fx.file(&dir, "references/log.md", "12345");
    fx.file(&dir, "references/other.md", "x");
    assert_eq!(
        sizes(&load(&host, "demo")),
        [("references/log.md", 5), ("references/other.md", 1)]
    );
    // Warm the list cache as well.
    assert_eq!(find(&list(&host), "demo").files.len(), 2);

    let grown = "0123456789".repeat(5);
    fs::write(dir.join("references/log.md"), &grown).unwrap();
    assert_eq!(
        sizes(&load(&host, "demo")),
        [("references/log.md", 50), ("references/other.md", 1)]
    );
    let read = host
        .read(&ReadRequest {
            name: "demo".into(),
            path: "references/log.md".into(),
            offset: None,
            length: None,
            revision: None,
        })
        .unwrap();
    assert_eq!((read.size, read.length), (50, 50));
    assert_eq!(read.content, grown);
    assert!(!read.truncated);

    // Shrinks are seen too.
    fs::write(dir.join("references/log.md"), "ab").unwrap();
    assert_eq!(
        sizes(&load(&host, "demo")),
        [("references/log.md", 2), ("references/other.md", 1)]
    );
}

#[test]
fn retargeted_skill_directory_symlink_is_seen() {
    let fx = Fixture::new();
    let host = host(&fx);
    let a = fx.skill_md(&fx.path().join("a"), "demo", &md("demo", "version-a"));
    fx.file(&a, "references/a.md", "a");
    let b = fx.skill_md(&fx.path().join("b"), "demo", &md("demo", "version-b"));
    fx.file(&b, "references/b.md", "b");
    fs::create_dir_all(fx.project_dir()).unwrap();
    let link = fx.project_dir().join("demo");
    symlink(&a, &link).unwrap();

    let first = list(&host);
    assert_eq!(find(&first, "demo").description, "version-a");
    assert_eq!(find(&first, "demo").files, ["references/a.md"]);

    fs::remove_file(&link).unwrap();
    symlink(&b, &link).unwrap();
    let second = list(&host);
    assert_eq!(find(&second, "demo").description, "version-b");
    assert_eq!(find(&second, "demo").files, ["references/b.md"]);
    assert!(Path::new(&find(&second, "demo").entry_path).starts_with(&link));
}

/// `list` and `load` of the same host must agree on a skill's files. A
/// symlink inside the skill whose target lives in a directory the walk does
/// not list (here a hidden one) depends on that directory too: when the
/// target goes away, the next `list` must drop the link as `load` does.
#[test]
fn list_follows_changes_behind_an_inside_symlink() {
    let fx = Fixture::new();
    let host = host(&fx);
    let dir = fx.skill(&fx.project_dir(), "demo", "Linked file");
    fx.file(&dir, ".shared/notes.md", "notes");
    symlink(".shared/notes.md", dir.join("notes.md")).unwrap();

    assert_eq!(find(&list(&host), "demo").files, ["notes.md"]);
    assert_eq!(sizes(&load(&host, "demo")), [("notes.md", 5)]);

    fs::remove_file(dir.join(".shared/notes.md")).unwrap();
    // The link now leads nowhere: `load` (a fresh walk) drops it ...
    let loaded = load(&host, "demo");
    assert!(loaded.files.is_empty(), "{:?}", loaded.files);
    // ... and the cached listing behind `list` must not keep advertising it.
    let after = list(&host);
    let demo = find(&after, "demo");
    assert!(
        demo.files.is_empty(),
        "list still shows {:?} although load shows none",
        demo.files
    );
    assert!(
        demo.warnings.iter().any(|w| w.starts_with(
            "`notes.md` is a symlink that is absolute, leads outside the skill or nowhere"
        )),
        "{:?}",
        demo.warnings
    );
}
