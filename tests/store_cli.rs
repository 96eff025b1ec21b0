//! The managed store through the real binary: install/upgrade/rollback/
//! remove, `package` and `init`, enable/disable, `config set` and secrets,
//! and many processes writing at once (including ones killed mid-install).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::process::Output;
use std::time::Instant;

use common::Fixture;
use common::cli_json::assert_error;
use common::store::*;
use serde_json::{Value, json};

#[test]
fn install_upgrade_rollback_and_remove() {
    let fx = Fixture::new();
    let v1 = cli_ok(&fx, &["install", text(&version_dir(fx.path(), "alpha", 1))]);
    assert_eq!(
        (&v1["name"], &v1["version"], &v1["new_revision"]),
        (&json!("alpha"), &json!(1), &json!(true))
    );
    let r1 = v1["revision_id"].as_str().unwrap().to_string();
    let v2 = cli_ok(&fx, &["install", text(&version_dir(fx.path(), "alpha", 2))]);
    let r2 = v2["revision_id"].as_str().unwrap().to_string();
    assert_eq!(
        (&v2["version"], &v2["new_revision"]),
        (&json!(2), &json!(true))
    );
    let stored = cli_ok(&fx, &["revisions", "alpha"]);
    let kept: Vec<&Value> = stored["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(kept, [&json!(r1), &json!(r2)]);
    assert_eq!(
        (&stored["active_revision"], &stored["version"]),
        (&json!(r2), &json!(2))
    );
    let loaded = common::cli_json::load(&fx, "alpha");
    assert_eq!(
        (&loaded["instructions"], &loaded["revision_id"]),
        (&json!(body("alpha", 2)), &json!(r2))
    );
    assert_eq!(loaded["source"], "managed");

    // Rollback: stale or unknown refused, then one step to r1.
    let unknown = format!("sha256:{}", "0".repeat(64));
    assert_error(
        cli(&fx, &["rollback", "alpha", "--to", &unknown]),
        "REVISION_NOT_FOUND",
        1,
    );
    assert_error(
        cli(
            &fx,
            &["rollback", "alpha", "--to", &r1, "--expected-version", "1"],
        ),
        "VERSION_CONFLICT",
        1,
    );
    let back = cli_ok(
        &fx,
        &["rollback", "alpha", "--to", &r1, "--expected-version", "2"],
    );
    assert_eq!(
        (&back["active_revision"], &back["version"]),
        (&json!(r1), &json!(3))
    );
    assert_eq!(
        common::cli_json::load(&fx, "alpha")["instructions"],
        body("alpha", 1)
    );
    assert_eq!(
        String::from_utf8(fx.run(&["read", "alpha", "version.txt"]).stdout).unwrap(),
        "1\n"
    );
    let listed = common::cli_json::list(&fx, &[]);
    assert_eq!(
        common::cli_json::skill(&listed, "alpha")["revision_id"],
        r1.as_str()
    );

    let removed = cli_ok(&fx, &["remove", "alpha", "--expected-version", "3"]);
    assert_eq!(
        (&removed["installed"], &removed["active_revision"]),
        (&json!(false), &json!(null))
    );
    assert_error(fx.json(&["load", "alpha"]), "SKILL_NOT_FOUND", 1);
    assert_error(cli(&fx, &["revisions", "alpha"]), "SKILL_NOT_FOUND", 1);
    assert_error(cli(&fx, &["remove", "alpha"]), "SKILL_NOT_FOUND", 1);
    assert!(
        common::cli_json::names(&common::cli_json::list(&fx, &["--include-disabled"])).is_empty()
    );
    assert_consistent(&fx.state_dir());
}

#[test]
fn every_change_refuses_a_stale_expected_version() {
    let fx = Fixture::new();
    let dir = config_skill(&fx.path().join("src/cfg"));
    let r1 = cli_ok(&fx, &["install", text(&dir)])["revision_id"]
        .as_str()
        .unwrap()
        .to_string();
    let stale: [&[&str]; 6] = [
        &["install", text(&dir)],
        &["remove", "cfg"],
        &["enable", "cfg"],
        &["disable", "cfg"],
        &["config", "set", "cfg", "MODE", "b"],
        &["rollback", "cfg", "--to", &r1],
    ];
    for args in stale {
        let mut args = args.to_vec();
        args.extend(["--expected-version", "7"]);
        assert_error(cli(&fx, &args), "VERSION_CONFLICT", 1);
    }
    assert_eq!(entry(&fx.state_dir(), "cfg").unwrap()["version"], 1);
    cli_ok(
        &fx,
        &[
            "config",
            "set",
            "cfg",
            "MODE",
            "b",
            "--expected-version",
            "1",
        ],
    );
    assert_eq!(
        entry(&fx.state_dir(), "cfg").unwrap()["config"]["MODE"]["value"],
        "b"
    );
}

#[test]
fn package_round_trips_and_an_altered_package_is_refused() {
    let fx = Fixture::new();
    let dir = version_dir(fx.path(), "alpha", 1);
    fx.file(&dir, "assets/blob.bin", [0u8, 159, 146, 150, 255]);
    let out = fx.path().join("alpha.tar.gz");
    let made = plain(&["package", text(&dir), "-o", text(&out)], fx.path());
    assert!(made.status.success(), "{made:?}");
    assert!(
        String::from_utf8_lossy(&made.stdout).starts_with("wrote "),
        "{made:?}"
    );
    // The default name is NAME.tar.gz in the current directory; the bytes are reproducible.
    assert!(plain(&["package", text(&dir)], fx.path()).status.success());
    let package = fs::read(&out).unwrap();
    assert_eq!(
        fs::read(fx.path().join("alpha-v1.tar.gz")).unwrap(),
        package
    );
    let members = untar(&package);
    let manifest = String::from_utf8(members["alpha-v1/MANIFEST.sha256"].clone()).unwrap();
    assert_eq!(manifest.lines().count(), tree(&dir).len(), "{manifest}");

    let installed = cli_ok(&fx, &["install", text(&out)]);
    let id = installed["revision_id"].as_str().unwrap();
    let files = assert_revision_whole(&fx.state_dir(), "alpha", id);
    assert_eq!(files, tree(&dir));
    // The directory installs as the same revision.
    let other = Fixture::new();
    assert_eq!(cli_ok(&other, &["install", text(&dir)])["revision_id"], id);

    // version.txt changed after packaging, MANIFEST.sha256 kept.
    let altered: Vec<Member> = members
        .iter()
        .map(|(path, bytes)| {
            let bytes = if path.ends_with("version.txt") {
                b"1 \n".to_vec()
            } else {
                bytes.clone()
            };
            Member::File(path.clone(), bytes)
        })
        .collect();
    let bad = fx.path().join("altered.tar.gz");
    fs::write(&bad, targz(&altered)).unwrap();
    let fresh = Fixture::new();
    let (code, body) = cli(&fresh, &["install", text(&bad)]);
    assert_error((code, body.clone()), "INVALID_INPUT", 1);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("version.txt"),
        "{body:#}"
    );
    assert!(installed_names(&fresh).is_empty());
}

fn installed_names(fx: &Fixture) -> Vec<String> {
    installed(&fx.state_dir())
}

#[test]
fn disabled_skills_are_hidden_and_refused_until_enabled() {
    let fx = Fixture::new();
    cli_ok(&fx, &["install", text(&version_dir(fx.path(), "alpha", 1))]);
    let off = cli_ok(&fx, &["disable", "alpha"]);
    assert_eq!(
        (&off["enabled"], &off["version"]),
        (&json!(false), &json!(2))
    );
    assert!(common::cli_json::names(&common::cli_json::list(&fx, &[])).is_empty());
    let all = common::cli_json::list(&fx, &["--include-disabled"]);
    assert_eq!(common::cli_json::skill(&all, "alpha")["enabled"], false);
    assert_error(fx.json(&["load", "alpha"]), "SKILL_DISABLED", 1);
    assert_error(
        fx.json(&["read", "alpha", "version.txt"]),
        "SKILL_DISABLED",
        1,
    );
    assert_error(cli(&fx, &["run", "alpha", "x"]), "SKILL_DISABLED", 1);
    let on = cli_ok(&fx, &["enable", "alpha", "--expected-version", "2"]);
    assert_eq!((&on["enabled"], &on["version"]), (&json!(true), &json!(3)));
    assert_eq!(
        common::cli_json::load(&fx, "alpha")["instructions"],
        body("alpha", 1)
    );
}

#[test]
fn config_set_checks_values_and_no_output_shows_the_secret() {
    let fx = Fixture::new();
    cli_ok(
        &fx,
        &["install", text(&config_skill(&fx.path().join("src/cfg")))],
    );
    let scripts =
        common::bwrap_available("config_set_checks_values_and_no_output_shows_the_secret");
    let _sandbox = common::scripts::shared();
    if scripts {
        let (code, body) = cli(&fx, &["run", "cfg", "show"]);
        assert_error((code, body.clone()), "INVALID_INPUT", 1);
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("API_KEY"),
            "{body:#}"
        );
    }
    for args in [
        ["cfg", "LIMIT", "abc"],
        ["cfg", "MODE", "c"],
        ["cfg", "NOPE", "1"],
        ["cfg", "API_KEY", "{\"a\": 1}"],
    ] {
        let mut all = vec!["config", "set"];
        all.extend(args);
        assert_error(cli(&fx, &all), "INVALID_INPUT", 1);
    }
    assert_error(
        cli(&fx, &["config", "set", "cfg", "MODE"]),
        "INVALID_INPUT",
        1,
    );
    assert_error(
        cli(&fx, &["config", "set", "nope", "MODE", "a"]),
        "SKILL_NOT_FOUND",
        1,
    );

    let mut outputs: Vec<Output> = Vec::new();
    let set = fx.run(&[
        "config",
        "set",
        "cfg",
        "API_KEY",
        SECRET,
        "--log-level",
        "trace",
    ]);
    let (code, stored) = parse(&["config", "set"], &set);
    assert_eq!(
        (code, &stored["config"]["API_KEY"]),
        (0, &json!("***")),
        "{stored:#}"
    );
    outputs.push(set);
    cli_ok(&fx, &["config", "set", "cfg", "LIMIT", "12.5"]);
    cli_ok(&fx, &["config", "set", "cfg", "MODE", "b"]);
    let unset = cli_ok(&fx, &["config", "set", "cfg", "MODE", "--unset"]);
    assert_eq!(unset["config"], json!({"API_KEY": "***", "LIMIT": 12.5}));
    for args in [
        &["revisions", "cfg"][..],
        &["list", "--json", "--include-disabled"],
        &["load", "cfg", "--json"],
        &["load", "cfg"],
        &["list"],
    ] {
        let out = fx.run(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        outputs.push(out);
    }
    let revisions = parse(&["revisions"], &outputs[1]).1;
    assert_eq!(revisions["config"]["API_KEY"], "***");
    if scripts {
        let out = fx.run(&["run", "cfg", "show", "--log-level", "trace"]);
        let (code, envelope) = parse(&["run"], &out);
        assert_eq!(code, 0, "{envelope:#}");
        let data = &envelope["data"]["output_data"];
        assert_eq!(
            (&data["len"], &data["echo"], &data["mode"], &data["limit"]),
            (
                &json!(SECRET.len()),
                &json!("***"),
                &json!("a"),
                &json!("12.5")
            )
        );
        assert!(
            envelope["data"]["stderr"]
                .as_str()
                .unwrap()
                .contains("stderr has ***"),
            "{envelope:#}"
        );
        outputs.push(out);
    }
    for out in &outputs {
        let shown = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!shown.contains(SECRET), "the secret was printed:\n{shown}");
    }
}

#[test]
fn init_makes_a_skill_that_validates_installs_and_runs() {
    let fx = Fixture::new();
    let dir = fx.path().join("demo");
    let made = plain(&["init", "demo", "--dir", text(&dir)], fx.path());
    assert!(made.status.success(), "{made:?}");
    assert!(
        !plain(&["init", "demo", "--dir", text(&dir)], fx.path())
            .status
            .success(),
        "an existing directory is refused"
    );
    assert!(!plain(&["init", "Bad_Name"], fx.path()).status.success());
    assert!(!fx.path().join("Bad_Name").exists());
    let scripts = common::bwrap_available("init_makes_a_skill_that_validates_installs_and_runs");
    // validate also checks that this host can run the script (python, sandbox).
    let validated = fx.run(&["validate", text(&dir)]);
    assert_eq!(validated.status.success(), scripts, "{validated:?}");
    let installed = cli_ok(&fx, &["install", text(&dir)]);
    assert_eq!(
        (&installed["name"], &installed["version"]),
        (&json!("demo"), &json!(1))
    );
    let loaded = common::cli_json::load(&fx, "demo");
    assert_eq!(loaded["components"][0]["name"], "hello");
    if !scripts {
        return;
    }
    let _sandbox = common::scripts::shared();
    let (code, envelope) = cli(
        &fx,
        &["run", "demo", "hello", "--input", r#"{"name": "Ada"}"#],
    );
    assert_eq!(code, 0, "{envelope:#}");
    assert_eq!(
        envelope["data"]["output_data"],
        json!({"message": "Hello, Ada!"})
    );
    assert_eq!(envelope["data"]["revision_id"], installed["revision_id"]);
    assert_error(
        cli(&fx, &["run", "demo", "hello", "--input", "{}"]),
        "INVALID_INPUT",
        1,
    );
}

// ------------------------------------------------------------ concurrency

#[test]
fn eight_concurrent_writers_keep_the_store_consistent() {
    let fx = Fixture::new();
    let version = |name: &str, v: u32| text(&version_dir(fx.path(), name, v)).to_string();
    let mut alpha_installs = 0;
    let mut alpha_ids = BTreeMap::new();
    for round in 0..4u32 {
        let mut commands = Vec::new();
        for i in 0..3 {
            commands.push(strings(&[
                "install",
                &version("alpha", (round + i) % 4 + 1),
            ]));
        }
        commands.push(strings(&["install", &version("beta", round % 2 + 1)]));
        commands.push(strings(&["install", &version("beta", round % 2 + 2)]));
        commands.push(strings(&["install", &version("gamma", 1)]));
        commands.push(strings(&["remove", "gamma"]));
        commands.push(strings(&["remove", "beta"]));
        for (args, code, value) in finish(spawn_all(&fx, &commands)) {
            match (args[0].as_str(), code) {
                ("install", 0) => {
                    if value["name"] == "alpha" {
                        alpha_installs += 1;
                        alpha_ids.insert(
                            args[1].clone(),
                            value["revision_id"].as_str().unwrap().to_string(),
                        );
                    }
                }
                ("remove", 0) => assert_eq!(value["installed"], false),
                ("remove", 1) => assert_eq!(value["error"]["kind"], "SKILL_NOT_FOUND", "{value:#}"),
                _ => panic!("{args:?} exited {code}: {value:#}"),
            }
        }
        assert_consistent(&fx.state_dir());
    }
    // No install was lost: alpha's version counts every one, and every
    // revision an install reported is kept.
    let alpha = entry(&fx.state_dir(), "alpha").unwrap();
    assert_eq!(alpha["version"], alpha_installs, "{alpha:#}");
    let kept: BTreeSet<&str> = alpha["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        kept,
        alpha_ids
            .values()
            .map(String::as_str)
            .collect::<BTreeSet<_>>()
    );
    // Whatever is installed is served, at its active revision.
    for name in installed_names(&fx) {
        let loaded = common::cli_json::load(&fx, &name);
        let active = entry(&fx.state_dir(), &name).unwrap()["active"].clone();
        assert_eq!(loaded["revision_id"], active);
        let v: u32 = (1..=4)
            .find(|v| loaded["instructions"] == body(&name, *v))
            .expect("a known body");
        assert!(
            loaded["files"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["path"] == format!("references/v{v}.md"))
        );
    }
}

#[test]
fn with_expected_version_exactly_one_concurrent_writer_wins() {
    let fx = Fixture::new();
    let dirs: Vec<String> = (1..=4)
        .map(|v| text(&version_dir(fx.path(), "alpha", v)).to_string())
        .collect();
    cli_ok(&fx, &["install", &dirs[0]]);
    for round in 0..5 {
        let version = entry(&fx.state_dir(), "alpha").unwrap()["version"]
            .as_u64()
            .unwrap();
        let expected = version.to_string();
        let mut commands: Vec<Vec<String>> = dirs[1..]
            .iter()
            .map(|d| strings(&["install", d, "--expected-version", &expected]))
            .collect();
        for op in ["disable", "enable", "remove"] {
            commands.push(strings(&[op, "alpha", "--expected-version", &expected]));
        }
        commands.push(strings(&[
            "install",
            &dirs[0],
            "--expected-version",
            &expected,
        ]));
        let results = finish(spawn_all(&fx, &commands));
        let winners: Vec<_> = results.iter().filter(|(_, code, _)| *code == 0).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:#?}");
        // Losers conflict; once `remove` won, the other changes find no skill.
        let removed = winners[0].0[0] == "remove";
        for (args, code, value) in &results {
            if *code != 0 {
                let kind = value["error"]["kind"].as_str().unwrap();
                let allowed = kind == "VERSION_CONFLICT"
                    || (removed && args[0] != "install" && kind == "SKILL_NOT_FOUND");
                assert!(
                    *code == 1 && allowed,
                    "{args:?} after {winners:?}: {value:#}"
                );
            }
        }
        assert_consistent(&fx.state_dir());
        match entry(&fx.state_dir(), "alpha") {
            Some(alpha) => assert_eq!(alpha["version"], version + 1, "{winners:?}"),
            None => {
                assert_eq!(winners[0].0[0], "remove");
                cli_ok(&fx, &["install", &dirs[0]]);
            }
        }
    }
}

#[test]
fn writers_killed_mid_install_leave_a_usable_store() {
    let fx = Fixture::new();
    let big = big_skill(fx.path(), 3000);
    let small: Vec<String> = (1..=4)
        .map(|v| text(&version_dir(fx.path(), "alpha", v)).to_string())
        .collect();
    cli_ok(&fx, &["install", &small[0]]);
    // How long a whole install takes here; the kills land across it.
    let started = Instant::now();
    cli_ok(&fx, &["install", text(&big)]);
    let whole = started.elapsed();
    let mut completed = 0;
    for (i, percent) in [2u32, 10, 25, 40, 60, 75, 90, 100, 110]
        .into_iter()
        .enumerate()
    {
        // New content each time, so each install makes a new revision.
        fs::write(big.join("data/iteration.txt"), format!("{i}\n")).unwrap();
        let mut victim = spawn(&fx, &["install", text(&big)]);
        let bystander = spawn(&fx, &["install", &small[(i + 1) % 4]]);
        std::thread::sleep(whole * percent / 100);
        let _ = victim.kill(); // SIGKILL
        let status = victim.wait().unwrap();
        completed += usize::from(status.success());
        let out = bystander.wait_with_output().unwrap();
        assert!(out.status.success(), "after a kill at {percent}%: {out:?}");
        let catalog = assert_consistent(&fx.state_dir());
        let big_entry = &catalog["skills"]["big"];
        assert!(
            big_entry["revisions"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["files"] == 3001 || r["files"] == 3002)
        );
        let listed = common::cli_json::list(&fx, &[]);
        assert!(common::cli_json::names(&listed).contains(&"big".to_string()));
        assert_eq!(
            common::cli_json::load(&fx, "alpha")["instructions"],
            body("alpha", (i as u32 + 1) % 4 + 1)
        );
        assert_eq!(
            common::cli_json::load(&fx, "big")["instructions"],
            body("big", 1)
        );
    }
    eprintln!(
        "a whole install took {whole:?}; {completed} of 9 killed installs completed; {} staging directories left",
        staging_leftovers(&fx.state_dir()).len()
    );
    fs::write(big.join("data/iteration.txt"), "final\n").unwrap();
    let installed = cli_ok(&fx, &["install", text(&big)]);
    assert_eq!(
        (&installed["name"], &installed["new_revision"]),
        (&json!("big"), &json!(true))
    );
    let (code, loaded) = fx.json(&["load", "big", "--max-files-listed", "5000"]);
    assert_eq!(
        (code, loaded["files"].as_array().unwrap().len()),
        (0, 3001),
        "every related file listed"
    );
    assert_eq!(loaded["revision_id"], installed["revision_id"]);
    let last = fx.run(&["read", "big", "data/f2999.txt"]);
    assert_eq!(
        String::from_utf8_lossy(&last.stdout),
        "file 2999\n".repeat(20)
    );
    assert_eq!(
        String::from_utf8_lossy(&fx.run(&["read", "big", "data/iteration.txt"]).stdout),
        "final\n"
    );
    assert_consistent(&fx.state_dir());
    cli_ok(&fx, &["remove", "big"]);
    cli_ok(&fx, &["install", &small[0]]);
    assert_consistent(&fx.state_dir());
}
