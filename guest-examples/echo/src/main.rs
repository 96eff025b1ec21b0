//! The smallest useful command component: copies its JSON input from stdin to
//! stdout unchanged. Used by the benchmarks as the trivial call.
use std::io::{Read, Write};

fn main() {
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).expect("read stdin");
    std::io::stdout().write_all(&input).expect("write stdout");
}
