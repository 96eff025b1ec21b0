//! A transport wrapper that keeps a stdio session alive through messages a
//! client sends before the session has started.
//!
//! rmcp answers requests that arrive before `initialize` (ping, discover,
//! unknown methods), but ends the session on a notification or a response
//! received before it; some clients send `notifications/cancelled` or stray
//! replies early. Until a session starts, such messages are dropped with a
//! debug log instead.

use std::borrow::Cow;

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta, ServerJsonRpcMessage};
use rmcp::transport::Transport;

/// Wraps a server transport; see the module docs.
pub struct DropEarlyNotifications<T> {
    inner: T,
    started: bool,
}

impl<T> DropEarlyNotifications<T> {
    pub fn new(inner: T) -> Self {
        DropEarlyNotifications {
            inner,
            started: false,
        }
    }
}

/// Does this request start a session: `initialize`, or (protocol 2026-07-28)
/// a request that carries its protocol version inline.
fn starts_session(request: &ClientRequest) -> bool {
    match request {
        ClientRequest::InitializeRequest(_) => true,
        ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_) => false,
        other => other.get_meta().protocol_version().is_some(),
    }
}

impl<T> Transport<RoleServer> for DropEarlyNotifications<T>
where
    T: Transport<RoleServer>,
{
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let message = self.inner.receive().await?;
            if self.started {
                return Some(message);
            }
            match &message {
                ClientJsonRpcMessage::Request(request) => {
                    self.started = starts_session(&request.request);
                    return Some(message);
                }
                other => {
                    tracing::debug!(?other, "ignoring a message received before initialize");
                }
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
