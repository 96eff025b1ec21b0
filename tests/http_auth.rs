//! Who may call `serve --http`: bearer tokens with scopes (the auth matrix),
//! per-token rate limits, Host/Origin checks against DNS rebinding, and the
//! refusal to serve a non-loopback address without tokens.

mod common;

use common::Fixture;
use common::http::*;
use common::skills::{ECHO, yaml_skill};
use serde_json::json;

const READ: &str = "read-token-0123456789";
const EXEC: &str = "exec-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";
const SLOW: &str = "slow-token-0123456789";

fn fixture() -> (Fixture, String) {
    let fx = Fixture::new();
    yaml_skill(&fx, "demo", ECHO);
    let tokens = token_file(
        &fx,
        &[
            ("reader", READ, &["read"], None),
            ("runner", EXEC, &["execute"], None),
            ("admin", ADMIN, &["read", "execute", "write"], None),
            ("slow", SLOW, &["read"], Some(6)),
        ],
    );
    (fx, tokens)
}

/// One request per scope: list (read), run (execute), revisions (write).
fn statuses(server: &Server, token: Option<&str>) -> [u16; 4] {
    let list = get(server, "/tools/skill_list", token).0;
    let run = post(
        server,
        "/tools/skill_run",
        token,
        json!({"name": "demo", "component": "echo", "input": {"a": 1}}),
    )
    .0;
    let write = post(
        server,
        "/tools/skill_enable",
        token,
        json!({"name": "nothing-installed"}),
    )
    .0;
    let metrics = get_text(server, "/metrics", token).0;
    [list, run, write, metrics]
}

#[test]
fn the_auth_matrix() {
    let (fx, tokens) = fixture();
    let server = Server::start(&fx, &["--tokens", &tokens, "--allow-write"]);
    // No token, a wrong token, and a token sent with another scheme: 401.
    assert_eq!(statuses(&server, None), [401; 4]);
    assert_eq!(statuses(&server, Some("not-a-configured-token")), [401; 4]);
    let basic = client()
        .get(server.url("/tools/skill_list"))
        .header("authorization", format!("Basic {ADMIN}"))
        .send()
        .unwrap();
    assert_eq!(basic.status().as_u16(), 401);
    let (status, body) = get(&server, "/tools/skill_list", None);
    assert_eq!((status, kind(&body)), (401, "ACCESS_DENIED"));
    let challenge = client()
        .get(server.url("/tools/skill_list"))
        .send()
        .unwrap();
    assert_eq!(
        challenge.headers()["www-authenticate"].to_str().unwrap(),
        "Bearer"
    );

    // Each scope unlocks its routes; the rest are ACCESS_DENIED (403).
    // skill_enable of a skill that is not installed is a 404 once allowed.
    assert_eq!(statuses(&server, Some(READ)), [200, 403, 403, 200]);
    assert_eq!(statuses(&server, Some(EXEC)), [403, 200, 403, 200]);
    assert_eq!(statuses(&server, Some(ADMIN)), [200, 200, 404, 200]);
    let (status, denied) = post(
        &server,
        "/tools/skill_run",
        Some(READ),
        json!({"name": "demo", "component": "echo", "input": {}}),
    );
    assert_eq!((status, kind(&denied)), (403, "ACCESS_DENIED"));
    assert!(
        denied["error"]["message"]
            .as_str()
            .unwrap()
            .contains("execute")
    );
    // The scheme is case-insensitive.
    let lower = client()
        .get(server.url("/tools/skill_list"))
        .header("authorization", format!("bearer {READ}"))
        .send()
        .unwrap();
    assert_eq!(lower.status().as_u16(), 200);

    // Health checks need no token; tokens never reach the log.
    assert_eq!(get_text(&server, "/healthz", None).0, 200);
    assert_eq!(get(&server, "/readyz", None).0, 200);
    let log = server.log();
    for token in [READ, EXEC, ADMIN] {
        assert!(!log.contains(token), "{log}");
    }
}

#[test]
fn a_write_token_cannot_write_unless_the_server_allows_writes() {
    let (fx, tokens) = fixture();
    let server = Server::start(&fx, &["--tokens", &tokens]);
    assert_eq!(statuses(&server, Some(ADMIN)), [200, 200, 403, 200]);
}

#[test]
fn tokens_over_their_rate_are_refused_with_429() {
    let (fx, tokens) = fixture();
    let server = Server::start(&fx, &["--tokens", &tokens]);
    // 6 per minute allows a burst of 10 and refills one every 10 s.
    let codes: Vec<u16> = (0..14)
        .map(|_| get(&server, "/tools/skill_list", Some(SLOW)).0)
        .collect();
    assert_eq!(codes.iter().filter(|&&c| c == 200).count(), 10, "{codes:?}");
    let (status, body) = get(&server, "/tools/skill_list", Some(SLOW));
    assert_eq!((status, kind(&body)), (429, "RESOURCE_EXHAUSTED"));
    // Other tokens have their own bucket.
    assert_eq!(get(&server, "/tools/skill_list", Some(READ)).0, 200);
    let samples = parse_prometheus(&get_text(&server, "/metrics", Some(ADMIN)).1);
    assert_eq!(sample(&samples, "skillhost_rate_limited_total", &[]), 5.0);
}

#[test]
fn foreign_host_and_origin_headers_are_refused() {
    let fx = Fixture::new();
    yaml_skill(&fx, "demo", ECHO);
    let server = Server::start(&fx, &["--allowed-origin", "https://app.example.com"]);
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    let with = |host: &str, origin: Option<&str>| {
        let mut request = client()
            .get(server.url("/tools/skill_list"))
            .header("host", host);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        reply(request.send().unwrap())
    };
    // A name that resolved to 127.0.0.1 through an attacker's DNS.
    let (status, body) = with(&format!("evil.example:{port}"), None);
    assert_eq!((status, kind(&body)), (403, "ACCESS_DENIED"));
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--allowed-host")
    );
    // The same for the MCP endpoint.
    let mcp = client()
        .post(server.url("/mcp"))
        .header("host", "evil.example")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .unwrap();
    assert_eq!(mcp.status().as_u16(), 403);
    assert_eq!(with(&format!("localhost:{port}"), None).0, 200);
    assert_eq!(with(&format!("127.0.0.1:{port}"), None).0, 200);

    // A web page elsewhere may not drive the local server from a browser.
    let (status, body) = with(&format!("localhost:{port}"), Some("https://evil.example"));
    assert_eq!((status, kind(&body)), (403, "ACCESS_DENIED"));
    assert_eq!(
        with(
            &format!("localhost:{port}"),
            Some("https://app.example.com")
        )
        .0,
        200
    );
    assert_eq!(
        with(
            &format!("localhost:{port}"),
            Some(&format!("http://localhost:{port}"))
        )
        .0,
        200
    );

    // An operator may name the host a proxy forwards.
    drop(server);
    let server = Server::start(&fx, &["--allowed-host", "skills.internal"]);
    let named = client()
        .get(server.url("/tools/skill_list"))
        .header("host", "skills.internal")
        .send()
        .unwrap();
    assert_eq!(named.status().as_u16(), 200);
    let local = client()
        .get(server.url("/tools/skill_list"))
        .header("host", "localhost")
        .send()
        .unwrap();
    assert_eq!(local.status().as_u16(), 403, "only the listed hosts");
}

#[test]
fn a_public_bind_needs_tokens_and_bad_token_files_stop_the_start() {
    let fx = Fixture::new();
    let out = fx.run(&["serve", "--http", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("without authentication"), "{stderr}");
    assert!(stderr.contains("--tokens"), "{stderr}");

    for (file, complaint) in [
        (
            r#"{"tokens": [{"name": "x", "token": "short", "scopes": ["read"]}]}"#,
            "shorter than 16",
        ),
        (r#"{"tokens": []}"#, "no tokens"),
        (
            r#"{"tokens": [{"name": "x", "token": "long-enough-token-1", "scopes": ["admin"]}]}"#,
            "not a valid token file",
        ),
        (
            r#"{"tokens": [{"name": "x", "token": "long-enough-token-1", "scopes": ["read"]},
                           {"name": "x", "token": "long-enough-token-2", "scopes": ["read"]}]}"#,
            "used twice",
        ),
    ] {
        let path = fx.path().join("bad-tokens.json");
        std::fs::write(&path, file).unwrap();
        let out = fx.run(&[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--tokens",
            path.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{file}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(complaint), "{file}: {stderr}");
    }
    // A port that is taken is named in the error.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = fx.run(&["serve", "--http", &addr]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")),
        "{stderr}"
    );
    // Tokens belong in a file: the flag needs --http and takes no token value.
    let out = fx.run(&["serve", "--tokens", "x.json"]);
    assert_ne!(out.status.code(), Some(0));
}

#[test]
fn clear_tokens_in_a_shared_file_are_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let (fx, tokens) = fixture();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    let shared = Server::start(&fx, &["--tokens", &tokens]);
    // The warning comes before the listening line that Server::start waits for.
    assert!(shared.log().contains("chmod 600"), "{}", shared.log());
    drop(shared);
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let private = Server::start(&fx, &["--tokens", &tokens]);
    assert!(!private.log().contains("chmod 600"), "{}", private.log());
}
