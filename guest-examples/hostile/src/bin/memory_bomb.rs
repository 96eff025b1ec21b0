//! Allocates 1 MiB at a time and touches it, forever: only the memory limit stops it.
fn main() {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut block = vec![0u8; 1024 * 1024];
        block[0] = 1;
        hoard.push(std::hint::black_box(block));
    }
}
