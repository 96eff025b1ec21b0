//! The MCP face over stdio, driven by rmcp's client and by raw JSON-RPC lines
//! against the real binary.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use common::Fixture;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

async fn connect(fixture: &Fixture, extra: &[&str]) -> Client {
    let mut args = vec!["serve"];
    args.extend_from_slice(extra);
    let cmd = tokio::process::Command::from(fixture.command(&args));
    let transport = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn skillhost serve")
        .0;
    ().serve(transport).await.expect("MCP initialize")
}

async fn call(client: &Client, tool: &'static str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("args must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool} call failed at the protocol level: {e}"))
}

/// Structured content of a successful call, checked against the tool's
/// output schema and against the text block (which must carry the same JSON).
fn ok_json(result: &CallToolResult, tool: &Tool) -> Value {
    assert_ne!(
        result.is_error,
        Some(true),
        "unexpected tool error: {result:?}"
    );
    let structured = result
        .structured_content
        .clone()
        .expect("structuredContent");
    let schema = Value::Object((*tool.output_schema.clone().expect("outputSchema")).clone());
    let validator = jsonschema::validator_for(&schema).expect("output schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&structured)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{} output violates its schema: {errors:?}",
        tool.name
    );
    let text = result.content[0]
        .as_text()
        .expect("a text block")
        .text
        .clone();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), structured);
    structured
}

/// The error kind of a failed call: a tool error (not a protocol error) whose
/// text block is `{"error": {"kind", "message"}}`, without structured content
/// (TypeScript clients check structured content against the output schema
/// even on errors).
fn error_kind(result: &CallToolResult) -> String {
    assert_eq!(
        result.is_error,
        Some(true),
        "expected a tool error: {result:?}"
    );
    assert!(
        result.structured_content.is_none(),
        "errors carry no structuredContent"
    );
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

async fn tools(client: &Client) -> Vec<Tool> {
    client.list_all_tools().await.expect("tools/list")
}

fn tool<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
    tools
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

fn example_fixture() -> Fixture {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "alpha-notes", "Take notes the alpha way");
    fx.file(&dir, "references/guide.md", "# Guide\nüñí\n");
    fx.file(&dir, "assets/blob.bin", [0u8, 159, 146, 150, 255]);
    fx.skill(&fx.global_dir(), "beta-tool", "A global helper");
    fx
}

#[tokio::test]
async fn tools_list_is_exactly_the_fixed_tools() {
    let fx = example_fixture();
    let client = connect(&fx, &[]).await;
    let info = client.peer_info().expect("server info");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("skillhost")
    );
    let list = tools(&client).await;
    let names: BTreeSet<&str> = list.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        BTreeSet::from(["skill_list", "skill_load", "skill_read", "skill_run"])
    );
    for t in &list {
        let input = serde_json::to_value(&*t.input_schema).unwrap();
        assert_eq!(input["type"], "object", "{}", t.name);
        assert!(t.output_schema.is_some(), "{} has an output schema", t.name);
        let schemas = format!("{input} {:?}", t.output_schema);
        assert!(!schemas.contains("uint"), "no Rust-only formats: {schemas}");
        let description = t.description.as_deref().unwrap_or("");
        assert!(!description.is_empty());
        assert!(
            !description.contains("alpha-notes"),
            "descriptions never embed the catalog"
        );
    }
    let read_schema = serde_json::to_value(&*tool(&list, "skill_read").input_schema).unwrap();
    let required: BTreeSet<&str> = read_schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(required, BTreeSet::from(["name", "path"]));
    let load_schema = serde_json::to_value(&*tool(&list, "skill_load").input_schema).unwrap();
    assert_eq!(load_schema["required"], json!(["name"]));

    // The tool list does not change when skills change.
    fx.skill(&fx.project_dir(), "gamma-new", "Appeared later");
    let again: BTreeSet<String> = tools(&client)
        .await
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(again.len(), 4);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn list_load_read_happy_paths() {
    let fx = example_fixture();
    let client = connect(&fx, &[]).await;
    let list = tools(&client).await;

    let listed = ok_json(
        &call(&client, "skill_list", json!({})).await,
        tool(&list, "skill_list"),
    );
    let names: Vec<&str> = listed["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha-notes", "beta-tool"]);
    let alpha = &listed["skills"][0];
    assert_eq!(alpha["source"], "project");
    assert_eq!(
        alpha["files"],
        json!(["assets/blob.bin", "references/guide.md"])
    );
    assert!(
        alpha["entry_path"]
            .as_str()
            .unwrap()
            .ends_with("alpha-notes/SKILL.md")
    );
    assert_eq!(listed["skills"][1]["source"], "global");
    let sources: Vec<&str> = listed["skills_dirs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["project", "managed", "managed", "global"]);
    let with_disabled = ok_json(
        &call(&client, "skill_list", json!({"include_disabled": true})).await,
        tool(&list, "skill_list"),
    );
    assert_eq!(with_disabled["skills"].as_array().unwrap().len(), 2);

    let loaded = ok_json(
        &call(&client, "skill_load", json!({"name": "alpha-notes"})).await,
        tool(&list, "skill_load"),
    );
    assert_eq!(
        loaded["instructions"],
        "# alpha-notes\nBody of alpha-notes.\n"
    );
    assert_eq!(
        loaded["frontmatter"]["description"],
        "Take notes the alpha way"
    );
    assert_eq!(
        loaded["files"][1],
        json!({"path": "references/guide.md", "size": 15, "kind": "reference"})
    );

    let text = ok_json(
        &call(
            &client,
            "skill_read",
            json!({"name": "alpha-notes", "path": "references/guide.md"}),
        )
        .await,
        tool(&list, "skill_read"),
    );
    assert_eq!(text["encoding"], "utf-8");
    assert_eq!(text["content"], "# Guide\nüñí\n");
    assert_eq!(text["truncated"], false);
    let binary = ok_json(
        &call(
            &client,
            "skill_read",
            json!({"name": "alpha-notes", "path": "assets/blob.bin"}),
        )
        .await,
        tool(&list, "skill_read"),
    );
    assert_eq!(binary["encoding"], "base64");
    assert_eq!(binary["content"], "AJ+Slv8=");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn failures_are_tool_errors_with_kinds() {
    let fx = example_fixture();
    let dir = fx.project_dir().join("alpha-notes");
    fx.file(&dir, "big.txt", "x".repeat(2048));
    std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd")).unwrap();
    let client = connect(&fx, &["--max-file-bytes", "1024"]).await;

    let cases = [
        ("skill_load", json!({"name": "nope"}), "SKILL_NOT_FOUND"),
        (
            "skill_read",
            json!({"name": "nope", "path": "a.md"}),
            "SKILL_NOT_FOUND",
        ),
        (
            "skill_read",
            json!({"name": "alpha-notes", "path": "missing.md"}),
            "FILE_NOT_FOUND",
        ),
        (
            "skill_read",
            json!({"name": "alpha-notes", "path": "../beta-tool/SKILL.md"}),
            "PATH_OUTSIDE_SKILL",
        ),
        (
            "skill_read",
            json!({"name": "alpha-notes", "path": "/etc/passwd"}),
            "PATH_OUTSIDE_SKILL",
        ),
        (
            "skill_read",
            json!({"name": "alpha-notes", "path": "passwd"}),
            "PATH_OUTSIDE_SKILL",
        ),
        (
            "skill_read",
            json!({"name": "alpha-notes", "path": "a\u{0}b"}),
            "INVALID_PATH",
        ),
        (
            "skill_read",
            json!({"name": "alpha-notes", "path": "references"}),
            "INVALID_PATH",
        ),
        (
            "skill_read",
            json!({"name": "alpha-notes", "path": "big.txt"}),
            "FILE_TOO_LARGE",
        ),
        (
            "skill_read",
            json!({"name": "alpha-notes", "path": "big.txt", "offset": 5000, "length": 1}),
            "INVALID_INPUT",
        ),
    ];
    for (tool_name, args, kind) in cases {
        let result = call(&client, tool_name, args.clone()).await;
        assert_eq!(error_kind(&result), kind, "{tool_name} {args}");
    }
    // A part of a large file can still be read.
    let part = call(
        &client,
        "skill_read",
        json!({"name": "alpha-notes", "path": "big.txt", "offset": 1000, "length": 100}),
    )
    .await;
    let part = part.structured_content.unwrap();
    assert_eq!(
        (part["length"].as_u64(), part["truncated"].as_bool()),
        (Some(100), Some(true))
    );

    // Malformed arguments are tool errors with a kind, and the session goes on.
    let missing = call(&client, "skill_load", json!({})).await;
    assert_eq!(error_kind(&missing), "INVALID_INPUT");
    let wrong_type = call(
        &client,
        "skill_read",
        json!({"name": "alpha-notes", "path": 7}),
    )
    .await;
    assert_eq!(error_kind(&wrong_type), "INVALID_INPUT");
    let extra = call(
        &client,
        "skill_load",
        json!({"name": "alpha-notes", "nmae": "x"}),
    )
    .await;
    assert_eq!(error_kind(&extra), "INVALID_INPUT");
    let unknown = client
        .call_tool(CallToolRequestParams::new("skill_delete"))
        .await;
    assert!(unknown.is_err() || unknown.unwrap().is_error == Some(true));
    let still = call(&client, "skill_list", json!({})).await;
    assert_ne!(still.is_error, Some(true));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn disk_changes_show_at_the_next_call_without_reconnect() {
    let fx = example_fixture();
    let client = connect(&fx, &[]).await;
    let names = |v: &Value| -> Vec<String> {
        v["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    let first = call(&client, "skill_list", json!({}))
        .await
        .structured_content
        .unwrap();
    assert_eq!(names(&first), ["alpha-notes", "beta-tool"]);

    // Added.
    fx.skill(&fx.project_dir(), "delta-added", "Added while serving");
    let second = call(&client, "skill_list", json!({}))
        .await
        .structured_content
        .unwrap();
    assert_eq!(names(&second), ["alpha-notes", "beta-tool", "delta-added"]);

    // Edited: the new description and instructions are served.
    fx.skill_md(
        &fx.project_dir(),
        "delta-added",
        "---\nname: delta-added\ndescription: Edited description\n---\nNew body\n",
    );
    let loaded = call(&client, "skill_load", json!({"name": "delta-added"}))
        .await
        .structured_content
        .unwrap();
    assert_eq!(loaded["description"], "Edited description");
    assert_eq!(loaded["instructions"], "New body\n");

    // A project skill shadows the global one of the same name once it exists.
    fx.skill(&fx.project_dir(), "beta-tool", "Project override");
    let shadowed = call(&client, "skill_list", json!({}))
        .await
        .structured_content
        .unwrap();
    let beta = shadowed["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "beta-tool")
        .unwrap()
        .clone();
    assert_eq!(beta["source"], "project");
    assert!(
        shadowed["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("shadowed"))
    );

    // Deleted.
    std::fs::remove_dir_all(fx.project_dir().join("delta-added")).unwrap();
    let third = call(&client, "skill_list", json!({}))
        .await
        .structured_content
        .unwrap();
    assert_eq!(names(&third), ["alpha-notes", "beta-tool"]);
    let gone = call(&client, "skill_load", json!({"name": "delta-added"})).await;
    assert_eq!(error_kind(&gone), "SKILL_NOT_FOUND");
    client.cancel().await.unwrap();
}

/// Raw JSON-RPC over the real binary's stdio: every stdout line is a JSON-RPC
/// message, unknown methods get an error without ending the session, and the
/// server exits 0 when stdin closes.
#[test]
fn stdout_carries_only_jsonrpc_and_stdin_close_ends_the_server() {
    let fx = example_fixture();
    let mut child = fx
        .command(&["serve", "--log-level", "trace"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |msg: Value| {
        let line = match msg {
            Value::String(raw) => raw,
            other => other.to_string(),
        };
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    };
    let mut responses = std::collections::HashMap::new();
    let mut read_until = |id: i64, stdout: &mut BufReader<_>| -> Value {
        loop {
            if let Some(found) = responses.remove(&id) {
                return found;
            }
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "stdout closed early"
            );
            let msg: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
            assert_eq!(msg["jsonrpc"], "2.0", "{line}");
            if let Some(got) = msg["id"].as_i64() {
                responses.insert(got, msg);
            }
        }
    };

    // Junk, a notification and a probe before initialize (newer clients send
    // server/discover) do not end the session.
    send(Value::String("not json {".into()));
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}),
    );
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}));
    let discover = read_until(1, &mut stdout);
    assert!(
        discover.get("error").is_some() || discover.get("result").is_some(),
        "{discover}"
    );

    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"}}}),
    );
    let init = read_until(2, &mut stdout);
    assert_eq!(init["result"]["serverInfo"]["name"], "skillhost", "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    send(json!({"jsonrpc": "2.0", "id": 3, "method": "no/such/method", "params": {}}));
    let unknown = read_until(3, &mut stdout);
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");

    send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "skill_read", "arguments": {"name": "alpha-notes", "path": "../../etc/passwd"}}}),
    );
    let refused = read_until(4, &mut stdout);
    assert_eq!(refused["result"]["isError"], true);
    assert!(
        refused["result"].get("structuredContent").is_none(),
        "{refused}"
    );
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    let body: Value = serde_json::from_str(text).unwrap();
    assert_eq!(body["error"]["kind"], "PATH_OUTSIDE_SKILL");

    send(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "skill_list", "arguments": {}}}),
    );
    let listed = read_until(5, &mut stdout);
    // `arguments` may be omitted for a tool without required arguments.
    send(
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "skill_list"}}),
    );
    let bare = read_until(6, &mut stdout);
    assert_eq!(bare["result"]["isError"], false, "{bare}");
    assert_eq!(
        listed["result"]["structuredContent"]["skills"][0]["name"],
        "alpha-notes"
    );

    let _ = send;
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    for line in rest.lines().filter(|l| !l.trim().is_empty()) {
        let msg: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        assert_eq!(msg["jsonrpc"], "2.0");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "server did not exit after stdin closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status:?}");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("serving MCP on stdio"),
        "logs go to stderr: {stderr}"
    );
}

/// A client that goes away before `initialize` ends the server cleanly:
/// exit 0, nothing on stdout, no error logged.
#[test]
fn stdin_closed_before_initialize_is_a_clean_exit() {
    let fx = example_fixture();
    let out = fx
        .command(&["serve"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(!stderr.contains("ERROR"), "{stderr}");
}
