//! A permission probe: tries one thing the host may or may not allow and
//! reports what happened instead of failing. Input:
//! `{"op": "read" | "write" | "list" | "env" | "connect", "path"?, "key"?, "addr"?, "text"?}`.
//! Output: `{"op", "ok": bool, "detail": "..."}`.
use std::io::{Read, Write};

use serde_json::{Value, json};

fn main() {
    let mut raw = String::new();
    std::io::stdin().read_to_string(&mut raw).expect("read stdin");
    let input: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
    let arg = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let op = arg("op");
    let result: Result<String, String> = match op.as_str() {
        "read" => std::fs::read_to_string(arg("path")).map_err(|e| e.to_string()),
        "write" => std::fs::File::create(arg("path"))
            .and_then(|mut f| f.write_all(arg("text").as_bytes()))
            .map(|()| "written".to_string())
            .map_err(|e| e.to_string()),
        "list" => std::fs::read_dir(arg("path"))
            .map(|entries| {
                let mut names: Vec<String> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                names.join(",")
            })
            .map_err(|e| e.to_string()),
        "env" => {
            let key = arg("key");
            let all: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
            std::env::var(&key)
                .map_err(|_| format!("not set; visible keys: [{}]", all.join(",")))
        }
        "connect" => std::net::TcpStream::connect(arg("addr"))
            .map(|_| "connected".to_string())
            .map_err(|e| e.to_string()),
        other => Err(format!("unknown op `{other}`")),
    };
    let (ok, detail) = match result {
        Ok(detail) => (true, detail),
        Err(detail) => (false, detail),
    };
    println!("{}", json!({"op": op, "ok": ok, "detail": detail}));
}
