//! `baton`, built for the end-to-end tests.

fn main() -> std::process::ExitCode {
    baton_runner::operator_cli::main()
}
