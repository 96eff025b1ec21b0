//! Captured stdout/stderr for a guest: keeps the first `cap` bytes, counts
//! and drops the rest, and never makes the guest wait or fail. (wasmtime's
//! `MemoryOutputPipe` traps when full, which a guest sees as a broken pipe.)

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// Largest write a guest is offered at once.
const PERMIT: usize = 64 * 1024;

#[derive(Debug, Default)]
struct Inner {
    kept: Vec<u8>,
    cap: usize,
    total: u64,
}

/// A cloneable handle on one captured stream.
#[derive(Debug, Clone)]
pub(crate) struct CappedOutput(Arc<Mutex<Inner>>);

impl CappedOutput {
    pub(crate) fn new(cap: usize) -> Self {
        CappedOutput(Arc::new(Mutex::new(Inner {
            kept: Vec::new(),
            cap,
            total: 0,
        })))
    }

    /// Append bytes, keeping at most `cap` in total.
    pub(crate) fn push(&self, bytes: &[u8]) {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        inner.total += bytes.len() as u64;
        let room = inner.cap.saturating_sub(inner.kept.len());
        let take = room.min(bytes.len());
        inner.kept.extend_from_slice(&bytes[..take]);
    }

    /// The kept bytes and whether anything was dropped.
    pub(crate) fn take(&self) -> (Vec<u8>, bool) {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let truncated = inner.total > inner.kept.len() as u64;
        (std::mem::take(&mut inner.kept), truncated)
    }
}

impl IsTerminal for CappedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for CappedOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedOutput {
    async fn ready(&mut self) {}
}

impl AsyncWrite for CappedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_bytes_and_flags_the_rest() {
        let out = CappedOutput::new(5);
        out.push(b"abc");
        out.push(b"defgh");
        assert_eq!(out.take(), (b"abcde".to_vec(), true));
        let exact = CappedOutput::new(3);
        exact.push(b"abc");
        assert_eq!(exact.take(), (b"abc".to_vec(), false));
    }
}
