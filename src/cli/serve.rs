//! `skillhost serve`: start the host and serve MCP on stdio or HTTP.

use std::sync::Arc;

use crate::Host;
use crate::api::ListRequest;
use crate::config::HostConfig;

pub(super) fn serve(
    config: HostConfig,
    allow_write: bool,
    http: Option<crate::http::HttpOptions>,
) -> i32 {
    let host = Arc::new(Host::new(config));
    let list = host.list(&ListRequest::default());
    tracing::info!(
        skills = list.skills.len(),
        sources = %list
            .skills_dirs
            .iter()
            .map(|d| format!("{}={}", d.source.as_str(), d.path))
            .collect::<Vec<_>>()
            .join(" "),
        "skillhost {} serving {}",
        env!("CARGO_PKG_VERSION"),
        if http.is_some() { "HTTP" } else { "MCP on stdio" }
    );
    for warning in &list.warnings {
        tracing::warn!("{warning}");
    }
    let warm = Arc::clone(&host);
    if let Err(error) = std::thread::Builder::new()
        .name("skillhost-warm-up".into())
        .spawn(move || warm.warm_up())
    {
        tracing::warn!(%error, "cannot warm up the component runtime; the first run will");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!("cannot start the async runtime: {error}");
            return 2;
        }
    };
    let served = match http {
        Some(options) => runtime.block_on(crate::http::serve_http(host, options)),
        None => runtime.block_on(crate::mcp::serve_stdio(host, allow_write)),
    };
    match served {
        Ok(()) => 0,
        Err(error) => {
            tracing::error!("{error:#}");
            2
        }
    }
}
