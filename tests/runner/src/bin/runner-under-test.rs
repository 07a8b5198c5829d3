//! `baton-runner`, built for the end-to-end tests.

fn main() -> std::process::ExitCode {
    baton_runner::agent_cli::main()
}
