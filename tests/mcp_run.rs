//! `skill_run` over MCP (stdio, rmcp's client against the real binary):
//! envelopes that match the output schema on success and on failure, plain
//! tool errors when nothing ran, progress notifications, and cancellation
//! that stops the guest.

mod common;

use std::time::{Duration, Instant};

use common::Fixture;
use common::guests::guest;
use common::mcp::{Recorder, with_progress_token};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, Tool};
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

type Client = RunningService<RoleClient, Recorder>;

fn fixture() -> Fixture {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "demo", "Runs things");
    for name in ["word-count", "greeter", "spin"] {
        fx.file(
            &dir,
            &format!("components/{name}.wasm"),
            std::fs::read(guest(name)).unwrap(),
        );
    }
    fx.file(
        &dir,
        "skill.yaml",
        "components:\n\
         - name: word-count\n  type: wasm\n  path: components/word-count.wasm\n  input_schema: {type: object, required: [text]}\n\
         - {name: greeter, type: wasm, path: components/greeter.wasm}\n\
         - {name: spin, type: wasm, path: components/spin.wasm, limits: {timeout_ms: 1000}}\n\
         - {name: spin-long, type: wasm, path: components/spin.wasm, limits: {timeout_ms: 30000}}\n",
    );
    fx
}

async fn connect(fx: &Fixture, recorder: Recorder) -> Client {
    let cmd = tokio::process::Command::from(fx.command(&["serve", "--max-concurrent-runs", "1"]));
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    recorder.serve(transport).await.expect("initialize")
}

fn params(component: &str, input: Value) -> CallToolRequestParams {
    let Value::Object(args) = json!({"name": "demo", "component": component, "input": input})
    else {
        unreachable!()
    };
    CallToolRequestParams::new("skill_run").with_arguments(args)
}

async fn run(client: &Client, component: &str, input: Value) -> CallToolResult {
    client
        .call_tool(params(component, input))
        .await
        .expect("tools/call")
}

/// The envelope, checked against the tool's output schema.
fn envelope(result: &CallToolResult, tool: &Tool) -> Value {
    let data = result
        .structured_content
        .clone()
        .expect("structuredContent");
    let schema = Value::Object((*tool.output_schema.clone().unwrap()).clone());
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&data)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "envelope violates the output schema: {errors:?}"
    );
    assert_eq!(data["kind"], "execution");
    data["data"].clone()
}

#[tokio::test]
async fn runs_return_envelopes_matching_the_output_schema() {
    let fx = fixture();
    let client = connect(&fx, Recorder::default()).await;
    let tools = client.list_all_tools().await.unwrap();
    let tool = tools
        .iter()
        .find(|t| t.name == "skill_run")
        .expect("skill_run listed");
    let input = serde_json::to_value(&*tool.input_schema).unwrap();
    assert_eq!(input["required"], json!(["name", "component"]));
    assert!(
        input["properties"]["input"]["type"]
            .to_string()
            .contains("object"),
        "{input}"
    );
    // Some clients send the input object as a JSON string.
    let stringly = run(&client, "word-count", json!("{\"text\": \"a b\"}")).await;
    assert_eq!(envelope(&stringly, tool)["output_data"]["words"], 2);

    let ok = run(&client, "word-count", json!({"text": "a b a"})).await;
    assert_eq!(ok.is_error, Some(false));
    let data = envelope(&ok, tool);
    assert_eq!(data["status"], "succeeded");
    assert_eq!(data["output_data"]["words"], 3);
    assert_eq!(data["runtime"], "wasi");

    // A failed run is a tool error that still carries a schema-valid envelope.
    let timeout = run(&client, "spin", json!({})).await;
    assert_eq!(timeout.is_error, Some(true));
    let data = envelope(&timeout, tool);
    assert_eq!(data["status"], "failed");
    assert_eq!(data["error_kind"], "EXECUTION_TIMEOUT");

    // Nothing ran: a plain tool error with a kind, and no envelope.
    for (component, input, kind) in [
        ("nope", json!({}), "COMPONENT_NOT_FOUND"),
        ("word-count", json!({"txt": "a"}), "INVALID_INPUT"),
    ] {
        let result = run(&client, component, input).await;
        assert_eq!(result.is_error, Some(true));
        assert!(result.structured_content.is_none());
        let body: Value = serde_json::from_str(&result.content[0].as_text().unwrap().text).unwrap();
        assert_eq!(body["error"]["kind"], kind, "{body}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn typed_components_report_progress_to_clients_that_ask() {
    let fx = fixture();
    let recorder = Recorder::default();
    let client = connect(&fx, recorder.clone()).await;
    let request = with_progress_token(params("greeter", json!({"name": "Ada"})), 7);
    let result = client.call_tool(request).await.unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let received = recorder.await_progress(2).await;
    // rmcp's client may substitute its own token on the wire; the server
    // must echo one token for the whole request.
    assert!(
        received
            .windows(2)
            .all(|w| w[0].progress_token == w[1].progress_token)
    );
    let seen: Vec<(f64, Option<f64>, Option<String>)> = received
        .iter()
        .map(|p| (p.progress, p.total, p.message.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            (0.0, Some(2.0), Some("choosing a greeting".to_string())),
            (2.0, Some(2.0), Some("done".to_string()))
        ]
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn cancelling_a_request_stops_the_guest() {
    let fx = fixture();
    let client = connect(&fx, Recorder::default()).await;
    // The server runs one component at a time (--max-concurrent-runs 1).
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params("spin-long", json!({})))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    handle.cancel(Some("test".into())).await.unwrap();
    // If the 30 s loop still held the only slot, this run would wait for it
    // and fail with RESOURCE_EXHAUSTED at its own deadline.
    let started = Instant::now();
    let after = run(&client, "word-count", json!({"text": "still serving"})).await;
    assert_eq!(after.is_error, Some(false), "{after:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    client.cancel().await.unwrap();
}

/// Raw JSON-RPC: the exact progress token a client sends is echoed, and a
/// request without one gets no progress notifications.
#[test]
fn progress_tokens_are_echoed_exactly_and_only_when_sent() {
    use std::io::{BufRead, BufReader, Write};
    let fx = fixture();
    let mut child = fx
        .command(&["serve"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut exchange = |id: i64, message: Value| -> Vec<Value> {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
        let mut seen = Vec::new();
        loop {
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "server closed stdout"
            );
            let msg: Value = serde_json::from_str(&line).unwrap();
            let done = msg["id"] == id;
            seen.push(msg);
            if done {
                return seen;
            }
        }
    };
    exchange(
        1,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    let call = |id: i64, meta: Option<Value>| {
        let mut params = json!({"name": "skill_run", "arguments": {
            "name": "demo", "component": "greeter", "input": {"name": "Ada"}}});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    };
    let progress = |messages: &[Value]| -> Vec<Value> {
        messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| m["params"].clone())
            .collect()
    };
    let without = exchange(2, call(2, None));
    assert_eq!(without.last().unwrap()["result"]["isError"], false);
    assert!(progress(&without).is_empty(), "{without:?}");
    let with = exchange(3, call(3, Some(json!({"progressToken": "tok-1"}))));
    let sent = progress(&with);
    assert_eq!(sent.len(), 2, "{with:?}");
    assert!(sent.iter().all(|p| p["progressToken"] == "tok-1"));
    assert_eq!(
        (sent[0]["progress"].as_f64(), sent[1]["progress"].as_f64()),
        (Some(0.0), Some(2.0))
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
