//! Loops forever without yielding: only fuel or the wall-clock deadline stop it.
fn main() {
    let mut x: u64 = 0;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}
