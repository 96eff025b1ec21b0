//! The registry reuses its last scan while inotify reports no change. These
//! tests first let a long-lived `Host` settle into that fast path (checked
//! through `scan_stats`), then change the disk in every way that matters and
//! require the change at the very next call.

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::time::Duration;

use common::Fixture;
use common::lib_host::{find, host, list, names};
use skillhost::Host;
use skillhost::api::SkillList;

fn description(list: &SkillList, name: &str) -> String {
    find(list, name).description.clone()
}

fn files(list: &SkillList, name: &str) -> Vec<String> {
    find(list, name).files.clone()
}

/// Call `list` until answers come from the reused scan; panics if they never do.
fn settle(host: &Host) {
    for _ in 0..6 {
        let before = host.scan_stats();
        list(host);
        if host.scan_stats().reused > before.reused {
            return;
        }
    }
    panic!("the registry never reused a scan: {:?}", host.scan_stats());
}

/// Call `list` a few times; none may be answered from a reused scan.
fn assert_never_reused(host: &Host) {
    for _ in 0..5 {
        list(host);
    }
    assert_eq!(host.scan_stats().reused, 0, "{:?}", host.scan_stats());
}

fn md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\nbody\n")
}

#[test]
fn quiet_disk_reuses_the_scan_and_returns_the_same_result() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "alpha", "First");
    fx.file(&dir, "references/a.md", "a");
    let host = host(&fx);
    let first = list(&host);
    settle(&host);
    let full = host.scan_stats().full_scans;
    for _ in 0..10 {
        let again = list(&host);
        assert_eq!(names(&again), names(&first));
        assert_eq!(files(&again, "alpha"), ["references/a.md"]);
    }
    let stats = host.scan_stats();
    assert_eq!(stats.full_scans, full, "no full scan while nothing changes");
    assert!(stats.reused >= 10);
}

#[test]
fn same_size_rewrite_with_restored_mtime_is_seen_after_settling() {
    let fx = Fixture::new();
    let dir = fx.skill_md(&fx.project_dir(), "alpha", &md("alpha", "version-1"));
    let host = host(&fx);
    settle(&host);
    let entry = dir.join("SKILL.md");
    let mtime = fs::metadata(&entry).unwrap().modified().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    fs::write(&entry, md("alpha", "version-2")).unwrap();
    fs::File::options()
        .write(true)
        .open(&entry)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert_eq!(description(&list(&host), "alpha"), "version-2");
}

#[test]
fn skills_added_removed_and_fixed_are_seen_after_settling() {
    let fx = Fixture::new();
    fx.skill(&fx.project_dir(), "alpha", "First");
    let empty = fx.project_dir().join("pending");
    fs::create_dir_all(&empty).unwrap();
    let broken = fx.skill_md(&fx.project_dir(), "broken", "---\nname: broken\n---\n");
    let host = host(&fx);
    settle(&host);

    fx.skill(&fx.project_dir(), "beta", "Second");
    assert_eq!(names(&list(&host)), ["alpha", "beta"]);
    settle(&host);

    // A directory that had no SKILL.md gets one.
    fs::write(empty.join("SKILL.md"), md("pending", "Now complete")).unwrap();
    assert_eq!(names(&list(&host)), ["alpha", "beta", "pending"]);
    settle(&host);

    // A skill that did not parse is fixed.
    fs::write(broken.join("SKILL.md"), md("broken", "Fixed")).unwrap();
    assert_eq!(description(&list(&host), "broken"), "Fixed");
    settle(&host);

    fs::remove_dir_all(fx.project_dir().join("alpha")).unwrap();
    assert_eq!(names(&list(&host)), ["beta", "broken", "pending"]);
}

#[test]
fn related_files_added_deep_or_in_new_directories_are_seen() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "alpha", "First");
    fx.file(&dir, "references/deep/a.md", "a");
    let host = host(&fx);
    settle(&host);

    fx.file(&dir, "references/deep/b.md", "b");
    assert_eq!(
        files(&list(&host), "alpha"),
        ["references/deep/a.md", "references/deep/b.md"]
    );
    settle(&host);

    fx.file(&dir, "scripts/run.py", "print(1)");
    assert_eq!(
        files(&list(&host), "alpha"),
        [
            "references/deep/a.md",
            "references/deep/b.md",
            "scripts/run.py"
        ]
    );
    settle(&host);

    fs::remove_dir_all(dir.join("references")).unwrap();
    assert_eq!(files(&list(&host), "alpha"), ["scripts/run.py"]);
}

#[test]
fn a_source_created_later_or_replaced_is_seen() {
    let fx = Fixture::new();
    fx.skill(&fx.project_dir(), "alpha", "First");
    let host = host(&fx);
    settle(&host);

    // The global source did not exist; now it does, with a skill.
    fx.skill(&fx.global_dir(), "gamma", "Global");
    assert_eq!(names(&list(&host)), ["alpha", "gamma"]);
    settle(&host);

    // The workspace's `.agents` is moved away and replaced by another tree:
    // no watched directory sees an event, the source path names a new inode.
    let agents = fx.workspace().join(".agents");
    fs::rename(&agents, fx.workspace().join(".agents-old")).unwrap();
    fx.skill(&fx.project_dir(), "delta", "Replacement");
    assert_eq!(names(&list(&host)), ["delta", "gamma"]);
}

#[test]
fn symlinked_skills_are_checked_on_every_call() {
    let fx = Fixture::new();
    let elsewhere = fx.path().join("elsewhere");
    let real = fx.skill(&elsewhere, "linked", "Version one");
    let other = fx.skill_md(&elsewhere, "linked-2", &md("linked", "Version two"));
    fs::create_dir_all(fx.project_dir()).unwrap();
    let link = fx.project_dir().join("linked");
    symlink(&real, &link).unwrap();
    let host = host(&fx);
    // What a symlink points to is outside the watched directories.
    assert_never_reused(&host);

    fs::write(real.join("SKILL.md"), md("linked", "Edited in place")).unwrap();
    assert_eq!(description(&list(&host), "linked"), "Edited in place");

    // The directory that holds the target is renamed: no event reaches us.
    fs::rename(&elsewhere, fx.path().join("moved")).unwrap();
    assert!(names(&list(&host)).is_empty());
    fs::rename(fx.path().join("moved"), &elsewhere).unwrap();
    fs::remove_file(&link).unwrap();
    symlink(&other, &link).unwrap();
    assert_eq!(description(&list(&host), "linked"), "Version two");
}

#[test]
fn a_symlinked_skill_md_is_checked_on_every_call() {
    let fx = Fixture::new();
    let shared = fx.path().join("shared.md");
    fs::write(&shared, md("alpha", "Shared one")).unwrap();
    let dir = fx.project_dir().join("alpha");
    fs::create_dir_all(&dir).unwrap();
    symlink(&shared, dir.join("SKILL.md")).unwrap();
    let host = host(&fx);
    assert_never_reused(&host);
    fs::write(&shared, md("alpha", "Shared two")).unwrap();
    assert_eq!(description(&list(&host), "alpha"), "Shared two");
}

#[test]
fn a_listing_that_follows_a_symlink_is_checked_on_every_call() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "alpha", "First");
    fx.file(&dir, ".shared/notes.md", "n");
    symlink(".shared", dir.join("notes")).unwrap();
    let host = host(&fx);
    assert_never_reused(&host);
    fx.file(&dir, ".shared/more.md", "m");
    assert_eq!(
        files(&list(&host), "alpha"),
        ["notes/more.md", "notes/notes.md"]
    );
}
