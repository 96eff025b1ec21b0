fn main() {
    std::process::exit(skillhost::cli::run());
}
