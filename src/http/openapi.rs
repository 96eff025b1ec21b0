//! The OpenAPI 3.1 document of the REST routes, built from the same types
//! the routes and the MCP tools use.

use schemars::{JsonSchema, schema_for};
use serde_json::{Value, json};

use crate::access::Access;
use crate::api::{
    ActivateRequest, ChangeRequest, ConfigSetRequest, FileContent, InstallRequest, Installed,
    ListRequest, LoadRequest, LoadedSkill, ReadRequest, RevisionsRequest, RunRequest, SkillList,
    StoredSkill,
};
use crate::error::ErrorBody;
use crate::exec::Envelope;

/// `T`'s schema for embedding: its `$defs` are left for [`hoist_defs`].
fn schema<T: JsonSchema>() -> Value {
    let mut value = serde_json::to_value(schema_for!(T)).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.remove("$schema");
    }
    value
}

/// Move every embedded schema's `$defs` to `components.schemas` and point
/// the `$ref`s there: inside an OpenAPI document `#` is the document root,
/// so `#/$defs/X` would not resolve where schemars put it.
fn hoist_defs(value: &mut Value, defs: &mut serde_json::Map<String, Value>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(found)) = map.remove("$defs") {
                for (name, mut def) in found {
                    hoist_defs(&mut def, defs);
                    defs.insert(name, def);
                }
            }
            if let Some(Value::String(reference)) = map.get_mut("$ref")
                && let Some(name) = reference.strip_prefix("#/$defs/")
            {
                *reference = format!("#/components/schemas/{name}");
            }
            map.values_mut().for_each(|v| hoist_defs(v, defs));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| hoist_defs(v, defs)),
        _ => {}
    }
}

/// The POST operation of the route for `tool`; its scope comes from the
/// same rule the routes enforce.
fn operation<Req: JsonSchema, Res: JsonSchema>(summary: &str, tool: &str) -> Value {
    let scope = Access::scope_for(tool);
    json!({
        "post": {
            "summary": summary,
            "description": format!("Needs the `{scope}` scope."),
            "requestBody": {"required": true, "content": {"application/json": {"schema": schema::<Req>()}}},
            "responses": responses::<Res>(),
        }
    })
}

fn responses<Res: JsonSchema>() -> Value {
    let error = json!({"content": {"application/json": {"schema": schema::<ErrorBody>()}}});
    json!({
        "200": {"description": "The tool's result (as the MCP tool's structuredContent).",
                "content": {"application/json": {"schema": schema::<Res>()}}},
        "400": {"description": "INVALID_INPUT, INVALID_PATH, INVALID_COMPONENT_TYPE", "content": error["content"]},
        "401": {"description": "Missing or unknown bearer token", "content": error["content"]},
        "403": {"description": "ACCESS_DENIED (scope), PATH_OUTSIDE_SKILL, Host not allowed", "content": error["content"]},
        "404": {"description": "SKILL_NOT_FOUND, FILE_NOT_FOUND, COMPONENT_NOT_FOUND, REVISION_NOT_FOUND", "content": error["content"]},
        "409": {"description": "SKILL_DISABLED, VERSION_CONFLICT", "content": error["content"]},
        "413": {"description": "Request body or file too large", "content": error["content"]},
        "429": {"description": "RESOURCE_EXHAUSTED: rate limit or no run slot", "content": error["content"]},
        "503": {"description": "SANDBOX_UNAVAILABLE", "content": error["content"]},
    })
}

/// The whole document.
pub fn document() -> Value {
    let mut list = operation::<ListRequest, SkillList>("List the available skills", "skill_list");
    list["get"] = json!({
        "summary": "List the available skills",
        "description": format!("Needs the `{}` scope.", Access::scope_for("skill_list")),
        "parameters": [{"name": "include_disabled", "in": "query", "schema": {"type": "boolean"}}],
        "responses": responses::<SkillList>(),
    });
    let mut document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "skillhost",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "REST compatibility routes over the same core as the MCP tools (/mcp). Bodies equal the MCP tools' arguments and structuredContent; errors are {error: {kind, message}}.",
        },
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": {
            "/tools/skill_list": list,
            "/tools/skill_load": operation::<LoadRequest, LoadedSkill>("Load a skill's instructions and file index", "skill_load"),
            "/tools/skill_read": operation::<ReadRequest, FileContent>("Read one related file of a skill", "skill_read"),
            "/tools/skill_run": operation::<RunRequest, Envelope>("Run a component; a failed run is a 200 with status failed in the envelope", "skill_run"),
            "/tools/skill_install": operation::<InstallRequest, Installed>("Install or upgrade a skill in the managed store", "skill_install"),
            "/tools/skill_remove": operation::<ChangeRequest, StoredSkill>("Remove an installed skill", "skill_remove"),
            "/tools/skill_enable": operation::<ChangeRequest, StoredSkill>("Enable an installed skill", "skill_enable"),
            "/tools/skill_disable": operation::<ChangeRequest, StoredSkill>("Disable an installed skill", "skill_disable"),
            "/tools/skill_config_set": operation::<ConfigSetRequest, StoredSkill>("Set a config value", "skill_config_set"),
            "/tools/skill_revisions": operation::<RevisionsRequest, StoredSkill>("An installed skill's revisions", "skill_revisions"),
            "/tools/skill_activate": operation::<ActivateRequest, StoredSkill>("Make a kept revision active", "skill_activate"),
        },
    });
    let mut defs = serde_json::Map::new();
    hoist_defs(&mut document["paths"], &mut defs);
    document["components"]["schemas"] = Value::Object(defs);
    document
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    out.push(r);
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn every_reference_resolves_inside_the_document() {
        let doc = document();
        let mut found = Vec::new();
        refs(&doc, &mut found);
        assert!(!found.is_empty(), "the envelope schema uses definitions");
        for reference in found {
            let pointer = reference
                .strip_prefix('#')
                .unwrap_or_else(|| panic!("external ref {reference}"));
            assert!(
                doc.pointer(pointer).is_some(),
                "{reference} does not resolve"
            );
        }
        assert!(!doc.to_string().contains("$defs"));
    }
}
