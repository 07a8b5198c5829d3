//! What `baton secret` and `baton var` share: both keep a workspace's
//! values under names, so their commands name a workspace, and one value
//! by its name, the same way.

use clap::Args;

/// The workspace a command lists.
#[derive(Debug, Args)]
pub(super) struct InWorkspace {
    #[arg(long, env = "BATON_WORKSPACE")]
    pub(super) workspace: String,
}

/// One value of a workspace, by name.
#[derive(Debug, Args)]
pub(super) struct Named {
    #[arg(long, env = "BATON_WORKSPACE")]
    pub(super) workspace: String,
    pub(super) name: String,
}
