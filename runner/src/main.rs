//! `baton-runner`: the reference runner agent (`baton_runner::agent_cli`).

fn main() -> std::process::ExitCode {
    baton_runner::agent_cli::main()
}
