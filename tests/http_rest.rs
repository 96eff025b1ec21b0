//! The REST compatibility routes of `serve --http` against the real binary:
//! bodies identical to the MCP structured content, errors as
//! `{error: {kind, message}}` with fitting status codes, the management
//! routes only with `--allow-write`, body limits, health and OpenAPI.

mod common;

use common::Fixture;
use common::http::*;
use common::mcp::{READ_TOOLS, WRITE_TOOLS};
use common::skills::{HOSTILE, yaml_skill};
use serde_json::{Value, json};

fn fixture() -> Fixture {
    let fx = Fixture::new();
    let dir = yaml_skill(&fx, "demo", HOSTILE);
    fx.file(&dir, "references/notes.md", "# Notes\nsome text\n");
    fx.file(&dir, "data.bin", [0u8, 159, 146, 150, 255]);
    fx
}

#[test]
fn read_routes_answer_like_the_mcp_tools() {
    let fx = fixture();
    let server = Server::start(&fx, &[]);

    let (status, list) = get(&server, "/tools/skill_list", None);
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["demo"]);
    assert!(list["skills_dirs"].is_array());
    // The same body as `skillhost list --json` (the CLI's view of the core).
    let (_, cli) = fx.json(&["list"]);
    assert_eq!(list, cli);
    let (status, posted) = post(&server, "/tools/skill_list", None, json!({}));
    assert_eq!((status, &posted), (200, &list));

    let (status, loaded) = post(&server, "/tools/skill_load", None, json!({"name": "demo"}));
    assert_eq!(status, 200, "{loaded}");
    assert_eq!(loaded["name"], "demo");
    assert!(loaded["instructions"].as_str().unwrap().contains("# demo"));
    let (_, cli) = fx.json(&["load", "demo"]);
    assert_eq!(loaded, cli);

    let (status, text) = post(
        &server,
        "/tools/skill_read",
        None,
        json!({"name": "demo", "path": "references/notes.md"}),
    );
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        (&text["encoding"], &text["content"]),
        (&json!("utf-8"), &json!("# Notes\nsome text\n"))
    );
    let (_, binary) = post(
        &server,
        "/tools/skill_read",
        None,
        json!({"name": "demo", "path": "data.bin"}),
    );
    assert_eq!(binary["encoding"], "base64");

    for (path, body, code, error) in [
        (
            "/tools/skill_load",
            json!({"name": "nope"}),
            404,
            "SKILL_NOT_FOUND",
        ),
        (
            "/tools/skill_read",
            json!({"name": "demo", "path": "missing.md"}),
            404,
            "FILE_NOT_FOUND",
        ),
        (
            "/tools/skill_read",
            json!({"name": "demo", "path": "../../../etc/passwd"}),
            403,
            "PATH_OUTSIDE_SKILL",
        ),
        (
            "/tools/skill_load",
            json!({"nam": "demo"}),
            400,
            "INVALID_INPUT",
        ),
        ("/tools/skill_load", json!([1, 2]), 400, "INVALID_INPUT"),
    ] {
        let (status, reply) = post(&server, path, None, body.clone());
        assert_eq!(
            (status, kind(&reply)),
            (code, error),
            "{path} {body}: {reply}"
        );
    }
    // Not JSON at all, and a route that does not exist.
    let raw = client()
        .post(server.url("/tools/skill_load"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .unwrap();
    let (status, reply) = reply(raw);
    assert_eq!((status, kind(&reply)), (400, "INVALID_INPUT"));
    let (status, reply) = post(&server, "/tools/skill_nothing", None, json!({}));
    assert_eq!(status, 404, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("openapi")
    );
}

#[test]
fn runs_return_the_envelope_and_refusals_are_errors() {
    let fx = fixture();
    let server = Server::start(&fx, &[]);
    let run = |component: &str, input: Value| {
        post(
            &server,
            "/tools/skill_run",
            None,
            json!({"name": "demo", "component": component, "input": input}),
        )
    };
    let (status, ok) = run("wc", json!({"text": "one two three"}));
    assert_eq!(status, 200, "{ok}");
    assert_eq!(ok["kind"], "execution");
    assert_eq!(ok["data"]["status"], "succeeded");
    assert_eq!(ok["data"]["output_data"]["words"], 3);
    assert_eq!(ok["data"]["runtime"], "wasi");

    // A run that happened and failed is still an envelope; it says why.
    let (status, failed) = run("spin-fuel", json!({}));
    assert_eq!(status, 200, "{failed}");
    assert_eq!(failed["data"]["status"], "failed");
    assert_eq!(failed["data"]["error_kind"], "EXECUTION_TIMEOUT");

    // Nothing ran: an error with a status code.
    let (status, missing) = run("nope", json!({}));
    assert_eq!((status, kind(&missing)), (404, "COMPONENT_NOT_FOUND"));
    let (status, pinned) = post(
        &server,
        "/tools/skill_run",
        None,
        json!({"name": "demo", "component": "wc", "input": {"text": "x"}, "revision": "sha256:00"}),
    );
    assert_eq!((status, kind(&pinned)), (404, "REVISION_NOT_FOUND"));
}

#[test]
fn management_routes_exist_only_when_writes_are_allowed() {
    let fx = fixture();
    let source = fx.skill(&fx.workspace(), "notes", "Keeps notes");
    fx.file(
        &source,
        "skill.yaml",
        "config:\n  api_key: {title: API key, type: text, secret: true}\n",
    );
    let source = source.to_str().unwrap().to_string();

    let read_only = Server::start(&fx, &[]);
    let (status, refused) = post(
        &read_only,
        "/tools/skill_install",
        None,
        json!({"path": source}),
    );
    assert_eq!((status, kind(&refused)), (403, "ACCESS_DENIED"));
    drop(read_only);

    let server = Server::start(&fx, &["--allow-write"]);
    let (status, installed) = post(
        &server,
        "/tools/skill_install",
        None,
        json!({"path": source, "expected_version": 0}),
    );
    assert_eq!(status, 200, "{installed}");
    assert_eq!(
        (&installed["name"], &installed["version"]),
        (&json!("notes"), &json!(1))
    );
    let first = installed["revision_id"].as_str().unwrap().to_string();

    // A stale expected_version is a conflict, not an overwrite.
    let (status, stale) = post(
        &server,
        "/tools/skill_install",
        None,
        json!({"path": source, "expected_version": 0}),
    );
    assert_eq!((status, kind(&stale)), (409, "VERSION_CONFLICT"));

    std::fs::write(
        format!("{source}/SKILL.md"),
        "---\nname: notes\ndescription: Keeps notes, v2\n---\n# v2\n",
    )
    .unwrap();
    let (status, second) = post(
        &server,
        "/tools/skill_install",
        None,
        json!({"path": source}),
    );
    assert_eq!(status, 200, "{second}");
    assert_ne!(second["revision_id"], json!(first));

    let (status, revisions) = post(
        &server,
        "/tools/skill_revisions",
        None,
        json!({"name": "notes"}),
    );
    assert_eq!(status, 200, "{revisions}");
    assert_eq!(
        revisions["revisions"].as_array().unwrap().len(),
        2,
        "{revisions}"
    );

    let (status, set) = post(
        &server,
        "/tools/skill_config_set",
        None,
        json!({"name": "notes", "key": "api_key", "value": "s3cret-value-123"}),
    );
    assert_eq!(status, 200, "{set}");
    assert!(!set.to_string().contains("s3cret-value-123"), "{set}");

    let (status, _) = post(
        &server,
        "/tools/skill_activate",
        None,
        json!({"name": "notes", "revision": first}),
    );
    assert_eq!(status, 200);
    let (_, loaded) = post(&server, "/tools/skill_load", None, json!({"name": "notes"}));
    assert_eq!(loaded["description"], "Keeps notes");

    let (status, _) = post(
        &server,
        "/tools/skill_disable",
        None,
        json!({"name": "notes"}),
    );
    assert_eq!(status, 200);
    let (status, disabled) = post(&server, "/tools/skill_load", None, json!({"name": "notes"}));
    assert_eq!((status, kind(&disabled)), (409, "SKILL_DISABLED"));
    let (status, _) = post(
        &server,
        "/tools/skill_enable",
        None,
        json!({"name": "notes"}),
    );
    assert_eq!(status, 200);

    let (status, _) = post(
        &server,
        "/tools/skill_remove",
        None,
        json!({"name": "notes"}),
    );
    assert_eq!(status, 200);
    let (status, gone) = post(&server, "/tools/skill_load", None, json!({"name": "notes"}));
    assert_eq!((status, kind(&gone)), (404, "SKILL_NOT_FOUND"));

    // Over HTTP, installs from a path stay inside the workspace.
    let (status, outside) = post(
        &server,
        "/tools/skill_install",
        None,
        json!({"path": "/etc"}),
    );
    assert_eq!(status / 100, 4, "{outside}");
    assert!(!kind(&outside).is_empty());
}

#[test]
fn bodies_over_the_limit_are_refused_with_413() {
    let fx = fixture();
    let server = Server::start(&fx, &["--max-body-bytes", "1024"]);
    let big = "word ".repeat(1000);
    let (status, reply) = post(
        &server,
        "/tools/skill_run",
        None,
        json!({"name": "demo", "component": "wc", "input": {"text": big}}),
    );
    assert_eq!(status, 413, "{reply}");
    assert_eq!(kind(&reply), "INVALID_INPUT");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-body-bytes")
    );
    // The same request under the limit runs.
    let (status, _) = post(
        &server,
        "/tools/skill_run",
        None,
        json!({"name": "demo", "component": "wc", "input": {"text": "small"}}),
    );
    assert_eq!(status, 200);
}

#[test]
fn health_readiness_and_the_openapi_document() {
    let fx = fixture();
    let server = Server::start(&fx, &["--allow-write"]);
    let (status, text) = get_text(&server, "/healthz", None);
    assert_eq!((status, text.trim()), (200, "ok"));
    let (status, ready) = get(&server, "/readyz", None);
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["wasm_runtime"], "ok");
    assert!(ready["script_sandbox"].is_string());

    let (status, doc) = get(&server, "/openapi.json", None);
    assert_eq!(status, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{doc}");
    let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    for route in READ_TOOLS.iter().chain(&WRITE_TOOLS) {
        let path = format!("/tools/{route}");
        assert!(paths.contains(&&path), "{path} missing from {paths:?}");
    }
    assert!(doc["paths"]["/tools/skill_list"]["get"].is_object());
    assert!(doc["paths"]["/tools/skill_run"]["post"]["requestBody"].is_object());
}
