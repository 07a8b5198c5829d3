//! End-to-end tests of the real processes (runner, CLI, provisioners) against
//! the local stack, one test binary: each linked binary carries the whole SDK
//! (about 120 MB), and eight of them took CI's disk. nextest still runs
//! every test in its own process, so a test sees no other test's state.

mod actions;
mod agent;
mod artifacts;
mod aws_provisioner;
mod chaos;
mod logs;
mod operator_cli;
mod provisioners;
mod push;
mod support;
mod tools;
mod workflows;
