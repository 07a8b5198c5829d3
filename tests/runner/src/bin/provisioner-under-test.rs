//! `baton-provisioner`, built for the end-to-end tests.

fn main() -> std::process::ExitCode {
    baton_runner::provisioner_cli::main()
}
