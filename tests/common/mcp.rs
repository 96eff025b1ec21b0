//! Pieces the rmcp-client tests share: the tool names and a client that
//! records progress notifications.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use rmcp::ClientHandler;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::{NotificationContext, RoleClient};

/// The tools every server has.
pub const READ_TOOLS: [&str; 4] = ["skill_list", "skill_load", "skill_read", "skill_run"];

/// The management tools `serve --allow-write` adds.
pub const WRITE_TOOLS: [&str; 7] = [
    "skill_install",
    "skill_remove",
    "skill_enable",
    "skill_disable",
    "skill_config_set",
    "skill_revisions",
    "skill_activate",
];

/// A client that records progress notifications.
#[derive(Clone, Default)]
pub struct Recorder {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

impl Recorder {
    /// The notifications received once `count` arrived (or after 5 s):
    /// they are sent while the guest runs and may trail the result.
    pub async fn await_progress(&self, count: usize) -> Vec<ProgressNotificationParam> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while self.progress.lock().unwrap().len() < count && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        self.progress.lock().unwrap().clone()
    }
}

/// `request` with a numeric progress token in its `_meta`.
pub fn with_progress_token(
    mut request: rmcp::model::CallToolRequestParams,
    token: i64,
) -> rmcp::model::CallToolRequestParams {
    let mut meta = rmcp::model::RequestMetaObject::default();
    meta.set_progress_token(rmcp::model::ProgressToken(
        rmcp::model::NumberOrString::Number(token),
    ));
    request.meta = Some(meta);
    request
}
