//! The values a job's expressions see when it is due to start: the run's
//! inputs and its needs' results and outputs, as far as they have been read.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use super::changes::MissingData;
use super::state::AttemptState;
use crate::workflows::definition::{JobDefinition, WorkflowDefinition};
use crate::workflows::matrix;
use crate::workflows::references::{self, ExpressionData, JobScope, NeedState};
use crate::workflows::status::JobStatus;

/// A leg of a matrix job another job needs, as its expressions see it.
struct LegNeed<'a> {
    key: &'a str,
    status: JobStatus,
    soft_failed: bool,
    outputs: Option<&'a BTreeMap<String, String>>,
}

/// A matrix job's outputs as its dependants read them: each output name's
/// value is a JSON object of leg → that leg's value (legs that did not set
/// it are left out), where GitHub keeps only the last leg's.
fn matrix_outputs(legs: &[LegNeed<'_>]) -> BTreeMap<String, String> {
    let mut by_name: BTreeMap<String, serde_json::Map<String, serde_json::Value>> = BTreeMap::new();
    for leg in legs {
        for (name, value) in leg.outputs.iter().flat_map(|outputs| outputs.iter()) {
            by_name
                .entry(name.clone())
                .or_default()
                .insert(leg.key.to_string(), serde_json::Value::String(value.clone()));
        }
    }
    by_name.into_iter().map(|(name, values)| (name, serde_json::Value::Object(values).to_string())).collect()
}

impl AttemptState {
    /// The values `job`'s expressions see, or `None` (noting what to read in
    /// `missing`) while the run's inputs or a need's outputs are unread.
    pub(super) fn scope_for<'a>(
        &'a self,
        definition: &WorkflowDefinition,
        job: &'a JobDefinition,
        data: &'a ExpressionData,
        missing: &mut MissingData,
    ) -> Option<JobScope<'a>> {
        let (wants_inputs, outputs_of) = references::data_needed(definition, job);
        let mut complete = true;
        if wants_inputs && (data.inputs.is_none() || data.github.is_none()) {
            missing.run = true;
            complete = false;
        }
        let mut needs = HashMap::new();
        // The legs of the matrix jobs this job needs, gathered under their name.
        let mut legs: BTreeMap<&str, Vec<LegNeed<'_>>> = BTreeMap::new();
        for need in &job.needs {
            let Some(state) = self.jobs.iter().find(|j| &j.key == need) else { continue };
            let group = definition.job(need).and_then(|d| d.matrix.as_ref()).map(|leg| leg.job.as_str());
            let mut outputs = None;
            if outputs_of.contains(need) || group.is_some_and(|g| outputs_of.contains(g)) {
                // A carried-over need's outputs are its earlier execution's.
                if let Some(execution) = state.carried_from.or(state.execution.as_ref().map(|e| e.id)) {
                    match data.outputs.get(&execution) {
                        Some(found) => outputs = Some(found),
                        None => {
                            missing.outputs.push(execution);
                            complete = false;
                        }
                    }
                }
            }
            match group {
                Some(group) => legs.entry(group).or_default().push(LegNeed {
                    key: need,
                    status: state.status,
                    soft_failed: state.soft_failed,
                    outputs,
                }),
                None => {
                    let outputs = outputs.map(Cow::Borrowed);
                    needs.insert(
                        need.clone(),
                        NeedState { status: state.status, soft_failed: state.soft_failed, outputs },
                    );
                }
            }
        }
        if !complete {
            return None;
        }
        for (group, legs) in legs {
            let statuses: Vec<JobStatus> = legs.iter().map(|leg| leg.status).collect();
            let outputs = outputs_of.contains(group).then(|| matrix_outputs(&legs));
            needs.insert(
                group.to_string(),
                NeedState {
                    status: matrix::aggregate_status(&statuses),
                    soft_failed: legs.iter().any(|leg| leg.soft_failed),
                    outputs: outputs.map(Cow::Owned),
                },
            );
        }
        let mut env = definition.env.clone();
        env.extend(job.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        Some(JobScope {
            run_id: self.run_id,
            attempt: self.attempt,
            workspace_id: &self.workspace_id,
            job: &job.key,
            matrix: job.matrix.as_ref(),
            env,
            inputs: data.inputs.as_ref(),
            vars: data.vars.as_ref(),
            needs,
            event: None,
            github: data.github.as_ref(),
        })
    }
}
