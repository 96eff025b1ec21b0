//! The HTTP face: MCP streamable HTTP at `/mcp`, REST compatibility routes
//! under `/tools/`, `/openapi.json`, `/metrics`, `/healthz` and `/readyz`,
//! behind bearer tokens with scopes, a Host-header check against DNS
//! rebinding, body-size and rate limits, and a graceful shutdown.

pub mod auth;
mod listen;

pub use self::listen::ConnectionLimits;
mod openapi;
mod rest;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, MatchedPath, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use self::auth::Tokens;
use crate::Host;
use crate::access::Access;
use crate::api::{
    ActivateRequest, ChangeRequest, ConfigSetRequest, InstallRequest, ListRequest, LoadRequest,
    ReadRequest, RevisionsRequest, RunRequest,
};
use crate::error::{ErrorKind, HostError};
use crate::exec::RunContext;
use crate::manage::Origin;
use crate::mcp::SkillServer;

/// How the HTTP server is set up.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    /// The token file; without it only a loopback bind is allowed and every
    /// request has read and execute access (and write with `allow_write`).
    pub tokens: Option<PathBuf>,
    pub allow_write: bool,
    /// Host names (or `host:port`) accepted in the `Host` header.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted on `/mcp` (empty: no Origin check).
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: usize,
    /// How long running requests may take to finish after a shutdown signal.
    pub shutdown_grace: Duration,
    /// Open connections and the time a client has to send its headers.
    pub connections: ConnectionLimits,
}

type McpService = StreamableHttpService<SkillServer, LocalSessionManager>;

struct App {
    host: Arc<Host>,
    tokens: Option<Tokens>,
    allow_write: bool,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    /// MCP streamable HTTP; tool calls are checked against the request's [`Access`].
    mcp: McpService,
}

/// Serve until SIGINT/SIGTERM, then let running requests finish up to the grace.
pub async fn serve_http(host: Arc<Host>, options: HttpOptions) -> anyhow::Result<()> {
    let tokens = match &options.tokens {
        Some(path) => Some(Tokens::load(path).map_err(anyhow::Error::msg)?),
        None => None,
    };
    if tokens.is_none() && !options.addr.ip().is_loopback() {
        anyhow::bail!(
            "refusing to serve on {} without authentication: bind a loopback address, or give --tokens FILE",
            options.addr
        );
    }
    let mut allowed_hosts = options.allowed_hosts.clone();
    if allowed_hosts.is_empty() {
        allowed_hosts = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        let bound = options.addr.ip().to_string();
        if !options.addr.ip().is_unspecified() && !allowed_hosts.contains(&bound) {
            allowed_hosts.push(bound);
        }
    }
    let shutdown = CancellationToken::new();
    let mut mcp_config = StreamableHttpServerConfig::default();
    mcp_config.allowed_hosts = allowed_hosts.clone();
    // Origins are checked for every route by `check_host`, with the same rule.
    mcp_config.cancellation_token = shutdown.child_token();
    let mcp_host = Arc::clone(&host);
    let app = Arc::new(App {
        host,
        tokens,
        allow_write: options.allow_write,
        allowed_hosts,
        allowed_origins: options.allowed_origins.clone(),
        mcp: StreamableHttpService::new(
            move || Ok(SkillServer::new(Arc::clone(&mcp_host), options.allow_write)),
            Arc::new(LocalSessionManager::default()),
            mcp_config,
        ),
    });
    let router = router(Arc::clone(&app), options.max_body_bytes);
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", options.addr))?;
    tracing::info!(
        addr = %listener.local_addr()?,
        auth = app.tokens.is_some(),
        write = app.allow_write,
        "skillhost {} serving MCP at /mcp and REST at /tools/",
        env!("CARGO_PKG_VERSION")
    );
    let stopping = shutdown.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down: no new requests; running ones may finish");
        stopping.cancel();
    });
    let served = listen::serve(listener, router, options.connections, shutdown.clone());
    let grace = options.shutdown_grace;
    tokio::select! {
        _ = served => {}
        _ = async { shutdown.cancelled().await; tokio::time::sleep(grace).await } => {
            tracing::warn!("requests still running after the {grace:?} grace; stopping anyway");
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

fn router(app: Arc<App>, max_body_bytes: usize) -> Router {
    let tools = Router::new()
        .route("/tools/skill_list", get(list_get).post(list_post))
        .route("/tools/skill_load", post(load))
        .route("/tools/skill_read", post(read))
        .route("/tools/skill_run", post(run))
        .route("/tools/skill_install", post(install))
        .route("/tools/skill_remove", post(remove))
        .route("/tools/skill_enable", post(enable))
        .route("/tools/skill_disable", post(disable))
        .route("/tools/skill_config_set", post(config_set))
        .route("/tools/skill_revisions", post(revisions))
        .route("/tools/skill_activate", post(activate))
        .route("/mcp", axum::routing::any(mcp))
        .route("/metrics", get(metrics))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&app),
            authenticate,
        ));
    Router::new()
        .merge(tools)
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/openapi.json", get(|| async { Json(openapi::document()) }))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(Arc::clone(&app), check_host))
        .layer(middleware::from_fn_with_state(Arc::clone(&app), count))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(app)
}

/// Count every request by route and status (and log it at debug level).
async fn count(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = request.method().clone();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    app.host.metrics().record_http(&route, status);
    tracing::debug!(
        %method,
        route,
        status,
        ms = started.elapsed().as_secs_f64() * 1000.0,
        "http request"
    );
    response
}

/// Refuse a `Host` header that names none of the allowed hosts (DNS
/// rebinding) and a browser `Origin` that is neither listed nor one of them.
async fn check_host(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !host_allowed(host, &app.allowed_hosts) {
        return rest::error(HostError::new(
            ErrorKind::AccessDenied,
            format!(
                "Host `{host}` is not served here (allowed: {}); see --allowed-host",
                app.allowed_hosts.join(", ")
            ),
        ));
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !origin_allowed(origin, &app.allowed_origins, &app.allowed_hosts) {
            return rest::error(HostError::new(
                ErrorKind::AccessDenied,
                format!(
                    "requests from the web page origin `{origin}` are refused; see --allowed-origin"
                ),
            ));
        }
    }
    next.run(request).await
}

/// A browser `Origin` is accepted when it is listed exactly, or when its host
/// is one of the allowed hosts (a page served from the same machine name).
fn origin_allowed(origin: &str, allowed_origins: &[String], allowed_hosts: &[String]) -> bool {
    let origin = origin.trim_end_matches('/');
    if allowed_origins
        .iter()
        .any(|a| a.trim_end_matches('/').eq_ignore_ascii_case(origin))
    {
        return true;
    }
    match origin.split_once("://") {
        Some(("http" | "https", authority)) if !authority.contains(['/', '@']) => {
            host_allowed(authority, allowed_hosts)
        }
        _ => false,
    }
}

/// `host` (a Host header, maybe with a port) against the allowed list.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    allowed.iter().any(|a| {
        let a = a.trim_start_matches('[').replace(']', "");
        a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(name)
    })
}

/// Bearer tokens: 401 without a valid one, 429 over its rate; puts the
/// token's [`Access`] in the request's extensions.
async fn authenticate(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    let access = match &app.tokens {
        None => Access {
            read: true,
            execute: true,
            write: app.allow_write,
        },
        Some(tokens) => {
            let bearer = bearer(request.headers());
            let Some(token) = bearer.and_then(|b| tokens.find(b)) else {
                let mut response = rest::error(HostError::new(
                    ErrorKind::AccessDenied,
                    "a valid bearer token is required (Authorization: Bearer TOKEN)",
                ));
                *response.status_mut() = StatusCode::UNAUTHORIZED;
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
                return response;
            };
            if !tokens.allow(token) {
                app.host.metrics().record_rate_limited();
                return rest::error(HostError::new(
                    ErrorKind::ResourceExhausted,
                    format!("token `{}` is over its rate limit; slow down", token.name),
                ));
            }
            Access {
                write: token.access.write && app.allow_write,
                ..token.access
            }
        }
    };
    request.extensions_mut().insert(access);
    next.run(request).await
}

/// The credentials of an `Authorization: Bearer ...` header (the scheme is
/// case-insensitive).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credentials) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(credentials.trim())
}

fn granted(request_access: Option<axum::Extension<Access>>) -> Access {
    request_access.map(|a| a.0).unwrap_or_default()
}

/// 403 ACCESS_DENIED unless the request's access may call `tool`.
fn require(access: Option<axum::Extension<Access>>, tool: &str) -> Result<(), Box<Response>> {
    granted(access)
        .check(tool)
        .map_err(|denied| Box::new(rest::error(denied)))
}

async fn not_found() -> Response {
    rest::error(HostError::new(
        ErrorKind::FileNotFound,
        "no such route; see /openapi.json",
    ))
}

async fn ready(State(app): State<Arc<App>>) -> Response {
    let host = Arc::clone(&app.host);
    let checks = tokio::task::spawn_blocking(move || host.readiness()).await;
    match checks {
        Ok(checks) => {
            let status = if checks.ready {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            (status, Json(checks)).into_response()
        }
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let host = Arc::clone(&app.host);
    match tokio::task::spawn_blocking(move || host.render_metrics()).await {
        Ok(text) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// `/mcp`: the streamable HTTP MCP service (the same tools as stdio).
async fn mcp(State(app): State<Arc<App>>, request: Request) -> Response {
    let mut service = app.mcp.clone();
    let ending_session = request.method() == axum::http::Method::DELETE;
    let mut response = match service.call(request).await {
        Ok(response) => response.map(Body::new),
        Err(never) => match never {},
    };
    // rmcp answers a session DELETE with 202; clients (the Python SDK) take
    // only 200/204 as "ended" and log a failure otherwise.
    if ending_session && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

#[derive(serde::Deserialize)]
struct ListQuery {
    #[serde(default)]
    include_disabled: Option<bool>,
}

async fn list_get(
    State(app): State<Arc<App>>,
    access: Option<axum::Extension<Access>>,
    Query(query): Query<ListQuery>,
) -> Response {
    if let Err(r) = require(access, "skill_list") {
        return *r;
    }
    let request = ListRequest {
        include_disabled: query.include_disabled,
    };
    rest::answer(&app.host, move |host, _| Ok(host.list(&request))).await
}

async fn list_post(
    State(app): State<Arc<App>>,
    access: Option<axum::Extension<Access>>,
    body: Result<Json<ListRequest>, JsonRejection>,
) -> Response {
    if let Err(r) = require(access, "skill_list") {
        return *r;
    }
    let request = match body {
        Ok(Json(request)) => request,
        Err(rejection) => return rest::bad_body(rejection),
    };
    rest::answer(&app.host, move |host, _| Ok(host.list(&request))).await
}

/// A POST route for `$tool`: scope check, body parse, blocking host call.
macro_rules! post_route {
    ($name:ident, $tool:literal, $request:ty, |$host:ident, $req:ident, $cancel:ident| $call:expr) => {
        async fn $name(
            State(app): State<Arc<App>>,
            access: Option<axum::Extension<Access>>,
            body: Result<Json<$request>, JsonRejection>,
        ) -> Response {
            if let Err(r) = require(access, $tool) {
                return *r;
            }
            let $req = match body {
                Ok(Json(request)) => request,
                Err(rejection) => return rest::bad_body(rejection),
            };
            rest::answer(&app.host, move |$host, $cancel| {
                let _ = &$cancel;
                $call
            })
            .await
        }
    };
}

post_route!(load, "skill_load", LoadRequest, |host, request, cancel| {
    host.load_request(&request)
});
post_route!(read, "skill_read", ReadRequest, |host, request, cancel| {
    host.read(&request)
});
post_route!(run, "skill_run", RunRequest, |host, request, cancel| {
    let context = RunContext {
        cancel: Some(cancel),
        progress: None,
    };
    host.run(&request, &context)
});
post_route!(
    install,
    "skill_install",
    InstallRequest,
    |host, request, cancel| host.install(&request, Origin::Client)
);
post_route!(
    remove,
    "skill_remove",
    ChangeRequest,
    |host, request, cancel| host.remove(&request)
);
post_route!(
    enable,
    "skill_enable",
    ChangeRequest,
    |host, request, cancel| host.set_enabled(&request, true)
);
post_route!(
    disable,
    "skill_disable",
    ChangeRequest,
    |host, request, cancel| host.set_enabled(&request, false)
);
post_route!(
    config_set,
    "skill_config_set",
    ConfigSetRequest,
    |host, request, cancel| host.config_set(&request)
);
post_route!(
    revisions,
    "skill_revisions",
    RevisionsRequest,
    |host, request, cancel| host.revisions(&request)
);
post_route!(
    activate,
    "skill_activate",
    ActivateRequest,
    |host, request, cancel| host.activate(&request)
);

#[cfg(test)]
mod tests {
    use super::{host_allowed, origin_allowed};

    #[test]
    fn browser_origins_must_be_listed_or_local() {
        let hosts = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let origins = vec!["https://app.example.com".to_string()];
        for ok in [
            "http://localhost:6274",
            "http://127.0.0.1",
            "https://app.example.com",
            "https://APP.example.com/",
        ] {
            assert!(origin_allowed(ok, &origins, &hosts), "{ok}");
        }
        for bad in [
            "https://evil.example",
            "null",
            "",
            "http://localhost@evil.example",
            "file://localhost",
            "https://app.example.com.evil.example",
        ] {
            assert!(!origin_allowed(bad, &origins, &hosts), "{bad}");
        }
    }

    #[test]
    fn host_headers_are_matched_with_or_without_ports() {
        let allowed = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        for ok in ["localhost", "localhost:8080", "127.0.0.1:3000", "[::1]:80"] {
            assert!(host_allowed(ok, &allowed), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "",
            "localhost.evil.example",
        ] {
            assert!(!host_allowed(bad, &allowed), "{bad}");
        }
    }
}
