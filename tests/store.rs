//! The managed store through the library `Host`: install, upgrade, pinning,
//! rollback, removal, pruning, version conflicts, enable/disable, and a
//! reader that runs while other processes install.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::Fixture;
use common::skills::{host, host_with, request};
use common::store::*;
use serde_json::json;
use skillhost::api::{ConfigSetRequest, InstallRequest, ListRequest, RevisionsRequest};
use skillhost::exec::RunContext;
use skillhost::manage::Origin;
use skillhost::{ErrorKind, SourceKind};

#[test]
fn upgrade_keeps_the_old_revision_which_can_be_pinned_and_rolled_back_to() {
    let fx = Fixture::new();
    let host = host(&fx);
    let v1 = install_path(&host, &version_dir(fx.path(), "alpha", 1));
    assert_eq!(
        (v1.name.as_str(), v1.version, v1.new_revision),
        ("alpha", 1, true)
    );
    let v2 = install_path(&host, &version_dir(fx.path(), "alpha", 2));
    assert_eq!((v2.version, v2.new_revision), (2, true));
    assert_ne!(v1.revision_id, v2.revision_id);
    assert_eq!(
        ids(&host, "alpha"),
        [v1.revision_id.clone(), v2.revision_id.clone()]
    );
    let stored = revisions(&host, "alpha");
    assert_eq!(
        stored.active_revision.as_deref(),
        Some(v2.revision_id.as_str())
    );
    assert_eq!(
        stored
            .revisions
            .iter()
            .map(|r| r.active)
            .collect::<Vec<_>>(),
        [false, true]
    );
    assert_eq!(
        (stored.installed, stored.enabled, stored.version),
        (true, true, 2)
    );

    // The default is the new revision; `revision` pins the old one.
    let now = load_at(&host, "alpha", None).unwrap();
    assert_eq!(now.instructions, body("alpha", 2));
    assert_eq!(now.revision_id.as_deref(), Some(v2.revision_id.as_str()));
    assert_eq!(now.source, SourceKind::Managed);
    let old = load_at(&host, "alpha", Some(&v1.revision_id)).unwrap();
    assert_eq!(old.instructions, body("alpha", 1));
    assert_eq!(old.revision_id.as_deref(), Some(v1.revision_id.as_str()));
    assert!(
        old.files.iter().any(|f| f.path == "references/v1.md"),
        "{:?}",
        old.files
    );
    assert!(!old.files.iter().any(|f| f.path == "references/v2.md"));
    assert_eq!(read_at(&host, "alpha", "version.txt", None).unwrap(), "2\n");
    assert_eq!(
        read_at(&host, "alpha", "version.txt", Some(&v1.revision_id)).unwrap(),
        "1\n"
    );
    assert_eq!(
        read_at(&host, "alpha", "references/v1.md", None),
        Err(ErrorKind::FileNotFound)
    );
    assert!(read_at(&host, "alpha", "references/v1.md", Some(&v1.revision_id)).is_ok());
    let listed = host.list(&ListRequest::default());
    let summary = listed.skills.iter().find(|s| s.name == "alpha").unwrap();
    assert_eq!(
        summary.revision_id.as_deref(),
        Some(v2.revision_id.as_str())
    );
    assert!(summary.enabled);

    // An unknown revision is REVISION_NOT_FOUND everywhere.
    let unknown = format!("sha256:{}", "0".repeat(64));
    assert_eq!(
        error(load_at(&host, "alpha", Some(&unknown))).kind,
        ErrorKind::RevisionNotFound
    );
    assert_eq!(
        read_at(&host, "alpha", "SKILL.md", Some(&unknown)),
        Err(ErrorKind::RevisionNotFound)
    );
    assert_eq!(
        activate(&host, "alpha", &unknown, None),
        Err(ErrorKind::RevisionNotFound)
    );
    assert_eq!(
        revisions(&host, "alpha").version,
        2,
        "a refused change bumps nothing"
    );

    // Rollback: one step, the version bumps, nothing is dropped.
    assert_eq!(activate(&host, "alpha", &v1.revision_id, Some(2)), Ok(3));
    assert_eq!(
        load_at(&host, "alpha", None).unwrap().instructions,
        body("alpha", 1)
    );
    assert_eq!(read_at(&host, "alpha", "version.txt", None).unwrap(), "1\n");
    assert_eq!(ids(&host, "alpha").len(), 2);
    assert_eq!(
        load_at(&host, "alpha", Some(&v2.revision_id))
            .unwrap()
            .instructions,
        body("alpha", 2)
    );
    assert_consistent(&fx.state_dir());
}

#[test]
fn identical_content_is_the_same_revision() {
    let fx = Fixture::new();
    let host = host(&fx);
    let first = install_path(&host, &version_dir(fx.path(), "alpha", 1));
    // The same content from another directory.
    let copy = versioned(&fx.path().join("elsewhere/alpha"), "alpha", 1);
    let again = install_path(&host, &copy);
    assert_eq!(
        (
            again.revision_id.as_str(),
            again.new_revision,
            again.version
        ),
        (first.revision_id.as_str(), false, 2)
    );
    assert_eq!(ids(&host, "alpha").len(), 1);
    assert_eq!(ids(&host, "alpha")[0], first.revision_id);
    // Back to v1 after v2: the kept revision is made active again.
    let second = install_path(&host, &version_dir(fx.path(), "alpha", 2));
    let back = install_path(&host, &copy);
    assert_eq!(
        (back.revision_id.as_str(), back.new_revision),
        (first.revision_id.as_str(), false)
    );
    assert_eq!(ids(&host, "alpha"), [second.revision_id, first.revision_id]);
    assert_eq!(
        load_at(&host, "alpha", None).unwrap().instructions,
        body("alpha", 1)
    );
    assert_consistent(&fx.state_dir());
}

#[test]
fn removed_skills_are_gone_for_every_call() {
    let fx = Fixture::new();
    let host = host(&fx);
    let installed = install_path(&host, &version_dir(fx.path(), "alpha", 1));
    let removed = host.remove(&change("alpha", Some(1))).unwrap();
    // The count goes on after a removal (a stale expected_version never matches again).
    assert_eq!(
        (removed.installed, removed.version, removed.active_revision),
        (false, 2, None)
    );
    assert_eq!(error(host.load("alpha")).kind, ErrorKind::SkillNotFound);
    assert_eq!(
        read_at(&host, "alpha", "SKILL.md", None),
        Err(ErrorKind::SkillNotFound)
    );
    assert_eq!(
        error(load_at(&host, "alpha", Some(&installed.revision_id))).kind,
        ErrorKind::RevisionNotFound
    );
    assert!(
        host.list(&ListRequest {
            include_disabled: Some(true)
        })
        .skills
        .is_empty()
    );
    for result in [
        host.remove(&change("alpha", None)).map(|_| ()),
        host.revisions(&RevisionsRequest {
            name: "alpha".into(),
        })
        .map(|_| ()),
        host.set_enabled(&change("alpha", None), false).map(|_| ()),
    ] {
        assert_eq!(error(result).kind, ErrorKind::SkillNotFound);
    }
    // The revision waits out its grace period (readers may hold it).
    let catalog = assert_consistent(&fx.state_dir());
    assert_eq!(
        catalog["retired"][0]["id"],
        installed.revision_id.as_str(),
        "{catalog:#}"
    );
}

/// A writer that read version 1 before the skill was removed and installed
/// again must not succeed: versions may not repeat for a name.
#[test]
fn versions_do_not_repeat_after_remove_and_reinstall() {
    let fx = Fixture::new();
    let host = host(&fx);
    let seen = install_path(&host, &version_dir(fx.path(), "alpha", 1)).version;
    host.remove(&change("alpha", None)).unwrap();
    let again = install_path(&host, &version_dir(fx.path(), "alpha", 2));
    assert_eq!(
        host.set_enabled(&change("alpha", Some(seen)), false)
            .map(|s| s.version)
            .map_err(|e| e.kind),
        Err(ErrorKind::VersionConflict),
        "expected_version {seen} read before the removal was accepted after a reinstall (now at version {})",
        again.version
    );
}

/// `new_revision` is documented as false only when the content equals a
/// revision already kept; after a removal nothing is kept.
#[test]
fn reinstalling_after_remove_is_a_new_revision() {
    let fx = Fixture::new();
    let host = host(&fx);
    let dir = version_dir(fx.path(), "alpha", 1);
    install_path(&host, &dir);
    host.remove(&change("alpha", None)).unwrap();
    let again = install_path(&host, &dir);
    assert_eq!(
        ids(&host, "alpha"),
        std::slice::from_ref(&again.revision_id)
    );
    assert!(again.new_revision, "{again:#?}");
}

#[test]
fn only_keep_revisions_are_kept_and_never_the_active_one_dropped() {
    let fx = Fixture::new();
    let host = host_with(&fx, |c| c.keep_revisions = 2);
    let mut all = Vec::new();
    for version in 1..=4 {
        let installed = install_path(&host, &version_dir(fx.path(), "alpha", version));
        let kept = ids(&host, "alpha");
        assert!(kept.len() <= 2, "{kept:?}");
        assert_eq!(kept.last(), Some(&installed.revision_id));
        all.push(installed.revision_id);
    }
    assert_eq!(ids(&host, "alpha"), all[2..]);
    for dropped in &all[..2] {
        assert_eq!(
            error(load_at(&host, "alpha", Some(dropped))).kind,
            ErrorKind::RevisionNotFound
        );
        assert_eq!(
            activate(&host, "alpha", dropped, None),
            Err(ErrorKind::RevisionNotFound)
        );
    }
    let catalog = assert_consistent(&fx.state_dir());
    let retired: Vec<&str> = catalog["retired"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(retired, [all[0].as_str(), all[1].as_str()]);
    // Rolled back to the older kept one, then upgraded: the oldest goes.
    activate(&host, "alpha", &all[2], None).unwrap();
    let v5 = install_path(&host, &version_dir(fx.path(), "alpha", 5));
    assert_eq!(ids(&host, "alpha"), [all[3].clone(), v5.revision_id]);

    // keep_revisions 0 still keeps the active revision.
    let fx = Fixture::new();
    let host = host_with(&fx, |c| c.keep_revisions = 0);
    install_path(&host, &version_dir(fx.path(), "alpha", 1));
    let last = install_path(&host, &version_dir(fx.path(), "alpha", 2));
    assert_eq!(ids(&host, "alpha"), [last.revision_id]);
    assert_eq!(host.load("alpha").unwrap().instructions, body("alpha", 2));
    assert_consistent(&fx.state_dir());
}

#[test]
fn a_stale_expected_version_is_a_conflict_for_every_change() {
    let fx = Fixture::new();
    let host = host(&fx);
    let dir = config_skill(&fx.path().join("src/cfg"));
    let first = install_path(&host, &dir);
    let by_path = |expected| InstallRequest {
        path: Some(dir.display().to_string()),
        expected_version: Some(expected),
        ..InstallRequest::default()
    };
    let config = |expected| ConfigSetRequest {
        name: "cfg".into(),
        key: "MODE".into(),
        value: Some(json!("b")),
        expected_version: Some(expected),
    };
    let attempts = |stale: u64| -> Vec<(&str, Result<u64, ErrorKind>)> {
        let kind = |e: skillhost::HostError| e.kind;
        vec![
            (
                "install",
                host.install(&by_path(stale), Origin::Operator)
                    .map(|i| i.version)
                    .map_err(kind),
            ),
            (
                "enable",
                host.set_enabled(&change("cfg", Some(stale)), true)
                    .map(|s| s.version)
                    .map_err(kind),
            ),
            (
                "disable",
                host.set_enabled(&change("cfg", Some(stale)), false)
                    .map(|s| s.version)
                    .map_err(kind),
            ),
            (
                "config_set",
                host.config_set(&config(stale))
                    .map(|s| s.version)
                    .map_err(kind),
            ),
            (
                "activate",
                activate(&host, "cfg", &first.revision_id, Some(stale)),
            ),
            (
                "remove",
                host.remove(&change("cfg", Some(stale)))
                    .map(|s| s.version)
                    .map_err(kind),
            ),
        ]
    };
    for stale in [0, 2, 99] {
        for (what, result) in attempts(stale) {
            assert_eq!(
                result,
                Err(ErrorKind::VersionConflict),
                "{what} with expected_version {stale}"
            );
        }
    }
    let stored = revisions(&host, "cfg");
    assert_eq!(
        (stored.version, stored.enabled, stored.config.len()),
        (1, true, 0),
        "{stored:#?}"
    );
    // With the current version each succeeds and bumps it.
    let kind = |e: skillhost::HostError| e.kind;
    assert_eq!(
        host.install(&by_path(1), Origin::Operator)
            .map(|i| i.version)
            .map_err(kind),
        Ok(2)
    );
    assert_eq!(
        host.set_enabled(&change("cfg", Some(2)), false)
            .map(|s| s.version)
            .map_err(kind),
        Ok(3)
    );
    assert_eq!(
        host.set_enabled(&change("cfg", Some(3)), true)
            .map(|s| s.version)
            .map_err(kind),
        Ok(4)
    );
    assert_eq!(
        host.config_set(&config(4)).map(|s| s.version).map_err(kind),
        Ok(5)
    );
    assert_eq!(activate(&host, "cfg", &first.revision_id, Some(5)), Ok(6));
    assert!(!host.remove(&change("cfg", Some(6))).unwrap().installed);
    // A new skill: 0 is its version, anything else conflicts.
    let other = version_dir(fx.path(), "other", 1);
    let request = |expected| InstallRequest {
        path: Some(other.display().to_string()),
        expected_version: Some(expected),
        ..InstallRequest::default()
    };
    assert_eq!(
        error(host.install(&request(1), Origin::Operator)).kind,
        ErrorKind::VersionConflict
    );
    assert_eq!(
        host.install(&request(0), Origin::Operator).unwrap().version,
        1
    );
    assert_eq!(
        error(host.install(&request(0), Origin::Operator)).kind,
        ErrorKind::VersionConflict
    );
}

// ------------------------------------------------------- enable / disable

#[test]
fn disabled_skills_are_hidden_and_refused_and_project_skills_still_win() {
    let fx = Fixture::new();
    let host = host(&fx);
    let solo = install_path(&host, &version_dir(fx.path(), "solo", 1));
    install_path(&host, &version_dir(fx.path(), "shared", 1));
    fx.skill(&fx.project_dir(), "shared", "The project one");
    let summary = |include: bool| {
        host.list(&ListRequest {
            include_disabled: Some(include),
        })
        .skills
        .into_iter()
        .map(|s| (s.name, s.source, s.enabled))
        .collect::<Vec<_>>()
    };
    let both = vec![
        ("shared".to_string(), SourceKind::Project, true),
        ("solo".to_string(), SourceKind::Managed, true),
    ];
    assert_eq!(summary(false), both);

    let disabled = host.set_enabled(&change("solo", Some(1)), false).unwrap();
    assert_eq!((disabled.enabled, disabled.version), (false, 2));
    assert_eq!(summary(false), both[..1]);
    let listed = host.list(&ListRequest {
        include_disabled: Some(true),
    });
    let hidden = listed
        .skills
        .iter()
        .find(|s| s.name == "solo")
        .expect("listed with include_disabled");
    assert_eq!(
        (hidden.enabled, hidden.revision_id.as_deref()),
        (false, Some(solo.revision_id.as_str()))
    );
    assert_eq!(error(host.load("solo")).kind, ErrorKind::SkillDisabled);
    assert_eq!(
        error(load_at(&host, "solo", Some(&solo.revision_id))).kind,
        ErrorKind::SkillDisabled
    );
    assert_eq!(
        read_at(&host, "solo", "SKILL.md", None),
        Err(ErrorKind::SkillDisabled)
    );
    let run = host.run(&request("solo", "any", json!({})), &RunContext::default());
    assert_eq!(error(run).kind, ErrorKind::SkillDisabled);

    // The managed `shared` is shadowed by the project one; disabling it changes nothing visible.
    host.set_enabled(&change("shared", None), false).unwrap();
    assert_eq!(summary(false), both[..1]);
    let shared = host.load("shared").unwrap();
    assert_eq!(
        (shared.source, shared.description.as_str()),
        (SourceKind::Project, "The project one")
    );
    let all = host.list(&ListRequest {
        include_disabled: Some(true),
    });
    let sources: Vec<_> = all
        .skills
        .iter()
        .filter(|s| s.name == "shared")
        .map(|s| (s.source, s.enabled))
        .collect();
    assert_eq!(
        sources,
        [(SourceKind::Project, true), (SourceKind::Managed, false)]
    );

    // Re-enabling restores both.
    host.set_enabled(&change("solo", Some(2)), true).unwrap();
    host.set_enabled(&change("shared", None), true).unwrap();
    assert_eq!(summary(false), both);
    assert_eq!(host.load("solo").unwrap().instructions, body("solo", 1));
    assert_eq!(read_at(&host, "solo", "version.txt", None).unwrap(), "1\n");
}

// -------------------------------------------------- readers during writes

/// While other processes install one version after another, every load
/// sees one whole revision: its instructions are one of the versions and
/// every file it lists is readable, with that version's content.
#[test]
fn readers_always_see_a_whole_revision_while_others_install() {
    let fx = Arc::new(Fixture::new());
    let host = host(&fx);
    let dirs: Vec<_> = (1..=4)
        .map(|v| version_dir(fx.path(), "alpha", v))
        .collect();
    install_path(&host, &dirs[0]);
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (fx, done) = (Arc::clone(&fx), Arc::clone(&done));
            std::thread::spawn(move || {
                let host = common::skills::host(&fx);
                let mut seen = std::collections::BTreeSet::new();
                let mut loads = 0;
                while !done.load(Ordering::Relaxed) || loads < 20 {
                    let skill = host.load("alpha").expect("load during installs");
                    let version: u32 = (1..=4)
                        .find(|v| skill.instructions == body("alpha", *v))
                        .unwrap_or_else(|| panic!("torn instructions: {:?}", skill.instructions));
                    let revision = skill.revision_id.clone().expect("a managed revision");
                    for file in &skill.files {
                        let content = read_at(&host, "alpha", &file.path, Some(&revision))
                            .unwrap_or_else(|e| panic!("{} of {revision}: {e:?}", file.path));
                        if file.path == "version.txt" {
                            assert_eq!(content, format!("{version}\n"));
                        }
                    }
                    assert!(
                        skill
                            .files
                            .iter()
                            .any(|f| f.path == format!("references/v{version}.md")),
                        "{:?}",
                        skill.files
                    );
                    seen.insert(version);
                    loads += 1;
                }
                (loads, seen)
            })
        })
        .collect();
    let started = Instant::now();
    let mut installs = 0;
    while started.elapsed() < Duration::from_secs(4) {
        let children: Vec<_> = (0..2)
            .map(|i| {
                fx.command(&["install", dirs[(installs + i) % 4].to_str().unwrap()])
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut child in children {
            assert!(child.wait().unwrap().success());
        }
        installs += 2;
    }
    done.store(true, Ordering::Relaxed);
    for reader in readers {
        let (loads, seen) = reader.join().expect("a reader failed");
        assert!(
            loads >= 20 && seen.len() >= 2,
            "loads {loads}, versions seen {seen:?}"
        );
    }
    assert_consistent(&fx.state_dir());
}
