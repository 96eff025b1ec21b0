//! Writes to stdout and stderr forever: the host must cap what it keeps and
//! stop the guest at its deadline, without running out of memory.
use std::io::Write;

fn main() {
    let line = [b'x'; 4096];
    let mut out = std::io::stdout().lock();
    loop {
        if out.write_all(&line).is_err() {
            // A host that closes the pipe would end the flood here; ours keeps draining.
            std::process::exit(3);
        }
        let _ = std::io::stderr().write_all(b"flooding stderr\n");
    }
}
