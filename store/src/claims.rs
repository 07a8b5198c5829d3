//! `claim_next`: the claim use case (behaviour.md §4) over the queue items.
//!
//! Reads: the workspace's label sets, then the heads of the fitting ones in
//! parallel; writes: one transaction per attempt. A lost race falls through
//! to the next candidate (bounded by `runners::claim::MAX_ATTEMPTS`); on a
//! short window, through a fresh read (`runners::claim::MAX_REREADS`).
//!
//! The label sets of a workspace change rarely (a new set appears when a job
//! with new labels is first queued), so a function instance trusts a
//! non-empty list it read for `LABEL_SETS_TTL`: a warm claim, and an empty
//! poll on a drained queue, then read one query and no registry. A claim's
//! first look that finds nothing in a cached list asks the registry once
//! more: a runner nudged because a job with a brand-new label set became
//! claimable claims once and then waits for the next nudge, so a list that
//! predates the set would strand the job until its safety poll. Re-checks
//! of a long poll trust the cache.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

use super::keys::{claim_request_sk, lease_shard, session_pk, LEASE_SK};
use super::queue::ClaimAttempt;
use super::runner_items::{ClaimAnswer, LabelSet, LeaseItem, PendingItem, Session};
use super::{from_item, n, s, Store};
use crate::error::StoreError;
use crate::ItemHead;
use baton_api::facts::{Fact, JobClaimed, JobSpec};
use baton_domain::runners::claim::{attempt_order, first_read, next_read, oldest_first, passes_over, MAX_ATTEMPTS};
use baton_domain::runners::labels::is_subset;
use baton_domain::runners::lease::expiry_after_claim;
use baton_domain::runners::lease::LeaseConfig;
use baton_domain::tokens::{hash_token, new_lease_token, ClaimKey};

/// A won claim: the pending item that was taken, the job's spec, the lease
/// now held and its token (shown to the runner once; only its hash is
/// stored).
#[derive(Debug)]
pub struct Claimed {
    pub pending: PendingItem,
    pub spec: JobSpec,
    pub lease: LeaseItem,
    pub lease_token: String,
}

#[derive(Debug)]
pub enum ClaimOutcome {
    Claimed(Box<Claimed>),
    NothingToClaim,
    SessionExhausted,
}

/// The `type` of a claim's answer item that says it found nothing
/// ([`Store::answer_claim_empty`]).
const EMPTY_ANSWER_TYPE: &str = "claim_answer_empty";

/// How long a claim's answer is kept for its retries.
pub const CLAIM_ANSWER_TTL: chrono::Duration = chrono::Duration::days(1);

/// One look at the queue by a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimLook {
    /// The claim's id and its session's secret: what it takes is kept for
    /// its retries, under a lease token each try derives alike.
    pub request: Option<ClaimKey>,
    /// A claim's first look (not a long poll's re-check): an empty answer
    /// from a cached list of label sets is checked against the registry.
    pub first_look: bool,
}

/// Counters of one claim, for metrics and the benchmark.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ClaimStats {
    pub lost_races: u32,
    pub stale_dropped: u32,
}

/// How long a function instance trusts a workspace's label sets.
pub const LABEL_SETS_TTL: Duration = Duration::from_secs(1);

type LabelSetCache = Mutex<HashMap<String, (Instant, Arc<Vec<LabelSet>>)>>;

/// Per process: (table, workspace) → when read, what was read.
static LABEL_SETS: LazyLock<LabelSetCache> = LazyLock::new(LabelSetCache::default);

/// When a claim of this process last lost a race on a full window
/// (`runners::claim::first_read`).
static HERD_SEEN_AT: Mutex<Option<Instant>> = Mutex::new(None);

impl Store {
    /// The workspace's label sets, from this instance's cache when fresh;
    /// whether they came from the cache.
    async fn label_sets_cached(&self, workspace_id: &str) -> Result<(Arc<Vec<LabelSet>>, bool), StoreError> {
        {
            let cache = LABEL_SETS.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((at, sets)) = cache.get(&self.label_sets_key(workspace_id)) {
                if at.elapsed() < LABEL_SETS_TTL {
                    return Ok((sets.clone(), true));
                }
            }
        }
        Ok((self.label_sets_read(workspace_id).await?, false))
    }

    /// The workspace's label sets from the registry, cached when not empty.
    async fn label_sets_read(&self, workspace_id: &str) -> Result<Arc<Vec<LabelSet>>, StoreError> {
        let sets = Arc::new(self.label_sets(workspace_id).await?);
        if !sets.is_empty() {
            let key = self.label_sets_key(workspace_id);
            LABEL_SETS.lock().unwrap_or_else(|e| e.into_inner()).insert(key, (Instant::now(), sets.clone()));
        }
        Ok(sets)
    }

    fn label_sets_key(&self, workspace_id: &str) -> String {
        format!("{}#{workspace_id}", self.table)
    }

    /// Claims the next job `session` may run. With `request_id`, what it
    /// takes is kept for the claim's retries ([`Store::claim_answered`]).
    pub async fn claim_next(
        &self,
        session: &Session,
        look: ClaimLook,
        lease_config: &LeaseConfig,
        outbox_ttl_days: u32,
        now: DateTime<Utc>,
        stats: &mut ClaimStats,
    ) -> Result<ClaimOutcome, StoreError> {
        let request_id = look.request;
        let (sets, cached) = self.label_sets_cached(&session.workspace_id).await?;
        let outcome = self.claim_among(&sets, session, request_id, lease_config, outbox_ttl_days, now, stats).await?;
        if !(look.first_look && cached && matches!(outcome, ClaimOutcome::NothingToClaim)) {
            return Ok(outcome);
        }
        // An empty answer wrote nothing: trying again under the same request id is safe.
        let read = self.label_sets_read(&session.workspace_id).await?;
        if read == sets {
            return Ok(outcome);
        }
        self.claim_among(&read, session, request_id, lease_config, outbox_ttl_days, now, stats).await
    }

    /// The answer an earlier (or concurrent) try of claim `key` of
    /// `session` got, if one was applied: the same job under the same lease
    /// token (derived from the claim's key, so every try hands out the
    /// same). `Some(NothingToClaim)` when that lease was since ended or taken
    /// over (the claim is over; the runner claims afresh).
    ///
    /// A retry comes when the first answer never arrived, up to 30 s and
    /// more later: a lease nobody heartbeated yet gets its first-heartbeat
    /// grace again from now, or the runner would receive a lease the reaper
    /// is already about to expire.
    pub async fn claim_answered(
        &self,
        session: &Session,
        key: &ClaimKey,
        lease_config: &LeaseConfig,
        now: DateTime<Utc>,
    ) -> Result<Option<ClaimOutcome>, StoreError> {
        let Some(item) = self.get(&session_pk(session.id), &claim_request_sk(key.request_id)).await? else {
            return Ok(None);
        };
        if item.get("type").and_then(|t| t.as_s().ok()).map(String::as_str) == Some(EMPTY_ANSWER_TYPE) {
            return Ok(Some(ClaimOutcome::NothingToClaim));
        }
        let answer: ClaimAnswer = from_item(item)?;
        let token = key.lease_token(answer.execution_id, answer.epoch);
        let Some(mut lease) = self.lease(answer.execution_id).await? else {
            // Completed or reaped since: the claim is over.
            return Ok(Some(ClaimOutcome::NothingToClaim));
        };
        // A lease of another epoch or session is another claim's; one whose
        // hash is not this key's token was claimed before tokens were
        // derived (its token cannot be handed out again).
        if lease.epoch != answer.epoch || lease.session_id != session.id || lease.token_hash != hash_token(&token) {
            return Ok(Some(ClaimOutcome::NothingToClaim));
        }
        let expires_at = expiry_after_claim(now, lease_config);
        if !lease.heartbeated && lease.expires_at < expires_at {
            let refreshed = self
                .client
                .update_item()
                .table_name(&self.table)
                .key("pk", s(LeaseItem::key(answer.execution_id)))
                .key("sk", s(LEASE_SK))
                .update_expression("SET expires_at = :x")
                // Only while nobody used it and it still runs out sooner: a
                // heartbeat's expiry is never shortened, and a lease the
                // reaper ended is not brought back.
                .condition_expression("epoch = :e AND session_id = :s AND heartbeated = :no AND expires_at < :x")
                .expression_attribute_values(":x", s(crate::keys::timestamp(expires_at)))
                .expression_attribute_values(":e", n(answer.epoch))
                .expression_attribute_values(":s", s(session.id.to_string()))
                .expression_attribute_values(":no", AttributeValue::Bool(false))
                .send()
                .await;
            match refreshed {
                Ok(_) => lease.expires_at = expires_at,
                Err(err) if err.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => {
                    // Heartbeated or ended meanwhile: read what it is now.
                    let Some(now_lease) = self.lease(answer.execution_id).await? else {
                        return Ok(Some(ClaimOutcome::NothingToClaim));
                    };
                    lease = now_lease;
                }
                Err(err) => return Err(err.into()),
            }
        }
        let spec = self.spec_of(&answer.pending).await?;
        let claimed = Claimed { pending: answer.pending, spec, lease, lease_token: token };
        Ok(Some(ClaimOutcome::Claimed(Box::new(claimed))))
    }

    /// Makes an empty answer final for a retried claim: an earlier try of
    /// the same claim may still be running (its client gave up on it), and
    /// would otherwise take a job after this try answered the runner that
    /// there was none, leaving the job leased to a runner that never heard
    /// of it until its lease expired. The empty answer takes the claim's
    /// answer item first, so that try's transaction (which puts the item
    /// only if absent) fails and takes nothing. If that try committed
    /// first, its answer is this one's. Only retries pay this write.
    pub async fn answer_claim_empty(
        &self,
        session: &Session,
        key: &ClaimKey,
        lease_config: &LeaseConfig,
        now: DateTime<Utc>,
    ) -> Result<ClaimOutcome, StoreError> {
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(session_pk(session.id)))
            .item("sk", s(claim_request_sk(key.request_id)))
            .item("type", s(EMPTY_ANSWER_TYPE))
            .item("ttl", n((now + CLAIM_ANSWER_TTL).timestamp()))
            .condition_expression("attribute_not_exists(pk)");
        if super::condition_may_fail(|| put.clone().send()).await? {
            return Ok(ClaimOutcome::NothingToClaim);
        }
        Ok(self.claim_answered(session, key, lease_config, now).await?.unwrap_or(ClaimOutcome::NothingToClaim))
    }

    #[allow(clippy::too_many_arguments)]
    async fn claim_among(
        &self,
        sets: &[LabelSet],
        session: &Session,
        request: Option<ClaimKey>,
        lease_config: &LeaseConfig,
        outbox_ttl_days: u32,
        now: DateTime<Utc>,
        stats: &mut ClaimStats,
    ) -> Result<ClaimOutcome, StoreError> {
        let fitting: Vec<_> = sets.iter().filter(|set| is_subset(&set.labels, &session.labels)).collect();
        let mut attempts = 0;
        let mut lost = false;
        let mut rereads = 0;
        // Set when a try ended unsure whether it applied (`Unsure`).
        let mut unsure = false;
        let mut outcome = ClaimOutcome::NothingToClaim;
        let herd_seen_at = *HERD_SEEN_AT.lock().unwrap_or_else(|e| e.into_inner());
        let mut window = first_read(herd_seen_at, Instant::now());
        'read: loop {
            let candidates = self.claim_window(&fitting, &session.workspace_id, window).await?;
            // A short window is the whole fitting queue. After a lost race on
            // it, the rest of this read is as stale as the loser's pick was:
            // every runner read the same few items, and going down the list
            // loses again and again (the drain's tail measured about one
            // failed write per claim that way). A fresh read of a short window
            // costs a fraction of a read unit, a failed claim transaction
            // 8 write units; and the fresh pick is random, not the head again.
            // A full window lost means a herd: the next read is wider
            // (`next_read`).
            let order = attempt_order(candidates.len(), lost, &mut rand::rng());
            for index in order {
                if attempts == MAX_ATTEMPTS {
                    break 'read;
                }
                attempts += 1;
                let pending = &candidates[index];
                if passes_over(&pending.job, pending.queued_at, session.id, now) {
                    // Left to the other runners a while (it lost this job).
                    continue;
                }
                let epoch = pending.epoch + 1;
                let token = match &request {
                    Some(key) => key.lease_token(pending.execution.id, epoch),
                    None => new_lease_token(pending.execution.id, epoch),
                };
                // The grace counts from this try, not from the claim's
                // start: lost races and their pauses come before it.
                let now = now.max(Utc::now());
                let expires_at = expiry_after_claim(now, lease_config);
                let lease = LeaseItem {
                    head: ItemHead::new(LeaseItem::key(pending.execution.id), LEASE_SK, "lease"),
                    execution: pending.execution.clone(),
                    session_id: session.id,
                    epoch,
                    token_hash: hash_token(&token),
                    claimed_at: now,
                    expires_at,
                    heartbeated: false,
                    cancel_requested_at: None,
                    steps: BTreeMap::new(),
                    lx_shard: lease_shard(pending.execution.id),
                    lx_expires_at: expires_at.timestamp_millis(),
                    direct_adoption: pending.direct_adoption,
                    labelset: super::keys::labelset_of_queue_pk(&pending.head.pk).map(str::to_string),
                    reservation: session.reservation.clone(),
                    step_count: (pending.job.step_count > 0).then_some(pending.job.step_count),
                };
                let fact = Fact::new(
                    pending.execution.workspace_id.clone(),
                    now,
                    JobClaimed { lease: lease.lease_ref(), claimed_at: now },
                );
                let answer = request.map(|key| ClaimAnswer {
                    head: ItemHead::new(session_pk(session.id), claim_request_sk(key.request_id), "claim_answer"),
                    execution_id: pending.execution.id,
                    epoch,
                    pending: pending.clone(),
                    ttl: (now + CLAIM_ANSWER_TTL).timestamp(),
                });
                let attempt = self.try_claim(pending, session, &lease, &fact, outbox_ttl_days, answer.as_ref()).await?;
                match attempt {
                    ClaimAttempt::Won => {
                        let spec = self.spec_of(pending).await?;
                        return Ok(ClaimOutcome::Claimed(Box::new(Claimed {
                            pending: pending.clone(),
                            spec,
                            lease,
                            lease_token: token,
                        })));
                    }
                    ClaimAttempt::Lost | ClaimAttempt::ReservationSpent | ClaimAttempt::Unsure => {
                        unsure |= matches!(attempt, ClaimAttempt::Unsure);
                        stats.lost_races += 1;
                        lost = true;
                        if candidates.len() >= window {
                            *HERD_SEEN_AT.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                        }
                        if let Some(wider) = next_read(candidates.len(), window, rereads) {
                            rereads += usize::from(candidates.len() < window);
                            window = wider;
                            continue 'read;
                        }
                    }
                    ClaimAttempt::Stale => stats.stale_dropped += 1,
                    ClaimAttempt::SessionExhausted => {
                        outcome = ClaimOutcome::SessionExhausted;
                        break 'read;
                    }
                    ClaimAttempt::AlreadyAnswered => {
                        // Another try of this claim won first: its answer is
                        // this try's answer too, under the same token.
                        let key = request.ok_or_else(|| StoreError::Malformed("an answer without a request".into()))?;
                        let answered = self.claim_answered(session, &key, lease_config, Utc::now()).await?;
                        return Ok(answered.unwrap_or(ClaimOutcome::NothingToClaim));
                    }
                }
            }
            break;
        }
        // A try whose transaction applied but whose every answer was lost or
        // throttled (the SDK resends an applied transaction, and DynamoDB
        // answers the repeat, but a repeat can be throttled too) left the
        // job leased to this session with no one told. A later try of this
        // claim would have met its answer item; with none (no candidate
        // left, or the session's cap reached by that very claim), the
        // answer item is read: otherwise the runner hears "nothing" or
        // "exhausted" and the job waits, leased to nobody, for its grace to
        // expire. Only after an unsure try: one read, rarely.
        if let Some(key) = request.as_ref().filter(|_| unsure) {
            let answered = self.claim_answered(session, key, lease_config, Utc::now()).await?;
            if let Some(claimed @ ClaimOutcome::Claimed(_)) = answered {
                return Ok(claimed);
            }
        }
        Ok(outcome)
    }

    /// The spec of the job a claim took. The orchestrator wrote it with the
    /// fact that queued the job, so it is there for any job in the queue.
    async fn spec_of(&self, pending: &PendingItem) -> Result<JobSpec, StoreError> {
        self.job_spec(pending.execution.id).await?.ok_or_else(|| {
            StoreError::Malformed(format!("execution {} is queued without a spec", pending.execution.id))
        })
    }

    /// The oldest `window` pending items of the fitting label sets. A set
    /// whose partition is empty is pruned from the registry (once: the
    /// instance's cached list is dropped when one goes), so claims stop
    /// querying sets that have no work.
    async fn claim_window(
        &self,
        fitting: &[&LabelSet],
        workspace_id: &str,
        window: usize,
    ) -> Result<Vec<PendingItem>, StoreError> {
        let heads = futures::future::try_join_all(
            fitting.iter().map(|set| self.pending_head(workspace_id, &set.sk, window as i32)),
        )
        .await?;
        let empty: Vec<&LabelSet> =
            fitting.iter().zip(&heads).filter(|(_, head)| head.is_empty()).map(|(set, _)| *set).collect();
        let mut pruned = false;
        for set in empty {
            pruned |= self.prune_label_set(workspace_id, set).await?;
        }
        if pruned {
            let key = format!("{}#{workspace_id}", self.table);
            LABEL_SETS.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
        }
        let mut candidates: Vec<PendingItem> = heads.into_iter().flatten().collect();
        oldest_first(&mut candidates);
        candidates.truncate(window);
        Ok(candidates)
    }
}
