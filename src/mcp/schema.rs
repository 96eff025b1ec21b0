//! Tool argument and schema plumbing shared by every tool.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::error::{ErrorKind, HostError};

/// Tool arguments whose parse error is kept instead of failing the call, so
/// that malformed arguments become an `INVALID_INPUT` tool error like every
/// other failure. Its JSON schema is exactly `T`'s.
pub struct Checked<T>(pub Result<T, HostError>);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Checked<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(Checked(T::deserialize(value).map_err(|e| {
            HostError::new(ErrorKind::InvalidInput, format!("invalid arguments: {e}"))
        })))
    }
}

impl<T: JsonSchema> JsonSchema for Checked<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

/// `format` values schemars emits for Rust integer and float types. They are
/// not JSON Schema formats; validators such as Ajv (used by TypeScript MCP
/// clients) warn about each of them, so they are removed.
const RUST_NUMBER_FORMATS: &[&str] = &[
    "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float",
    "double",
];

/// Remove the Rust-only `format` annotations from a schema, recursively.
pub fn strip_rust_formats(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| RUST_NUMBER_FORMATS.contains(&f))
            {
                map.remove("format");
            }
            map.values_mut().for_each(strip_rust_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_rust_formats),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strips_only_rust_number_formats() {
        let mut schema = json!({
            "properties": {
                "size": {"type": "integer", "format": "uint64", "minimum": 0},
                "when": {"type": "string", "format": "date-time"},
                "list": {"items": [{"format": "int32"}]}
            }
        });
        strip_rust_formats(&mut schema);
        assert_eq!(
            schema["properties"]["size"],
            json!({"type": "integer", "minimum": 0})
        );
        assert_eq!(schema["properties"]["when"]["format"], "date-time");
        assert_eq!(schema["properties"]["list"]["items"][0], json!({}));
    }

    #[test]
    fn bad_arguments_become_invalid_input() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Args {
            name: String,
        }
        let checked: Checked<Args> = serde_json::from_value(json!({"nom": 1})).unwrap();
        let error = checked.0.unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidInput);
        assert!(
            error.message.contains("missing field `name`"),
            "{}",
            error.message
        );
    }
}
