//! A typed skill component: exports `run(input) -> result<string, run-error>`
//! from the `skillhost:skill` world and uses the host's `log`, `config-get`
//! and `progress` services. Input `{"name": "..."}`; output
//! `{"message", "greeting_source"}`.

wit_bindgen::generate!({
    world: "skill",
    path: "../../wit",
});

use serde_json::{Value, json};
use skillhost::skill::host::{LogLevel, config_get, log, progress};

struct Greeter;

impl Guest for Greeter {
    fn run(input: String) -> Result<String, RunError> {
        let input: Value = serde_json::from_str(&input).map_err(|e| RunError {
            code: "bad-input".into(),
            message: format!("input is not JSON: {e}"),
        })?;
        let Some(name) = input.get("name").and_then(Value::as_str) else {
            return Err(RunError {
                code: "missing-name".into(),
                message: "input needs a string field `name`".into(),
            });
        };
        progress(0, Some(2), Some("choosing a greeting"));
        let (greeting, source) = match config_get("GREETING") {
            Some(greeting) => (greeting, "config"),
            None => ("Hello".to_string(), "default"),
        };
        log(LogLevel::Info, &format!("greeting {name} with {source} greeting"));
        progress(2, Some(2), Some("done"));
        Ok(json!({
            "message": format!("{greeting}, {name}!"),
            "greeting_source": source,
        })
        .to_string())
    }
}

export!(Greeter);
