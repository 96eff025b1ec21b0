//! Skill config through the library `Host`: declared keys and types,
//! required values, values reaching scripts, and secrets that no output shows.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use common::Fixture;
use common::skills::{host, request};
use common::store::*;
use serde_json::{Value, json};
use skillhost::api::{ConfigSetRequest, ListRequest};
use skillhost::exec::{RunContext, Status};
use skillhost::{ErrorKind, Host};

fn set(
    host: &Host,
    key: &str,
    value: Value,
) -> Result<skillhost::api::StoredSkill, skillhost::HostError> {
    host.config_set(&ConfigSetRequest {
        name: "cfg".into(),
        key: key.into(),
        value: Some(value),
        expected_version: None,
    })
}

#[test]
fn config_values_reach_scripts_and_secrets_are_never_shown() {
    if !common::bwrap_available("config_values_reach_scripts_and_secrets_are_never_shown") {
        return;
    }
    let _sandbox = common::scripts::shared();
    let fx = Fixture::new();
    let host = host(&fx);
    install_path(&host, &config_skill(&fx.path().join("src/cfg")));
    let run = || host.run(&request("cfg", "show", json!({})), &RunContext::default());
    let missing = error(run());
    assert_eq!(missing.kind, ErrorKind::InvalidInput);
    assert!(missing.message.contains("API_KEY"), "{missing}");

    for (key, value) in [
        ("LIMIT", json!("abc")),
        ("LIMIT", json!(true)),
        ("MODE", json!("c")),
        ("MODE", json!(1)),
        ("UNDECLARED", json!("x")),
    ] {
        let refused = error(set(&host, key, value.clone()));
        assert_eq!(
            refused.kind,
            ErrorKind::InvalidInput,
            "{key}={value}: {refused}"
        );
    }
    assert_eq!(
        revisions(&host, "cfg").version,
        1,
        "refused values change nothing"
    );

    let stored = set(&host, "API_KEY", json!(SECRET)).unwrap();
    assert_eq!(stored.config["API_KEY"], "***");
    set(&host, "LIMIT", json!(5)).unwrap();
    let stored = set(&host, "MODE", json!("b")).unwrap();
    assert_eq!(
        Value::Object(stored.config.clone()),
        json!({"API_KEY": "***", "LIMIT": 5, "MODE": "b"})
    );
    assert!(!serde_json::to_string(&stored).unwrap().contains(SECRET));

    let env = run().unwrap();
    let text = serde_json::to_string(&env).unwrap();
    assert!(
        !text.contains(SECRET),
        "the envelope shows the secret: {text}"
    );
    let out = env
        .data
        .output_data
        .clone()
        .unwrap_or_else(|| panic!("{env:#?}"));
    assert_eq!(env.data.status, Status::Succeeded, "{env:#?}");
    assert_eq!(out["len"], SECRET.len(), "the script saw another value");
    assert_eq!(
        out["sha"],
        sha256(SECRET.as_bytes()).trim_start_matches("sha256:")
    );
    assert_eq!(
        (&out["echo"], &out["nested"]["list"][0]),
        (&json!("***"), &json!("***"))
    );
    assert_eq!((&out["mode"], &out["limit"]), (&json!("b"), &json!("5")));
    assert!(
        env.data.stdout.contains("***") && env.data.stderr.contains("stderr has ***"),
        "{env:#?}"
    );

    // Unset MODE: its default again. Unset API_KEY: required again.
    host.config_set(&ConfigSetRequest {
        name: "cfg".into(),
        key: "MODE".into(),
        value: None,
        expected_version: None,
    })
    .unwrap();
    assert_eq!(run().unwrap().data.output_data.unwrap()["mode"], "a");
    let shown = serde_json::to_string(&revisions(&host, "cfg")).unwrap();
    assert!(
        shown.contains("\"API_KEY\":\"***\"") && !shown.contains(SECRET),
        "{shown}"
    );
    for shown in [
        serde_json::to_string(&host.list(&ListRequest {
            include_disabled: Some(true),
        }))
        .unwrap(),
        serde_json::to_string(&host.load("cfg").unwrap()).unwrap(),
    ] {
        assert!(!shown.contains(SECRET), "{shown}");
    }
    let catalog = store_dir(&fx.state_dir()).join("catalog.json");
    assert_eq!(
        fs::metadata(&catalog).unwrap().permissions().mode() & 0o777,
        0o600,
        "the catalog holds secrets"
    );
    host.config_set(&ConfigSetRequest {
        name: "cfg".into(),
        key: "API_KEY".into(),
        value: Some(Value::Null),
        expected_version: None,
    })
    .unwrap();
    assert_eq!(error(run()).kind, ErrorKind::InvalidInput);
}

/// The refusal names the key as declared (`LIMIT`), not lowercased.
#[test]
fn a_refused_config_value_names_its_key_exactly() {
    let fx = Fixture::new();
    let host = host(&fx);
    install_path(&host, &config_skill(&fx.path().join("src/cfg")));
    let refused = error(set(&host, "LIMIT", json!("abc")));
    assert!(refused.message.contains("`LIMIT`"), "{refused}");
}

/// Once set as a secret, a value stays masked even when the active revision
/// no longer declares it (an upgrade, or a rollback to an older revision).
#[test]
fn a_secret_stays_masked_after_an_upgrade_that_drops_its_declaration() {
    let fx = Fixture::new();
    let host = host(&fx);
    let dir = config_skill(&fx.path().join("src/cfg"));
    install_path(&host, &dir);
    set(&host, "API_KEY", json!(SECRET)).unwrap();
    fs::write(
        dir.join("skill.yaml"),
        "components:\n  - {name: show, type: script, path: scripts/show.py}\n",
    )
    .unwrap();
    install_path(&host, &dir);
    let shown = serde_json::to_string(&revisions(&host, "cfg")).unwrap();
    assert!(
        !shown.contains(SECRET),
        "skill_revisions shows the secret: {shown}"
    );
}
