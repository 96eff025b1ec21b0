//! Naive recursive Fibonacci of `{"n": N}` from stdin: CPU-bound and
//! call-heavy, the worst case for fuel and epoch checks. Prints `{"fib": F}`.
use std::io::Read;

fn fib(n: u64) -> u64 {
    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
}

fn main() {
    let mut raw = String::new();
    std::io::stdin().read_to_string(&mut raw).expect("read stdin");
    let n = raw
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    println!("{{\"fib\": {}}}", fib(std::hint::black_box(n)));
}
