//! The pipelines a definition calls (a job's `uses:`, behaviour.md §8
//! "Reusable workflows"), read from the workspace's own pipelines: the
//! domain expands the calls (`workflows::reusable`), this only fetches
//! what it says is missing. A workspace calls only its own pipelines: the
//! reads are under its partition, so another's cannot be named.

use baton_domain::error::ApiError;
use baton_domain::workflows::reusable::{missing_calls, CalledWorkflows, MAX_CALL_DEPTH};
use baton_store::pipelines::PipelineItem;
use baton_store::Store;

/// The called pipelines of `definition`, its called ones' calls included
/// (one round of reads a level of nesting). A name the workspace has no
/// pipeline for stays missing: the parse that follows refuses the call
/// naming it.
pub async fn read(store: &Store, workspace_id: &str, definition: &str) -> Result<CalledWorkflows, ApiError> {
    let mut called = CalledWorkflows::none();
    for _ in 0..MAX_CALL_DEPTH {
        let mut found = false;
        for name in missing_calls(definition, &called) {
            if let Some(item) = store.pipeline(workspace_id, &name).await? {
                called.insert(name, item.definition);
                found = true;
            }
        }
        if !found {
            break;
        }
    }
    Ok(called)
}

/// The same from pipelines already read (a hook's delivery reads them all).
pub fn among(pipelines: &[PipelineItem], definition: &str) -> CalledWorkflows {
    let mut called = CalledWorkflows::none();
    loop {
        let mut found = false;
        for name in missing_calls(definition, &called) {
            if let Some(item) = pipelines.iter().find(|p| p.name == name) {
                called.insert(name, item.definition.clone());
                found = true;
            }
        }
        if !found {
            return called;
        }
    }
}
