//! Registration tokens and runner sessions (behaviour.md §2).
//!
//! Tokens (minted in `tokens`) carry their item's id in the clear, so
//! authenticating is one `GetItem` by id followed by a comparison of hashes;
//! the secret itself is never stored. The items are
//! `runner_items::{RegistrationToken, Session}`.

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use uuid::Uuid;

use super::keys::{self, timestamp, REGISTRATION_TOKEN_SK, SESSION_SK};
use super::runner_items::{RegistrationToken, Session};
use super::{build, from_item, query_all, s, Store, TxOutcome};
use crate::error::StoreError;
use crate::ItemHead;
use baton_api::runners::RegisterRequest;
use baton_domain::tokens::{self, hash_token, RegistrationKey};

/// Why a registration was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum RegisterRefusal {
    /// Unknown, wrong secret, revoked or expired: indistinguishable to the caller.
    Unauthenticated,
    /// A single-use token that already made its session.
    Consumed,
}

impl Store {
    pub async fn create_registration_token(
        &self,
        workspace_id: &str,
        name: Option<String>,
        expires_in_s: Option<u64>,
        single_use: bool,
        max_claims: Option<u64>,
        now: DateTime<Utc>,
    ) -> Result<(RegistrationToken, String), StoreError> {
        let id = baton_domain::ids::new_id();
        let token = tokens::new_registration_token(id);
        let record = RegistrationToken {
            head: ItemHead::new(keys::registration_token_pk(id), REGISTRATION_TOKEN_SK, "registration_token"),
            id,
            workspace_id: workspace_id.to_string(),
            name,
            secret_hash: hash_token(&token),
            expires_at: expires_in_s.map(|s| now + Duration::seconds(s.min(i64::MAX as u64) as i64)),
            single_use,
            max_claims,
            consumed_at: None,
            revoked_at: None,
            created_at: now,
            rw_pk: keys::workspace_registration_tokens_pk(workspace_id),
            rw_sk: keys::registration_token_listing_sk(now, id),
            labels: None,
            reservation: None,
        };
        // The id is new: if the item exists already, it is this very put,
        // applied before its answer was lost and sent again by the SDK.
        self.put_if_absent(&record).await?;
        Ok((record, token))
    }

    pub async fn list_registration_tokens(&self, workspace_id: &str) -> Result<Vec<RegistrationToken>, StoreError> {
        query_all(
            self.client
                .query()
                .table_name(&self.table)
                .index_name(keys::RUNS_BY_WORKSPACE)
                .key_condition_expression("rw_pk = :pk")
                .expression_attribute_values(":pk", s(keys::workspace_registration_tokens_pk(workspace_id)))
                .scan_index_forward(false),
        )
        .await
    }

    pub(super) async fn get_registration_token(&self, id: Uuid) -> Result<Option<RegistrationToken>, StoreError> {
        self.get(&keys::registration_token_pk(id), REGISTRATION_TOKEN_SK).await?.map(from_item).transpose()
    }

    /// Revokes a token of `workspace_id`; `false` when there is none (another
    /// workspace's token is not found either). Revoking twice is a no-op.
    pub async fn revoke_registration_token(
        &self,
        workspace_id: &str,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        match self.get_registration_token(id).await? {
            Some(token) if token.workspace_id == workspace_id => {
                self.client
                    .update_item()
                    .table_name(&self.table)
                    .key("pk", s(keys::registration_token_pk(id)))
                    .key("sk", s(REGISTRATION_TOKEN_SK))
                    .update_expression("SET revoked_at = if_not_exists(revoked_at, :now)")
                    .expression_attribute_values(":now", s(timestamp(now)))
                    .send()
                    .await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Makes a session from a registration token. A single-use token is
    /// consumed in the same transaction as the session is created, so two
    /// concurrent registrations make exactly one session.
    pub async fn register_session(
        &self,
        token: &str,
        request: RegisterRequest,
        session_ttl: Duration,
        now: DateTime<Utc>,
    ) -> Result<Result<(Session, String), RegisterRefusal>, StoreError> {
        // Its tools are among its labels by now (the register function
        // turns them into `tool:` labels).
        let RegisterRequest { labels, name, request_id, .. } = request;
        let Some(id) = tokens::registration_token_id(token) else {
            return Ok(Err(RegisterRefusal::Unauthenticated));
        };
        let Some(reg) = self.get_registration_token(id).await? else {
            return Ok(Err(RegisterRefusal::Unauthenticated));
        };
        let usable = reg.secret_hash == hash_token(token)
            && reg.revoked_at.is_none()
            && reg.expires_at.is_none_or(|at| at > now);
        if !usable {
            return Ok(Err(RegisterRefusal::Unauthenticated));
        }
        // A registration the runner names derives its session: a retry
        // finds the session its earlier try made (that try's answer lost).
        let key = request_id.map(|request_id| RegistrationKey::new(token, request_id));
        let (session_id, session_token) = match &key {
            Some(key) => (key.session_id(), key.session_token()),
            None => {
                let id = baton_domain::ids::new_id();
                (id, tokens::new_session_token(id))
            }
        };
        if reg.single_use && reg.consumed_at.is_some() {
            return Ok(self.made_by_earlier_try(key.as_ref(), &session_token).await?.ok_or(RegisterRefusal::Consumed));
        }
        let session = Session {
            head: ItemHead::new(keys::session_pk(session_id), SESSION_SK, "session"),
            id: session_id,
            workspace_id: reg.workspace_id.clone(),
            name,
            // A reservation's token says what the machine is for.
            labels: reg.labels.clone().unwrap_or(labels),
            max_claims: reg.max_claims,
            claims: 0,
            token_hash: hash_token(&session_token),
            expires_at: now + session_ttl,
            last_seen_at: now,
            created_at: now,
            reservation: reg.reservation.clone(),
            executions: Vec::new(),
            last_claim_at: None,
        };
        let mut items = vec![self.new_item_put(&session)?];
        if reg.single_use {
            let consume = build(
                Update::builder()
                    .table_name(&self.table)
                    .key("pk", s(keys::registration_token_pk(id)))
                    .key("sk", s(REGISTRATION_TOKEN_SK))
                    .update_expression("SET consumed_at = :now")
                    .condition_expression("attribute_not_exists(consumed_at) OR consumed_at = :null")
                    .expression_attribute_values(":now", s(timestamp(now)))
                    .expression_attribute_values(":null", aws_sdk_dynamodb::types::AttributeValue::Null(true))
                    .build(),
            )?;
            items.push(TransactWriteItem::builder().update(consume).build());
        }
        if let Some(link) = &reg.reservation {
            // The provisioner learns which session its machine became, and
            // a released reservation's token can no longer make one.
            items.push(self.reservation_registration(link, session_id, now)?);
        }
        match self.transact(items).await? {
            TxOutcome::Committed => Ok(Ok((session, session_token))),
            // Only a single-use token's consumption can lose a race; a
            // reusable token's session put alone failing its condition is
            // this very put (a new id), applied before its answer was lost.
            TxOutcome::ConditionFailed { .. } if !reg.single_use => Ok(Ok((session, session_token))),
            // Consumed under us: by another try of this registration (two
            // tries side by side), which made this same session, or by
            // another registration.
            TxOutcome::ConditionFailed { .. } => {
                Ok(self.made_by_earlier_try(key.as_ref(), &session_token).await?.ok_or(RegisterRefusal::Consumed))
            }
        }
    }

    /// The session an earlier try of this registration made, with its token:
    /// the derived session exists and its token is the derived one.
    async fn made_by_earlier_try(
        &self,
        key: Option<&RegistrationKey>,
        session_token: &str,
    ) -> Result<Option<(Session, String)>, StoreError> {
        let Some(key) = key else { return Ok(None) };
        let Some(item) = self.get(&keys::session_pk(key.session_id()), SESSION_SK).await? else { return Ok(None) };
        let session: Session = from_item(item)?;
        Ok((session.token_hash == hash_token(session_token)).then(|| (session, session_token.to_string())))
    }

    /// The session a `bst_` token belongs to, if the token is valid now.
    pub async fn session_for_token(&self, token: &str, now: DateTime<Utc>) -> Result<Option<Session>, StoreError> {
        let Some(id) = tokens::session_token_id(token) else { return Ok(None) };
        let Some(item) = self.get(&keys::session_pk(id), SESSION_SK).await? else { return Ok(None) };
        let session: Session = from_item(item)?;
        Ok((session.token_hash == hash_token(token) && session.expires_at > now).then_some(session))
    }

    /// Records that the session was seen, at most once per `every`: the
    /// condition makes idle polling cost no write most of the time.
    pub async fn touch_session(
        &self,
        session: &Session,
        now: DateTime<Utc>,
        every: Duration,
    ) -> Result<(), StoreError> {
        if now - session.last_seen_at < every {
            return Ok(());
        }
        let touch = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(keys::session_pk(session.id)))
            .key("sk", s(SESSION_SK))
            .update_expression("SET last_seen_at = :now")
            .condition_expression("last_seen_at < :before")
            .expression_attribute_values(":now", s(timestamp(now)))
            .expression_attribute_values(":before", s(timestamp(now - every)));
        // A concurrent poll of the same session touched it first: fine.
        super::condition_may_fail(|| touch.clone().send()).await.map(|_| ())
    }

    /// Records that a session offering `labels` is registered until
    /// `until`: the workspace's offer of that label set lasts till then (a
    /// later expiry only ever moves it on; a condition that fails is a
    /// session that expires sooner, and changes nothing). Items go with
    /// TTL a day after.
    pub async fn record_offer(
        &self,
        workspace_id: &str,
        labels: &[String],
        until: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let expire = until + Duration::days(1);
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(keys::offers_pk(workspace_id)))
            .key("sk", s(baton_domain::runners::labels::labelset_id(labels)))
            .update_expression("SET #type = :type, labels = :labels, #until = :until, #ttl = :ttl")
            .condition_expression("attribute_not_exists(pk) OR #until < :until")
            .expression_attribute_names("#type", "type")
            .expression_attribute_names("#until", "until")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":type", s("offer"))
            .expression_attribute_values(
                ":labels",
                aws_sdk_dynamodb::types::AttributeValue::L(labels.iter().map(|l| s(l.as_str())).collect()),
            )
            .expression_attribute_values(":until", s(timestamp(until)))
            .expression_attribute_values(":ttl", super::n(expire.timestamp()));
        super::condition_may_fail(|| update.clone().send()).await.map(|_| ())
    }

    /// The label sets a workspace's registered sessions offer, each until
    /// when (expired ones included: the caller compares with its now).
    pub async fn offers(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<baton_domain::runners::schedulable::Offer>, StoreError> {
        #[derive(Deserialize)]
        struct OfferItem {
            labels: Vec<String>,
            #[serde(with = "baton_domain::time::stored")]
            until: DateTime<Utc>,
        }
        let offers: Vec<OfferItem> = query_all(self.query_partition(keys::offers_pk(workspace_id))).await?;
        Ok(offers
            .into_iter()
            .map(|item| baton_domain::runners::schedulable::Offer { labels: item.labels, until: item.until })
            .collect())
    }
}
