//! `baton`: the operator CLI (`baton_runner::operator_cli`).

fn main() -> std::process::ExitCode {
    baton_runner::operator_cli::main()
}
