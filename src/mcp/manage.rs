//! The management tools, present only when the server was started with
//! `--allow-write`: install, remove, enable, disable, config, revisions,
//! rollback. Installs from a path are limited to the workspace.

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};

use super::schema::Checked;
use super::{SkillServer, ToolError, blocking};
use crate::api::{
    ActivateRequest, ChangeRequest, ConfigSetRequest, InstallRequest, Installed, RevisionsRequest,
    StoredSkill,
};
use crate::manage::Origin;

#[tool_router(router = manage_router, vis = "pub(crate)")]
impl SkillServer {
    #[tool(
        name = "skill_install",
        description = "Install or upgrade a skill in the managed store from exactly one of: `path` (a skill directory or .tar.gz inside the workspace), `package_base64` (a .tar.gz), or `skill_md` plus `files` (raw parts). The skill is validated first; an upgrade creates a new immutable revision and makes it active. Pass `expected_version` to avoid overwriting another writer's change.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn skill_install(
        &self,
        Parameters(Checked(request)): Parameters<Checked<InstallRequest>>,
    ) -> Result<Json<Installed>, ToolError> {
        blocking(&self.host, move |host| {
            host.install(&request?, Origin::Client)
        })
        .await
        .map(Json)
    }

    #[tool(
        name = "skill_remove",
        description = "Remove a skill from the managed store (its revisions are deleted after a short grace period).",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn skill_remove(
        &self,
        Parameters(Checked(request)): Parameters<Checked<ChangeRequest>>,
    ) -> Result<Json<StoredSkill>, ToolError> {
        blocking(&self.host, move |host| host.remove(&request?))
            .await
            .map(Json)
    }

    #[tool(
        name = "skill_enable",
        description = "Enable an installed skill.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn skill_enable(
        &self,
        Parameters(Checked(request)): Parameters<Checked<ChangeRequest>>,
    ) -> Result<Json<StoredSkill>, ToolError> {
        blocking(&self.host, move |host| host.set_enabled(&request?, true))
            .await
            .map(Json)
    }

    #[tool(
        name = "skill_disable",
        description = "Disable an installed skill: hidden from skill_list unless include_disabled, refused by skill_load, skill_read and skill_run.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn skill_disable(
        &self,
        Parameters(Checked(request)): Parameters<Checked<ChangeRequest>>,
    ) -> Result<Json<StoredSkill>, ToolError> {
        blocking(&self.host, move |host| host.set_enabled(&request?, false))
            .await
            .map(Json)
    }

    #[tool(
        name = "skill_config_set",
        description = "Set (or, with a null value, unset) a config value that an installed skill declares in its skill.yaml. Secret values are never shown again.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn skill_config_set(
        &self,
        Parameters(Checked(request)): Parameters<Checked<ConfigSetRequest>>,
    ) -> Result<Json<StoredSkill>, ToolError> {
        blocking(&self.host, move |host| host.config_set(&request?))
            .await
            .map(Json)
    }

    #[tool(
        name = "skill_revisions",
        description = "An installed skill's revisions (oldest first), active revision, version counter, enabled flag and config (secrets masked).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn skill_revisions(
        &self,
        Parameters(Checked(request)): Parameters<Checked<RevisionsRequest>>,
    ) -> Result<Json<StoredSkill>, ToolError> {
        blocking(&self.host, move |host| host.revisions(&request?))
            .await
            .map(Json)
    }

    #[tool(
        name = "skill_activate",
        description = "Make a kept revision of an installed skill the active one (rollback), in one atomic step.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn skill_activate(
        &self,
        Parameters(Checked(request)): Parameters<Checked<ActivateRequest>>,
    ) -> Result<Json<StoredSkill>, ToolError> {
        blocking(&self.host, move |host| host.activate(&request?))
            .await
            .map(Json)
    }
}
