//! JSON Schema checks of a component's input and output, with compiled
//! validators cached per skill content and component. Schemas cannot fetch
//! anything: remote and file `$ref`s are not resolved.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Validators kept before the cache is cleared.
const MAX_CACHED: usize = 512;

/// Which schema of a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Which {
    Input,
    Output,
}

impl Which {
    fn label(self) -> &'static str {
        match self {
            Which::Input => "input_schema",
            Which::Output => "output_schema",
        }
    }
}

type Key = ([u8; 32], String, Which);

#[derive(Default)]
pub(crate) struct SchemaCache {
    validators: Mutex<HashMap<Key, Arc<jsonschema::Validator>>>,
}

/// Why a check failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SchemaError {
    /// The schema itself does not compile.
    BadSchema(String),
    /// The instance does not match; the message names the JSON pointer.
    Mismatch(String),
}

impl SchemaCache {
    /// Check `instance` against `schema`, declared by `component` of the
    /// skill whose content digest is `skill_digest`.
    pub(crate) fn check(
        &self,
        skill_digest: [u8; 32],
        component: &str,
        which: Which,
        schema: &Value,
        instance: &Value,
    ) -> Result<(), SchemaError> {
        let key = (skill_digest, component.to_string(), which);
        let cached = self.lock().get(&key).cloned();
        let validator = match cached {
            Some(validator) => validator,
            None => {
                let validator = Arc::new(jsonschema::validator_for(schema).map_err(|e| {
                    SchemaError::BadSchema(format!(
                        "the {} of component `{component}` is not a valid JSON Schema: {e}",
                        which.label()
                    ))
                })?);
                let mut map = self.lock();
                if map.len() >= MAX_CACHED {
                    map.clear();
                }
                map.insert(key, Arc::clone(&validator));
                validator
            }
        };
        let problems: Vec<String> = validator
            .iter_errors(instance)
            .take(5)
            .map(|e| {
                let pointer = e.instance_path().to_string();
                let at = if pointer.is_empty() {
                    "/".to_string()
                } else {
                    pointer
                };
                format!("at {at}: {e}")
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SchemaError::Mismatch(problems.join("; ")))
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<jsonschema::Validator>>> {
        self.validators.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mismatches_name_the_pointer_and_bad_schemas_are_told_apart() {
        let cache = SchemaCache::default();
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        assert_eq!(
            cache.check([0; 32], "c", Which::Input, &schema, &json!({"n": 1})),
            Ok(())
        );
        let Err(SchemaError::Mismatch(message)) =
            cache.check([0; 32], "c", Which::Input, &schema, &json!({"n": "x"}))
        else {
            panic!("expected a mismatch");
        };
        assert!(message.starts_with("at /n:"), "{message}");
        let bad = json!({"type": "no-such-type"});
        assert!(matches!(
            cache.check([1; 32], "c", Which::Output, &bad, &json!({})),
            Err(SchemaError::BadSchema(_))
        ));
    }

    #[test]
    fn file_refs_are_not_followed() {
        let cache = SchemaCache::default();
        let schema = json!({"$ref": "file:///etc/passwd"});
        assert!(
            cache
                .check([2; 32], "c", Which::Input, &schema, &json!({}))
                .is_err()
        );
    }
}
