//! MCP over streamable HTTP (`serve --http`, `/mcp`) with rmcp's own client:
//! the same fixed tool set as stdio, scopes checked per call, progress
//! notifications and cancellation that stops the guest.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::Fixture;
use common::http::*;
use common::mcp::{Recorder, with_progress_token};
use common::skills::yaml_skill;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest};
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

const MANIFEST: &str = "components:
  - {name: wc, type: wasm, path: components/word-count.wasm}
  - {name: greeter, type: wasm, path: components/greeter.wasm}
  - {name: spin-long, type: wasm, path: components/spin.wasm, limits: {timeout_ms: 30000}}
";
const READ: &str = "read-token-0123456789";
const ALL: &str = "all-token-0123456789";

type Client = RunningService<RoleClient, Recorder>;

async fn connect(server: &Server, token: Option<&str>, recorder: Recorder) -> Client {
    let mut config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp"));
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    recorder
        .serve(transport)
        .await
        .expect("MCP initialize over HTTP")
}

fn params(tool: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(tool.to_string()).with_arguments(args)
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    client
        .call_tool(params(tool, args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn error_kind(result: &CallToolResult) -> String {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let body: Value = serde_json::from_str(&result.content[0].as_text().unwrap().text).unwrap();
    body["error"]["kind"].as_str().unwrap().to_string()
}

async fn tool_names(client: &Client) -> BTreeSet<String> {
    client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

fn fixture() -> Fixture {
    let fx = Fixture::new();
    yaml_skill(&fx, "demo", MANIFEST);
    fx
}

// The blocking HTTP helpers and the server handle run outside the async
// runtime; the MCP client runs inside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_match_stdio_and_run_over_http() {
    let fx = fixture();
    let server = Server::start(&fx, &[]);
    let client = connect(&server, None, Recorder::default()).await;
    let names = tool_names(&client).await;
    assert_eq!(
        names,
        ["skill_list", "skill_load", "skill_read", "skill_run"]
            .map(String::from)
            .into()
    );
    let list = call(&client, "skill_list", json!({})).await;
    assert_eq!(
        list.structured_content.as_ref().unwrap()["skills"][0]["name"],
        "demo"
    );
    let run = call(
        &client,
        "skill_run",
        json!({"name": "demo", "component": "wc", "input": {"text": "a b c d"}}),
    )
    .await;
    assert_eq!(run.is_error, Some(false), "{run:?}");
    let envelope = run.structured_content.unwrap();
    assert_eq!(envelope["data"]["output_data"]["words"], 4);
    // The REST route answers the same body for the same call.
    let url = server.url("/tools/skill_list");
    let rest: Value =
        tokio::task::spawn_blocking(move || reqwest::blocking::get(url).unwrap().json().unwrap())
            .await
            .unwrap();
    assert_eq!(&rest, list.structured_content.as_ref().unwrap());
    client.cancel().await.unwrap();

    // With writes allowed the management tools join, as over stdio.
    drop(server);
    let server = Server::start(&fx, &["--allow-write"]);
    let client = connect(&server, None, Recorder::default()).await;
    assert_eq!(tool_names(&client).await.len(), 11);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_are_checked_per_call_and_the_tool_list_stays_fixed() {
    let fx = fixture();
    let tokens = token_file(
        &fx,
        &[
            ("reader", READ, &["read"], None),
            ("all", ALL, &["read", "execute", "write"], None),
        ],
    );
    let server = Server::start(&fx, &["--tokens", &tokens]);
    // Without a token the MCP endpoint answers 401 and the client cannot start.
    let anonymous = StreamableHttpClientTransport::from_uri(server.url("/mcp"));
    assert!(().serve(anonymous).await.is_err());

    let reader = connect(&server, Some(READ), Recorder::default()).await;
    let all = connect(&server, Some(ALL), Recorder::default()).await;
    assert_eq!(tool_names(&reader).await, tool_names(&all).await);
    let run = json!({"name": "demo", "component": "wc", "input": {"text": "x"}});
    let denied = call(&reader, "skill_run", run.clone()).await;
    assert_eq!(error_kind(&denied), "ACCESS_DENIED");
    let loaded = call(&reader, "skill_load", json!({"name": "demo"})).await;
    assert_eq!(loaded.is_error, Some(false));
    let ran = call(&all, "skill_run", run).await;
    assert_eq!(ran.is_error, Some(false), "{ran:?}");
    reader.cancel().await.unwrap();
    all.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_reach_http_clients() {
    let fx = fixture();
    let server = Server::start(&fx, &[]);
    let recorder = Recorder::default();
    let client = connect(&server, None, recorder.clone()).await;
    let request = params(
        "skill_run",
        json!({"name": "demo", "component": "greeter", "input": {"name": "Ada"}}),
    );
    let result = client
        .call_tool(with_progress_token(request, 3))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let seen: Vec<(f64, Option<String>)> = recorder
        .await_progress(2)
        .await
        .iter()
        .map(|p| (p.progress, p.message.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            (0.0, Some("choosing a greeting".to_string())),
            (2.0, Some("done".to_string()))
        ]
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_mcp_request_stops_the_guest() {
    let fx = fixture();
    let server = Server::start(&fx, &["--max-concurrent-runs", "1"]);
    let client = connect(&server, None, Recorder::default()).await;
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params(
                "skill_run",
                json!({"name": "demo", "component": "spin-long", "input": {}}),
            ))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    handle.cancel(Some("test".into())).await.unwrap();
    // The only run slot is free again at once: the 30 s loop was stopped.
    let started = Instant::now();
    let after = call(
        &client,
        "skill_run",
        json!({"name": "demo", "component": "wc", "input": {"text": "still here"}}),
    )
    .await;
    assert_eq!(after.is_error, Some(false), "{after:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The metrics saw the cancelled run.
    let url = server.url("/metrics");
    let text =
        tokio::task::spawn_blocking(move || reqwest::blocking::get(url).unwrap().text().unwrap())
            .await
            .unwrap();
    let samples = parse_prometheus(&text);
    assert_eq!(
        sample(
            &samples,
            "skillhost_executions_total",
            &[("status", "cancelled")]
        ),
        1.0,
        "{text}"
    );
    client.cancel().await.unwrap();
}

/// Raw streamable HTTP: a session starts at `initialize`, a DELETE ends it
/// with 204 (what the Python SDK expects), and the ended session is gone.
#[test]
fn sessions_end_with_delete() {
    let fx = fixture();
    let server = Server::start(&fx, &[]);
    let http = client();
    let post = |session: Option<&str>, body: Value| {
        let mut request = http
            .post(server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-06-18");
        }
        request.send().unwrap()
    };
    let init = post(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    assert_eq!(init.status().as_u16(), 200);
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(init.text().unwrap().contains("skillhost"));
    let initialized = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(initialized.status().as_u16(), 202);
    let listed = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    assert_eq!(listed.status().as_u16(), 200);
    assert!(listed.text().unwrap().contains("skill_run"));

    let ended = http
        .delete(server.url("/mcp"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .unwrap();
    assert_eq!(ended.status().as_u16(), 204);
    let after = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    );
    assert_eq!(after.status().as_u16(), 404, "the session is gone");
}
