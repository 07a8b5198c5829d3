//! Concurrency group items (`workflows::concurrency`): one item a group,
//! `pk = CGROUP#<ws>#<group>`, holding the attempts that run and those that
//! wait, written only by compare-and-set on its `version` (a new group:
//! on its absence). Every change is decided by the pure
//! [`GroupState::join`] / [`GroupState::leave`] on the state read, and
//! decided again on a fresher read after a lost race, so two creates, a
//! create and a completion, or a replayed step racing on one group never
//! make two holders.

use serde::{Deserialize, Serialize};

use super::keys::{concurrency_group_pk, CONCURRENCY_GROUP_SK};
use super::{contention, from_item, Store};
use crate::error::StoreError;
use crate::ItemHead;
use baton_domain::workflows::concurrency::{GroupHold, GroupState, Joined, Member};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct GroupItem {
    #[serde(flatten)]
    head: ItemHead,
    workspace_id: String,
    group: String,
    version: u64,
    /// The holder, as items written before `limit` kept it (read only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    holder: Option<Member>,
    #[serde(default)]
    holders: Vec<Member>,
    #[serde(default = "one")]
    limit: u32,
    #[serde(default)]
    queue: Vec<Member>,
    #[serde(default)]
    last_left: Option<Member>,
}

fn one() -> u32 {
    1
}

impl GroupItem {
    fn state(&self) -> GroupState {
        let mut holders = self.holders.clone();
        holders.extend(self.holder.filter(|h| !self.holders.contains(h)));
        GroupState { holders, limit: self.limit, queue: self.queue.clone(), last_left: self.last_left }
    }
}

impl Store {
    /// The group's holder and waiting attempts (empty when it has none).
    pub async fn concurrency_group(&self, workspace_id: &str, group: &str) -> Result<GroupState, StoreError> {
        let item = self.get(&concurrency_group_pk(workspace_id, group), CONCURRENCY_GROUP_SK).await?;
        Ok(item.map(from_item::<GroupItem>).transpose()?.map(|item| item.state()).unwrap_or_default())
    }

    /// `me` joins the group of `hold` (idempotent).
    pub async fn join_concurrency_group(
        &self,
        workspace_id: &str,
        hold: &GroupHold,
        me: Member,
    ) -> Result<Joined, StoreError> {
        self.change_group(workspace_id, &hold.group, |state| {
            let joined = state.join(me, hold.cancel_in_progress, hold.queue, hold.limit);
            let changed = joined.changed;
            (joined, changed)
        })
        .await
    }

    /// `me`, done, leaves the group: the attempts that hold it now in its
    /// place, if `me` held it and some were waiting (idempotent: a repeat
    /// is told the holders again, to wake).
    pub async fn leave_concurrency_group(
        &self,
        workspace_id: &str,
        group: &str,
        me: Member,
    ) -> Result<Vec<Member>, StoreError> {
        self.change_group(workspace_id, group, |state| state.leave(me)).await
    }

    /// Reads the group, applies `change` (its answer and whether it changed
    /// the state) and writes it back on the version read, again on a
    /// fresher read after a lost race.
    async fn change_group<T>(
        &self,
        workspace_id: &str,
        group: &str,
        mut change: impl FnMut(&mut GroupState) -> (T, bool),
    ) -> Result<T, StoreError> {
        let pk = concurrency_group_pk(workspace_id, group);
        let mut lost = 0;
        loop {
            let read = self.get(&pk, CONCURRENCY_GROUP_SK).await?.map(from_item::<GroupItem>).transpose()?;
            let version = read.as_ref().map(|item| item.version);
            let mut item = read.unwrap_or_else(|| GroupItem {
                head: ItemHead::new(pk.clone(), CONCURRENCY_GROUP_SK.to_string(), "concurrency_group"),
                workspace_id: workspace_id.to_string(),
                group: group.to_string(),
                version: 0,
                holder: None,
                holders: Vec::new(),
                limit: 1,
                queue: Vec::new(),
                last_left: None,
            });
            let mut state = item.state();
            let (answer, changed) = change(&mut state);
            if !changed {
                return Ok(answer);
            }
            item.holder = None;
            item.holders = state.holders;
            item.limit = state.limit;
            item.queue = state.queue;
            item.last_left = state.last_left;
            item.version = version.map_or(1, |v| v + 1);
            let put = self.versioned_put(&item, version)?;
            if !contention::lost_race(self.transact(vec![put]).await)? {
                return Ok(answer);
            }
            lost += 1;
            if lost > contention::MAX_LOST_RACES {
                return Err(contention::too_contended(format!("concurrency group {group}")));
            }
            contention::pause_after_lost_race().await;
        }
    }
}
