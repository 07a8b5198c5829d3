//! Helpers of the workflows tests: the jobs the orchestrator queued, and a
//! simulated runner that writes the runners context's facts through the
//! real pipeline (outbox → stream → relay → bus → queue → subscriber), as
//! the runners side would.

#![allow(dead_code)]

use std::collections::HashMap;

use baton_api::facts::{
    Fact, FactDetail, JobClaimed, JobCompleted, JobExecutionQueued, JobLeaseExpired, JobOutcome, LeaseRef, StepResult,
    StepStatus,
};
use baton_tests::runners::Queued;
use baton_tests::runs::Identified;
use baton_tests::{TestStack, WAIT};
use serde_json::json;
use uuid::Uuid;

/// A stack whose timeout minute lasts `seconds`.
pub async fn start_with_minute(seconds: u64) -> TestStack {
    TestStack::start_with(|_| {}, HashMap::from([("BATON_TIMEOUT_MINUTE_S".to_string(), seconds.to_string())])).await
}

/// Waits for the `job_execution.queued` fact of job `key` in `attempt`, and
/// reads the job's spec the orchestrator wrote with it.
pub async fn queued(stack: &TestStack, run_id: &str, attempt: u32, key: &str) -> Queued {
    let detail = stack
        .wait_fact(JobExecutionQueued::DETAIL_TYPE, WAIT, |d| {
            d["run_id"] == run_id && d["attempt"] == attempt && d["job"]["key"] == key
        })
        .await;
    let fact: Fact<JobExecutionQueued> = serde_json::from_value(detail).expect("a queued fact");
    let spec = stack.store.job_spec(fact.detail.job_execution_id).await.unwrap().expect("the job's spec");
    Queued { fact, spec }
}

/// The queued facts of a run so far.
pub fn queued_keys(stack: &TestStack, run_id: &str) -> Vec<String> {
    stack
        .facts(JobExecutionQueued::DETAIL_TYPE)
        .into_iter()
        .filter(|d| d["run_id"] == run_id)
        .map(|d| d["job"]["key"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Writes a runners fact through the outbox, as the runners side does.
pub async fn publish<D: FactDetail>(stack: &TestStack, ws: &str, detail: D) {
    stack.publish(&Fact::new(ws, chrono::Utc::now(), detail)).await;
}

/// A simulated runner holding one execution.
pub struct Runner {
    pub ws: String,
    pub lease: LeaseRef,
    pub step_ids: Vec<Uuid>,
    pub key: String,
    /// When it claims (its outcome facts carry it, as a real one's do).
    pub claimed_at: chrono::DateTime<chrono::Utc>,
}

impl Runner {
    pub fn for_queued(ws: &str, queued: &Queued) -> Self {
        Self {
            ws: ws.to_string(),
            lease: LeaseRef {
                run_id: queued.detail.run_id,
                attempt: queued.detail.attempt,
                job_id: queued.detail.job_id,
                job_execution_id: queued.detail.job_execution_id,
                session_id: Uuid::now_v7(),
                epoch: 1,
            },
            step_ids: queued.spec.work.steps.iter().map(|s| s.id).collect(),
            key: queued.detail.job.key.clone(),
            claimed_at: chrono::Utc::now(),
        }
    }

    pub fn claimed(&self, at: chrono::DateTime<chrono::Utc>) -> JobClaimed {
        JobClaimed { lease: self.lease.clone(), claimed_at: at }
    }

    pub fn steps(&self, status: StepStatus) -> Vec<StepResult> {
        self.step_ids
            .iter()
            .map(|id| StepResult {
                id: *id,
                status,
                soft_failed: false,
                exit_code: match status {
                    StepStatus::Succeeded => Some(0),
                    StepStatus::Failed => Some(1),
                    _ => None,
                },
                started_at: None,
                finished_at: None,
            })
            .collect()
    }

    pub fn completed(&self, status: JobOutcome) -> JobCompleted {
        let step = if status == JobOutcome::Succeeded { StepStatus::Succeeded } else { StepStatus::Failed };
        JobCompleted {
            lease: self.lease.clone(),
            status,
            steps: self.steps(step),
            outputs: [("job".to_string(), json!(self.key))].into_iter().collect(),
            message: None,
            completed_at: chrono::Utc::now(),
            claimed_at: Some(self.claimed_at),
            settled_by: Default::default(),
        }
    }

    pub fn lease_expired(&self, steps: Vec<StepResult>) -> JobLeaseExpired {
        JobLeaseExpired {
            lease: self.lease.clone(),
            expired_at: chrono::Utc::now(),
            steps,
            claimed_at: Some(self.claimed_at),
        }
    }

    /// Claims the execution as the claim transaction does on the runners'
    /// side (its pending item gone, its record leased with the claim's
    /// instant and session; no lease item: nothing here heartbeats or is
    /// reaped), and publishes the claimed fact.
    pub async fn claim(&self, stack: &TestStack) {
        use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
        let store = &stack.store;
        let id = self.lease.job_execution_id;
        let key = [
            ("pk".to_string(), AttributeValue::S(format!("EXEC#{id}"))),
            ("sk".to_string(), AttributeValue::S("RUNNER".into())),
        ];
        let old = store
            .client
            .update_item()
            .table_name(&store.table)
            .set_key(Some(key.into()))
            .update_expression(
                "SET #status = :leased, epoch = :e, session_id = :s, claimed_at = :at, token_hash = :h, steps = :none \
                 REMOVE pending_pk, pending_sk",
            )
            .condition_expression("#status = :pending")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":leased", AttributeValue::S("leased".into()))
            .expression_attribute_values(":pending", AttributeValue::S("pending".into()))
            .expression_attribute_values(":e", AttributeValue::N(self.lease.epoch.to_string()))
            .expression_attribute_values(":s", AttributeValue::S(self.lease.session_id.to_string()))
            .expression_attribute_values(":at", AttributeValue::S(baton_domain::time::format(self.claimed_at)))
            .expression_attribute_values(":h", AttributeValue::S("simulated".into()))
            .expression_attribute_values(":none", AttributeValue::M(Default::default()))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .expect("the simulated runner claims a queued execution")
            .attributes
            .unwrap_or_default();
        if let (Some(AttributeValue::S(pk)), Some(AttributeValue::S(sk))) =
            (old.get("pending_pk"), old.get("pending_sk"))
        {
            let pending = store.client.delete_item().table_name(&store.table).key("pk", AttributeValue::S(pk.clone()));
            pending.key("sk", AttributeValue::S(sk.clone())).send().await.expect("pending item deleted");
        }
        publish(stack, &self.ws, self.claimed(self.claimed_at)).await;
    }

    pub async fn complete(&self, stack: &TestStack, status: JobOutcome) {
        publish(stack, &self.ws, self.completed(status)).await;
    }
}

/// Claims and completes job `key` of `attempt` once it is queued.
pub async fn run_job(stack: &TestStack, ws: &str, run_id: &str, attempt: u32, key: &str, status: JobOutcome) {
    let queued = queued(stack, run_id, attempt, key).await;
    let runner = Runner::for_queued(ws, &queued);
    runner.claim(stack).await;
    runner.complete(stack, status).await;
}

/// Waits until no more facts of `detail_type` for `run_id` arrive than a
/// later sentinel proves: creates a sentinel run and waits for its fact, so
/// everything written before it has been delivered.
pub async fn flush_pipeline(stack: &TestStack, ws: &str) {
    let id = stack
        .create_run(ws, "name: sentinel\njobs:\n  s:\n    runs-on: linux\n    steps: [{run: 'true'}]\n")
        .await
        .id();
    stack.wait_fact(baton_api::facts::RunAttemptCreated::DETAIL_TYPE, WAIT, |d| d["run_id"] == id.as_str()).await;
}

/// How many facts of `detail_type` are about `run_id`.
pub fn count_facts(stack: &TestStack, detail_type: &str, run_id: &str) -> usize {
    stack.facts(detail_type).iter().filter(|d| d["run_id"] == run_id).count()
}
