//! Read a file from the skill's declared `data` directory (preopened
//! read-only by the host) and summarise it: `{"file"}` in,
//! `{"file", "bytes", "lines", "first_line"}` out.
use std::io::Read;

use serde_json::{Value, json};

fn main() {
    let mut raw = String::new();
    std::io::stdin().read_to_string(&mut raw).expect("read stdin");
    let input: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
    let file = input.get("file").and_then(Value::as_str).unwrap_or("table.csv");
    let path = format!("data/{file}");
    match std::fs::read_to_string(&path) {
        Ok(text) => println!(
            "{}",
            json!({
                "file": path,
                "bytes": text.len(),
                "lines": text.lines().count(),
                "first_line": text.lines().next().unwrap_or(""),
            })
        ),
        Err(error) => {
            eprintln!("cannot read {path}: {error}");
            std::process::exit(1);
        }
    }
}
