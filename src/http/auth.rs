//! Bearer tokens with scopes, read from a file (never from the command
//! line), and a per-token rate limit.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::access::Access;
use crate::skill::files::hex;

/// The token file: `{"tokens": [{"name", "token" | "sha256", "scopes", "rate_per_minute"?}]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    tokens: Vec<TokenEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    /// Shown in logs and metrics, never the token itself.
    name: String,
    /// The token in clear (keep the file private), or
    #[serde(default)]
    token: Option<String>,
    /// its sha256 in hex.
    #[serde(default)]
    sha256: Option<String>,
    scopes: Vec<Scope>,
    /// Requests per minute (default 600).
    #[serde(default)]
    rate_per_minute: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Scope {
    Read,
    Execute,
    Write,
}

/// One configured token.
#[derive(Debug)]
pub struct Token {
    pub name: String,
    digest: [u8; 32],
    pub access: Access,
    per_minute: u32,
}

/// The configured tokens and their rate-limit buckets.
#[derive(Debug)]
pub struct Tokens {
    tokens: Vec<Token>,
    buckets: Mutex<HashMap<String, Bucket>>,
}

#[derive(Debug)]
struct Bucket {
    available: f64,
    at: Instant,
}

impl Tokens {
    /// Load a token file; errors name the file and the problem.
    pub fn load(path: &Path) -> Result<Tokens, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
        let file: TokenFile = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a valid token file: {e}", path.display()))?;
        if file.tokens.is_empty() {
            return Err(format!("{} lists no tokens", path.display()));
        }
        if file.tokens.iter().any(|t| t.token.is_some()) {
            warn_if_shared(path);
        }
        let mut tokens: Vec<Token> = Vec::new();
        for entry in file.tokens {
            if tokens.iter().any(|t| t.name == entry.name) {
                return Err(format!(
                    "{}: the token name `{}` is used twice (names key the rate limits)",
                    path.display(),
                    entry.name
                ));
            }
            let digest = match (&entry.token, &entry.sha256) {
                (Some(token), None) if token.len() >= 16 => Sha256::digest(token.as_bytes()).into(),
                (Some(_), None) => {
                    return Err(format!(
                        "token `{}` is shorter than 16 characters",
                        entry.name
                    ));
                }
                (None, Some(hash)) => parse_hex(hash).ok_or_else(|| {
                    format!("token `{}`: sha256 must be 64 hex digits", entry.name)
                })?,
                _ => {
                    return Err(format!(
                        "token `{}` needs exactly one of `token` or `sha256`",
                        entry.name
                    ));
                }
            };
            let has = |scope| entry.scopes.contains(&scope);
            tokens.push(Token {
                access: Access {
                    read: has(Scope::Read),
                    execute: has(Scope::Execute),
                    write: has(Scope::Write),
                },
                name: entry.name,
                digest,
                per_minute: entry.rate_per_minute.unwrap_or(600).max(1),
            });
        }
        Ok(Tokens {
            tokens,
            buckets: Mutex::new(HashMap::new()),
        })
    }

    /// The token a bearer value belongs to (constant-time comparison).
    pub fn find(&self, bearer: &str) -> Option<&Token> {
        let digest: [u8; 32] = Sha256::digest(bearer.as_bytes()).into();
        self.tokens
            .iter()
            .find(|t| constant_time_eq(&t.digest, &digest))
    }

    /// Take one request from the token's bucket; false when it is empty.
    pub fn allow(&self, token: &Token) -> bool {
        let rate = token.per_minute as f64 / 60.0;
        let burst = (token.per_minute as f64 / 6.0).max(10.0);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let bucket = buckets.entry(token.name.clone()).or_insert(Bucket {
            available: burst,
            at: now,
        });
        bucket.available =
            (bucket.available + now.duration_since(bucket.at).as_secs_f64() * rate).min(burst);
        bucket.at = now;
        if bucket.available >= 1.0 {
            bucket.available -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Clear tokens in a file others can read are everyone's tokens: say so.
fn warn_if_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            "{} holds clear tokens and is readable by other users (mode {:o}); chmod 600 it or store sha256 digests instead",
            path.display(),
            meta.permissions().mode() & 0o777
        );
    }
}

fn parse_hex(text: &str) -> Option<[u8; 32]> {
    let text = text.trim().trim_start_matches("sha256:");
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, chunk) in text.as_bytes().chunks(2).enumerate() {
        out[i] = u8::from_str_radix(std::str::from_utf8(chunk).ok()?, 16).ok()?;
    }
    Some(out)
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// sha256 hex of a token, for writing `sha256` entries.
pub fn token_digest(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_load_match_and_rate_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let hashed = token_digest("another-long-token-value");
        std::fs::write(
            &path,
            format!(r#"{{"tokens": [
                {{"name": "ci", "token": "a-long-enough-token", "scopes": ["read", "execute"], "rate_per_minute": 60}},
                {{"name": "admin", "sha256": "{hashed}", "scopes": ["read", "execute", "write"]}}
            ]}}"#),
        )
        .unwrap();
        let tokens = Tokens::load(&path).unwrap();
        let ci = tokens.find("a-long-enough-token").unwrap();
        assert_eq!(
            (ci.access.read, ci.access.execute, ci.access.write),
            (true, true, false)
        );
        assert!(
            tokens
                .find("another-long-token-value")
                .unwrap()
                .access
                .write
        );
        assert!(tokens.find("wrong").is_none());
        let allowed = (0..20).filter(|_| tokens.allow(ci)).count();
        assert_eq!(allowed, 10, "burst of 10 at 60/min");
        std::fs::write(
            &path,
            r#"{"tokens": [{"name": "x", "token": "short", "scopes": []}]}"#,
        )
        .unwrap();
        assert!(Tokens::load(&path).unwrap_err().contains("shorter"));
    }
}
