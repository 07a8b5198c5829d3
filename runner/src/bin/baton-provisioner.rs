//! `baton-provisioner`: the reference provisioners (`baton_runner::provisioner_cli`).

fn main() -> std::process::ExitCode {
    baton_runner::provisioner_cli::main()
}
