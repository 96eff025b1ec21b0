//! The management tools over MCP (`serve --allow-write`), driven by rmcp's
//! client against the real binary: the fixed tool sets, installs limited to
//! the workspace, and the install/disable/pin/rollback/remove cycle.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::process::Stdio;

use base64::Engine as _;
use common::Fixture;
use common::mcp::{READ_TOOLS, WRITE_TOOLS};
use common::store::*;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

async fn connect(fx: &Fixture, allow_write: bool) -> Client {
    let args: &[&str] = if allow_write {
        &["serve", "--allow-write"]
    } else {
        &["serve"]
    };
    let cmd = tokio::process::Command::from(fx.command(args));
    let transport = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn skillhost serve")
        .0;
    ().serve(transport).await.expect("MCP initialize")
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("args must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool} failed at the protocol level: {e}"))
}

async fn tools(client: &Client) -> Vec<Tool> {
    client.list_all_tools().await.expect("tools/list")
}

fn names(tools: &[Tool]) -> BTreeSet<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

/// A successful call's structured content, valid against the tool's output
/// schema and equal to its text block.
async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let result = call(client, tool, args.clone()).await;
    assert_ne!(result.is_error, Some(true), "{tool} {args}: {result:?}");
    let structured = result
        .structured_content
        .clone()
        .expect("structuredContent");
    let listed = tools(client).await;
    let spec = listed.iter().find(|t| t.name == tool).unwrap();
    let schema = Value::Object((*spec.output_schema.clone().expect("outputSchema")).clone());
    let validator = jsonschema::validator_for(&schema).expect("output schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&structured)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{tool} output violates its schema: {errors:?}"
    );
    let text = &result.content[0].as_text().expect("a text block").text;
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), structured);
    structured
}

/// The error kind of a call that must fail as a tool error.
async fn fails(client: &Client, tool: &str, args: Value) -> String {
    let result = call(client, tool, args.clone()).await;
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} {args}: expected a tool error: {result:?}"
    );
    assert!(result.structured_content.is_none());
    let text = &result.content[0].as_text().expect("a text block").text;
    let body: Value = serde_json::from_str(text).expect("the error text is JSON");
    assert!(
        !body["error"]["message"].as_str().unwrap_or("").is_empty(),
        "{body}"
    );
    body["error"]["kind"]
        .as_str()
        .expect("error.kind")
        .to_string()
}

fn listed(list: &Value) -> Vec<(String, bool)> {
    list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["enabled"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_tool_sets_are_fixed() {
    let fx = Fixture::new();
    version_dir(&fx.workspace(), "alpha", 1);
    let reader = connect(&fx, false).await;
    let expected: BTreeSet<String> = READ_TOOLS.iter().map(|t| t.to_string()).collect();
    assert_eq!(names(&tools(&reader).await), expected);
    let path = fx.workspace().join("src/alpha-v1").display().to_string();
    let refused = reader
        .call_tool(
            CallToolRequestParams::new("skill_install")
                .with_arguments(json!({"path": path}).as_object().unwrap().clone()),
        )
        .await;
    assert!(refused.is_err() || refused.unwrap().is_error == Some(true));
    assert!(
        installed(&fx.state_dir()).is_empty(),
        "a read-only server installed something"
    );
    reader.cancel().await.unwrap();

    let writer = connect(&fx, true).await;
    let all: BTreeSet<String> = READ_TOOLS
        .iter()
        .chain(&WRITE_TOOLS)
        .map(|t| t.to_string())
        .collect();
    let before = tools(&writer).await;
    assert_eq!(names(&before), all);
    assert_eq!(all.len(), 11);
    for tool in &before {
        let input = serde_json::to_value(&*tool.input_schema).unwrap();
        assert_eq!(input["type"], "object", "{}", tool.name);
        assert!(
            tool.output_schema.is_some(),
            "{} has an output schema",
            tool.name
        );
        assert!(
            !format!("{input} {:?}", tool.output_schema).contains("uint"),
            "{}",
            tool.name
        );
    }
    ok(&writer, "skill_install", json!({"path": path})).await;
    ok(&writer, "skill_disable", json!({"name": "alpha"})).await;
    let after = tools(&writer).await;
    assert_eq!(
        serde_json::to_value(&after).unwrap(),
        serde_json::to_value(&before).unwrap(),
        "the tools changed after installs"
    );
    writer.cancel().await.unwrap();
}

#[tokio::test]
async fn clients_install_from_paths_inside_the_workspace_only() {
    let fx = Fixture::new();
    let client = connect(&fx, true).await;
    let outside = version_dir(fx.path(), "alpha", 1);
    let package = fx.path().join("alpha.tar.gz");
    fs::write(
        &package,
        skillhost::store::stage::package(&outside, Default::default()).unwrap(),
    )
    .unwrap();
    let link = fx.workspace().join("linked");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let sneaky = fx.workspace().join("../src/alpha-v1");
    for path in [
        &outside,
        &package,
        &link,
        &sneaky,
        &fx.path().join("missing"),
    ] {
        let kind = fails(&client, "skill_install", json!({"path": path})).await;
        assert_eq!(kind, "ACCESS_DENIED", "{}", path.display());
    }
    assert!(installed(&fx.state_dir()).is_empty());

    let inside = version_dir(&fx.workspace(), "alpha", 1);
    let first = ok(&client, "skill_install", json!({"path": inside})).await;
    assert_eq!(
        (&first["name"], &first["version"], &first["new_revision"]),
        (&json!("alpha"), &json!(1), &json!(true))
    );
    // A package inside the workspace, and an inline one.
    let in_ws = fx.workspace().join("alpha-v2.tar.gz");
    let v2 = version_dir(fx.path(), "alpha", 2);
    let bytes = skillhost::store::stage::package(&v2, Default::default()).unwrap();
    fs::write(&in_ws, &bytes).unwrap();
    let second = ok(&client, "skill_install", json!({"path": in_ws})).await;
    assert_eq!(
        (&second["version"], &second["new_revision"]),
        (&json!(2), &json!(true))
    );
    let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let again = ok(
        &client,
        "skill_install",
        json!({"package_base64": b64, "expected_version": 2}),
    )
    .await;
    assert_eq!(
        (&again["revision_id"], &again["new_revision"]),
        (&second["revision_id"], &json!(false))
    );
    let list = ok(&client, "skill_list", json!({})).await;
    assert_eq!(listed(&list), [("alpha".to_string(), true)]);
    assert_eq!(list["skills"][0]["revision_id"], second["revision_id"]);
    client.cancel().await.unwrap();
}

fn echo_parts(version: u32) -> Value {
    let echo = fs::read(common::guests::guest("echo")).unwrap();
    json!({
        "skill_md": skill_md("parts", version),
        "files": [
            {"path": "skill.yaml", "content": common::skills::ECHO},
            {"path": "components/echo.wasm", "content": base64::engine::general_purpose::STANDARD.encode(echo), "encoding": "base64"},
        ],
    })
}

#[tokio::test]
async fn install_disable_pin_rollback_and_remove_over_mcp() {
    let fx = Fixture::new();
    let client = connect(&fx, true).await;
    let v1 = ok(&client, "skill_install", echo_parts(1)).await;
    let r1 = v1["revision_id"].as_str().unwrap().to_string();
    let run = json!({"name": "parts", "component": "echo", "input": {"n": 1}});
    let envelope = ok(&client, "skill_run", run.clone()).await;
    assert_eq!(
        (
            &envelope["data"]["output_data"],
            &envelope["data"]["revision_id"]
        ),
        (&json!({"n": 1}), &json!(r1))
    );

    // Disabled: hidden, and refused by load, read and run.
    assert_eq!(
        fails(
            &client,
            "skill_disable",
            json!({"name": "parts", "expected_version": 7})
        )
        .await,
        "VERSION_CONFLICT"
    );
    let off = ok(
        &client,
        "skill_disable",
        json!({"name": "parts", "expected_version": 1}),
    )
    .await;
    assert_eq!(
        (&off["enabled"], &off["version"]),
        (&json!(false), &json!(2))
    );
    assert!(listed(&ok(&client, "skill_list", json!({})).await).is_empty());
    let all = ok(&client, "skill_list", json!({"include_disabled": true})).await;
    assert_eq!(listed(&all), [("parts".to_string(), false)]);
    for (tool, args) in [
        ("skill_load", json!({"name": "parts"})),
        ("skill_load", json!({"name": "parts", "revision": r1})),
        ("skill_read", json!({"name": "parts", "path": "skill.yaml"})),
        ("skill_run", run.clone()),
    ] {
        assert_eq!(fails(&client, tool, args).await, "SKILL_DISABLED", "{tool}");
    }
    ok(&client, "skill_enable", json!({"name": "parts"})).await;

    // Upgrade; pin the old revision; roll back.
    let mut upgrade = echo_parts(2);
    upgrade["expected_version"] = json!(2);
    assert_eq!(
        fails(&client, "skill_install", upgrade.clone()).await,
        "VERSION_CONFLICT"
    );
    upgrade["expected_version"] = json!(3);
    let v2 = ok(&client, "skill_install", upgrade).await;
    let r2 = v2["revision_id"].as_str().unwrap().to_string();
    assert_eq!(v2["version"], 4);
    let loaded = ok(&client, "skill_load", json!({"name": "parts"})).await;
    assert_eq!(
        (&loaded["instructions"], &loaded["revision_id"]),
        (&json!(body("parts", 2)), &json!(r2))
    );
    let old = ok(
        &client,
        "skill_load",
        json!({"name": "parts", "revision": r1}),
    )
    .await;
    assert_eq!(
        (&old["instructions"], &old["revision_id"]),
        (&json!(body("parts", 1)), &json!(r1))
    );
    let read = ok(
        &client,
        "skill_read",
        json!({"name": "parts", "path": "SKILL.md", "revision": r1}),
    )
    .await;
    assert_eq!(read["content"], skill_md("parts", 1));
    let mut pinned = run.clone();
    pinned["revision"] = json!(r1);
    assert_eq!(
        ok(&client, "skill_run", pinned).await["data"]["revision_id"],
        r1.as_str()
    );
    let unknown = format!("sha256:{}", "a".repeat(64));
    assert_eq!(
        fails(
            &client,
            "skill_load",
            json!({"name": "parts", "revision": unknown})
        )
        .await,
        "REVISION_NOT_FOUND"
    );
    assert_eq!(
        fails(
            &client,
            "skill_activate",
            json!({"name": "parts", "revision": unknown})
        )
        .await,
        "REVISION_NOT_FOUND"
    );
    let stored = ok(&client, "skill_revisions", json!({"name": "parts"})).await;
    let ids: Vec<&Value> = stored["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(ids, [&json!(r1), &json!(r2)]);
    let back = ok(
        &client,
        "skill_activate",
        json!({"name": "parts", "revision": r1, "expected_version": 4}),
    )
    .await;
    assert_eq!(
        (&back["active_revision"], &back["version"]),
        (&json!(r1), &json!(5))
    );
    assert_eq!(
        ok(&client, "skill_run", run.clone()).await["data"]["revision_id"],
        r1.as_str()
    );
    assert_eq!(
        fails(
            &client,
            "skill_config_set",
            json!({"name": "parts", "key": "X", "value": "y"})
        )
        .await,
        "INVALID_INPUT"
    );

    // Removed: gone for every tool.
    let removed = ok(
        &client,
        "skill_remove",
        json!({"name": "parts", "expected_version": 5}),
    )
    .await;
    assert_eq!(removed["installed"], false);
    assert_eq!(
        fails(&client, "skill_load", json!({"name": "parts"})).await,
        "SKILL_NOT_FOUND"
    );
    assert_eq!(fails(&client, "skill_run", run).await, "SKILL_NOT_FOUND");
    assert_eq!(
        fails(&client, "skill_revisions", json!({"name": "parts"})).await,
        "SKILL_NOT_FOUND"
    );
    assert!(listed(&ok(&client, "skill_list", json!({"include_disabled": true})).await).is_empty());
    assert_consistent(&fx.state_dir());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn secrets_set_over_mcp_are_masked() {
    let fx = Fixture::new();
    config_skill(&fx.workspace().join("cfg"));
    let client = connect(&fx, true).await;
    ok(
        &client,
        "skill_install",
        json!({"path": fx.workspace().join("cfg")}),
    )
    .await;
    for (key, value) in [
        ("LIMIT", json!("x")),
        ("MODE", json!("z")),
        ("OTHER", json!("1")),
    ] {
        assert_eq!(
            fails(
                &client,
                "skill_config_set",
                json!({"name": "cfg", "key": key, "value": value})
            )
            .await,
            "INVALID_INPUT"
        );
    }
    let set = ok(
        &client,
        "skill_config_set",
        json!({"name": "cfg", "key": "API_KEY", "value": SECRET}),
    )
    .await;
    assert_eq!(set["config"], json!({"API_KEY": "***"}));
    let shown = [
        ok(&client, "skill_revisions", json!({"name": "cfg"})).await,
        ok(&client, "skill_list", json!({"include_disabled": true})).await,
        ok(&client, "skill_load", json!({"name": "cfg"})).await,
    ];
    for value in shown {
        assert!(!value.to_string().contains(SECRET), "{value:#}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn changes_made_by_other_processes_show_at_the_next_call() {
    let fx = Fixture::new();
    let client = connect(&fx, false).await;
    // Two scans first, so the server's registry is watching.
    for _ in 0..2 {
        assert!(listed(&ok(&client, "skill_list", json!({})).await).is_empty());
    }
    let cli = |args: &[&str]| {
        let out = fx.run(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    let v1 = version_dir(fx.path(), "alpha", 1);
    cli(&["install", v1.to_str().unwrap()]);
    assert_eq!(
        listed(&ok(&client, "skill_list", json!({})).await),
        [("alpha".to_string(), true)]
    );
    let v2 = version_dir(fx.path(), "alpha", 2);
    cli(&["install", v2.to_str().unwrap()]);
    let loaded = ok(&client, "skill_load", json!({"name": "alpha"})).await;
    assert_eq!(loaded["instructions"], body("alpha", 2));
    cli(&["disable", "alpha"]);
    assert_eq!(
        fails(&client, "skill_load", json!({"name": "alpha"})).await,
        "SKILL_DISABLED"
    );
    cli(&["enable", "alpha"]);
    let r1 = entry(&fx.state_dir(), "alpha").unwrap()["revisions"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    cli(&["rollback", "alpha", "--to", &r1]);
    let loaded = ok(&client, "skill_load", json!({"name": "alpha"})).await;
    assert_eq!(
        (&loaded["instructions"], &loaded["revision_id"]),
        (&json!(body("alpha", 1)), &json!(r1))
    );
    cli(&["remove", "alpha"]);
    assert_eq!(
        fails(&client, "skill_load", json!({"name": "alpha"})).await,
        "SKILL_NOT_FOUND"
    );
    client.cancel().await.unwrap();
}
