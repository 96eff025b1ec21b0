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
