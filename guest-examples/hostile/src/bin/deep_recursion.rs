//! Recurses without bound on the WebAssembly call stack: only the host's
//! stack limit stops it.
#[allow(unconditional_recursion)]
fn descend(depth: u64) -> u64 {
    descend(std::hint::black_box(depth + 1)).wrapping_add(depth)
}

fn main() {
    println!("{}", descend(0));
}
