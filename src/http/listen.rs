//! The accept loop: hyper connections with a header-read timeout (so a
//! client that trickles its headers cannot hold a connection), a cap on open
//! connections, and a graceful shutdown that stops accepting and lets the
//! requests in flight finish.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Connection-level limits.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Time a client has to send a request's headers (also how long an idle
    /// keep-alive connection is kept).
    pub header_read_timeout: Duration,
}

/// Serve `router` on `listener` until `stop` is cancelled, then wait for the
/// open connections to finish their requests (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = stop.cancelled() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!("accepting a connection failed: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let builder = builder.clone();
        let watcher = graceful.watcher();
        let first_byte = limits.header_read_timeout;
        let stopping = stop.clone();
        tokio::spawn(async move {
            // hyper's header timer starts with the first byte: a client that
            // connects and stays silent is dropped here, and at shutdown.
            let mut byte = [0u8; 1];
            let spoke = tokio::select! {
                peeked = tokio::time::timeout(first_byte, stream.peek(&mut byte)) => {
                    matches!(peeked, Ok(Ok(1..)))
                }
                _ = stopping.cancelled() => false,
            };
            if !spoke {
                drop(permit);
                return;
            }
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            if let Err(error) = watcher.watch(connection.into_owned()).await {
                tracing::debug!("connection ended: {error}");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
