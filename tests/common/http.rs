//! `skillhost serve --http` as a child process on a free loopback port, and
//! small blocking HTTP helpers for the REST routes.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Fixture;

/// A running HTTP server; killed when dropped.
pub struct Server {
    child: Child,
    pub addr: String,
    /// Everything the server wrote to stderr so far.
    pub stderr: Arc<Mutex<String>>,
}

impl Server {
    /// `skillhost serve --http 127.0.0.1:0 <extra>`; waits until it listens.
    pub fn start(fx: &Fixture, extra: &[&str]) -> Server {
        let mut args = vec!["serve", "--http", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut child = fx
            .command(&args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start skillhost serve --http");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (found, addr) = mpsc::channel();
        let reader = BufReader::new(child.stderr.take().unwrap());
        let log = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in reader.lines().map_while(Result::ok) {
                if let Some(at) = line.find("addr=") {
                    let rest = &line[at + 5..];
                    let _ = found.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let addr = match addr.recv_timeout(Duration::from_secs(60)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "the server did not start listening:\n{}",
                    stderr.lock().unwrap()
                );
            }
        };
        Server {
            child,
            addr,
            stderr,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send SIGTERM (a graceful shutdown).
    pub fn terminate(&self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Wait for the process to exit (at most `limit`).
    pub fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking client (no overall timeout unless given).
pub fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

/// A response's status and JSON body (`null` when the body is not JSON).
pub fn reply(response: reqwest::blocking::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// POST `body` to `path` with an optional bearer token.
pub fn post(server: &Server, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = client().post(server.url(path)).json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    reply(request.send().unwrap())
}

/// GET `path` with an optional bearer token.
pub fn get(server: &Server, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut request = client().get(server.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    reply(request.send().unwrap())
}

/// GET `path` as text.
pub fn get_text(server: &Server, path: &str, token: Option<&str>) -> (u16, String) {
    let mut request = client().get(server.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().unwrap();
    (response.status().as_u16(), response.text().unwrap())
}

/// The error kind of an error body, asserting its shape.
pub fn kind(body: &Value) -> &str {
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "not an error body: {body}"
    );
    body["error"]["kind"].as_str().unwrap()
}

/// Write a token file with `(name, token, scopes, rate_per_minute)` entries.
pub fn token_file(fx: &Fixture, tokens: &[(&str, &str, &[&str], Option<u32>)]) -> String {
    let entries: Vec<Value> = tokens
        .iter()
        .map(|(name, token, scopes, rate)| {
            let mut entry = json!({"name": name, "token": token, "scopes": scopes});
            if let Some(rate) = rate {
                entry["rate_per_minute"] = json!(rate);
            }
            entry
        })
        .collect();
    let path = fx.path().join("tokens.json");
    std::fs::write(&path, json!({ "tokens": entries }).to_string()).unwrap();
    path.to_str().unwrap().to_string()
}

/// One Prometheus sample: name, labels, value.
pub type Sample = (String, Vec<(String, String)>, f64);

/// Parse the Prometheus text format strictly enough to catch malformed
/// output: every line is a comment (`# HELP`/`# TYPE`) or
/// `name{label="value",...} number`, and every sample's family has a TYPE.
pub fn parse_prometheus(text: &str) -> Vec<Sample> {
    let mut typed = std::collections::HashSet::new();
    let mut samples = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut words = comment.split_whitespace();
            let directive = words.next().unwrap();
            let name = words.next().expect("a metric name after HELP/TYPE");
            if directive == "TYPE" {
                let kind = words.next().unwrap();
                assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                    "{line}"
                );
                typed.insert(name.to_string());
            } else {
                assert_eq!(directive, "HELP", "{line}");
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, Vec::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("{line}"));
                let mut labels = Vec::new();
                for pair in split_labels(body) {
                    let (key, quoted) = pair.split_once('=').unwrap_or_else(|| panic!("{line}"));
                    let value = quoted
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .unwrap_or_else(|| panic!("unquoted label in {line}"));
                    labels.push((key.to_string(), value.to_string()));
                }
                (name, labels)
            }
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "{line}"
        );
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| typed.contains(*f)))
            .unwrap_or(name);
        assert!(typed.contains(family), "no TYPE for {name}");
        samples.push((name.to_string(), labels, value));
    }
    samples
}

fn split_labels(body: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < body.len() {
        parts.push(&body[start..]);
    }
    parts
}

/// The value of the sample `name` whose labels include all of `labels` (0 when absent).
pub fn sample(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, v)| v)
        .sum()
}
