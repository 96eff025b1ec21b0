//! The MCP face: a fixed set of tools over the [`Host`], served with rmcp.
//! Tool names, argument names and descriptions are static; they never depend
//! on which skills exist, so clients never need to reconnect.

mod lifecycle;
mod manage;
mod schema;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, Implementation, ProgressNotificationParam,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};

use crate::Host;
use crate::access::Access;
use crate::api::{
    FileContent, ListRequest, LoadRequest, LoadedSkill, ReadRequest, RunRequest, SkillList,
};
use crate::error::{ErrorBody, ErrorKind, HostError};
use crate::exec::{Envelope, ProgressFn, RunContext, Status};

/// What the server tells a client at `initialize`.
const INSTRUCTIONS: &str = "skillhost serves Agent Skills: folders of instructions and related files. \
Call skill_list to see the available skills, skill_load with an exact name to get a skill's \
instructions, file index and components, skill_read with a path from that index when the \
instructions point to a related file, and skill_run to execute a component in a sandbox. Changes \
on disk are visible at the next call.";

/// A tool failure: returned to the client as a tool error (`isError: true`)
/// whose text block is `{"error": {"kind", "message"}}`. It carries no
/// `structuredContent`: TypeScript clients validate structured content
/// against the tool's output schema even on errors, and reject the reply.
pub struct ToolError(pub HostError);

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        let body = serde_json::to_string(&ErrorBody::from(self.0))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(CallToolResult::error(vec![ContentBlock::text(body)]).into())
    }
}

/// A finished run: the envelope as structured content and as text, with
/// `isError` set when the run did not succeed (the envelope matches the
/// output schema either way).
pub struct RunReply(pub Envelope);

impl IntoCallToolResult for RunReply {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        let succeeded = self.0.data.status == Status::Succeeded;
        let value = serde_json::to_value(&self.0)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(if succeeded {
            CallToolResult::structured(value)
        } else {
            CallToolResult::structured_error(value)
        }
        .into())
    }
}

/// Progress reports of a run, forwarded as MCP progress notifications when
/// the client asked for them with a progress token.
fn progress_sink(context: &RequestContext<RoleServer>) -> Option<ProgressFn> {
    let token = context.meta.get_progress_token()?;
    let peer = context.peer.clone();
    let runtime = tokio::runtime::Handle::current();
    Some(Arc::new(move |done, total, message| {
        let mut param = ProgressNotificationParam::new(token.clone(), done as f64);
        param.total = total.map(|t| t as f64);
        param.message = message;
        // Called on the run's blocking thread: waiting here keeps the
        // notifications in order and ahead of the response.
        if let Err(error) = runtime.block_on(peer.notify_progress(param)) {
            tracing::debug!(%error, "progress notification not delivered");
        }
    }))
}

/// The MCP server: a handle on the shared [`Host`] and the fixed tool router.
#[derive(Clone)]
pub struct SkillServer {
    pub(crate) host: Arc<Host>,
    tool_router: ToolRouter<Self>,
}

/// Run blocking host work off the async runtime.
pub(crate) async fn blocking<T, F>(host: &Arc<Host>, work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce(&Host) -> Result<T, HostError> + Send + 'static,
{
    let host = Arc::clone(host);
    tokio::task::spawn_blocking(move || work(&host))
        .await
        .map_err(|e| {
            ToolError(HostError::new(
                ErrorKind::IoError,
                format!("the request failed inside the host: {e}"),
            ))
        })?
        .map_err(ToolError)
}

#[tool_router]
impl SkillServer {
    /// The server with the read-and-run tools, plus the management tools
    /// when `allow_write` (the set never depends on which skills exist).
    pub fn new(host: Arc<Host>, allow_write: bool) -> Self {
        let mut tool_router = Self::tool_router();
        if allow_write {
            tool_router += Self::manage_router();
        }
        for route in tool_router.map.values_mut() {
            let input = Arc::make_mut(&mut route.attr.input_schema);
            input.values_mut().for_each(schema::strip_rust_formats);
            if let Some(output) = route.attr.output_schema.as_mut() {
                Arc::make_mut(output)
                    .values_mut()
                    .for_each(schema::strip_rust_formats);
            }
        }
        SkillServer { host, tool_router }
    }

    #[tool(
        name = "skill_list",
        description = "List the available Agent Skills (name, description, source, entry path, related files, warnings) without loading their instructions. Rescans the skill directories on every call.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn skill_list(
        &self,
        Parameters(schema::Checked(request)): Parameters<schema::Checked<ListRequest>>,
    ) -> Result<Json<SkillList>, ToolError> {
        blocking(&self.host, move |host| Ok(host.list(&request?)))
            .await
            .map(Json)
    }

    #[tool(
        name = "skill_load",
        description = "Load one skill by its exact name from skill_list: returns the full SKILL.md instructions, its frontmatter, the skill directory and an index of its related files.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn skill_load(
        &self,
        Parameters(schema::Checked(request)): Parameters<schema::Checked<LoadRequest>>,
    ) -> Result<Json<LoadedSkill>, ToolError> {
        blocking(&self.host, move |host| host.load_request(&request?))
            .await
            .map(Json)
    }

    #[tool(
        name = "skill_read",
        description = "Read one related file of a skill by its path relative to the skill directory, as listed by skill_load. Text comes back as UTF-8, binary files as base64. Large files can be read in parts with offset and length.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn skill_read(
        &self,
        Parameters(schema::Checked(request)): Parameters<schema::Checked<ReadRequest>>,
    ) -> Result<Json<FileContent>, ToolError> {
        blocking(&self.host, move |host| host.read(&request?))
            .await
            .map(Json)
    }

    #[tool(
        name = "skill_run",
        description = "Run one executable component of a skill (listed under `components` by skill_load) with a JSON input, in a sandbox with time, memory and output limits and only the access the component declares. Returns the execution envelope {kind: \"execution\", data: {status, output_data, stdout, stderr, exit_code, error_kind, duration_ms, memory_peak_bytes, fuel_consumed, revision_id, ...}}; a failed run sets isError and says why in error_kind and error_message.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<Envelope>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn skill_run(
        &self,
        Parameters(schema::Checked(request)): Parameters<schema::Checked<RunRequest>>,
        context: RequestContext<RoleServer>,
    ) -> Result<RunReply, ToolError> {
        let request = request.map_err(ToolError)?;
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancel);
        let cancelled = context.ct.clone();
        let watcher = tokio::spawn(async move {
            cancelled.cancelled().await;
            flag.store(true, Ordering::Relaxed);
        });
        let run_context = RunContext {
            cancel: Some(cancel),
            progress: progress_sink(&context),
        };
        let result = blocking(&self.host, move |host| host.run(&request, &run_context)).await;
        watcher.abort();
        result.map(RunReply)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for SkillServer {
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Over HTTP the auth layer put the token's Access in the request.
        if let Some(parts) = context.extensions.get::<axum::http::request::Parts>() {
            let access = parts
                .extensions
                .get::<Access>()
                .copied()
                .unwrap_or_default();
            if let Err(denied) = access.check(&request.name) {
                return ToolError(denied).into_call_tool_result();
            }
        }
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }

    fn get_info(&self) -> ServerConfig {
        let mut implementation = Implementation::new("skillhost", env!("CARGO_PKG_VERSION"));
        implementation.title = Some("skillhost".into());
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(implementation)
            .with_instructions(INSTRUCTIONS)
    }
}

/// Serve MCP on stdin/stdout until the client closes stdin.
pub async fn serve_stdio(host: Arc<Host>, allow_write: bool) -> anyhow::Result<()> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_server(stdin, stdout);
    let service = match SkillServer::new(host, allow_write)
        .serve(lifecycle::DropEarlyNotifications::new(transport))
        .await
    {
        Ok(service) => service,
        // The client went away before `initialize` (a probe, a cancelled
        // start): nothing failed here.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
            tracing::info!("stdin closed before the MCP session started");
            return Ok(());
        }
        Err(e) => anyhow::bail!("MCP session did not start: {e}"),
    };
    let reason = service.waiting().await?;
    tracing::info!(?reason, "MCP session ended");
    Ok(())
}
