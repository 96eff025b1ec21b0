//! Count the words, lines and characters of `{"text": "..."}` read from stdin;
//! print `{"words", "lines", "chars", "top": [[word, count], ...]}`.
use std::collections::HashMap;
use std::io::Read;

use serde_json::{Value, json};

fn main() {
    let mut raw = String::new();
    std::io::stdin().read_to_string(&mut raw).expect("read stdin");
    let input: Value = match serde_json::from_str(&raw) {
        Ok(value) => value,
        Err(error) => {
            eprintln!("input is not JSON: {error}");
            std::process::exit(2);
        }
    };
    let Some(text) = input.get("text").and_then(Value::as_str) else {
        eprintln!("input needs a string field `text`");
        std::process::exit(2);
    };
    let mut counts: HashMap<String, u64> = HashMap::new();
    for word in text.split_whitespace() {
        let word: String = word
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '\'')
            .flat_map(char::to_lowercase)
            .collect();
        if !word.is_empty() {
            *counts.entry(word).or_default() += 1;
        }
    }
    let mut top: Vec<(String, u64)> = counts.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    top.truncate(3);
    eprintln!("counted {} words", text.split_whitespace().count());
    let output = json!({
        "words": text.split_whitespace().count(),
        "lines": text.lines().count(),
        "chars": text.chars().count(),
        "top": top,
    });
    println!("{output}");
}
