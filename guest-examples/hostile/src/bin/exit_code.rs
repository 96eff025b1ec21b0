//! Exits with the code given as `{"code": N}` after writing to stderr.
//! (WASI p2 reports only success or failure: a host sees any non-zero code as 1.)
use std::io::Read;

fn main() {
    let mut raw = String::new();
    std::io::stdin().read_to_string(&mut raw).expect("read stdin");
    let code = raw
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    eprintln!("exiting with {code}");
    std::process::exit(code);
}
