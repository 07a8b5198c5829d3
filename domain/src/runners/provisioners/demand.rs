//! Demand (behaviour.md §15): what is queued for the label sets a
//! provisioner serves, from the counters the queue keeps on its label-set
//! registry (`store::queue`), and how a reservation spreads over them.
//!
//! Counters are kept per **job** label set, the unit the queue already
//! works in; a provisioner serves **machine** label sets. A job counts
//! toward a served set when its labels are a subset of it, so one job set
//! can count toward two served sets (or two provisioners): reservations are
//! therefore held on the job sets, and a reservation takes only what no
//! other reservation holds there. That makes "never reserve the same demand
//! twice" one condition on the job set's counters.

use crate::runners::labels::is_subset;

/// The counters of one job label set as read from its registry entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetCounts {
    /// The label set id (`labels::labelset_id`).
    pub labelset: String,
    pub labels: Vec<String>,
    /// Claimable executions (may read below zero for items queued before
    /// the counters existed: never shown so).
    pub queued: i64,
    /// Reservations holding demand here whose instance has not claimed yet.
    pub reserved: i64,
    /// Executions of this set under a lease.
    pub running: i64,
}

impl SetCounts {
    /// Demand no reservation covers yet.
    pub fn unreserved(&self) -> u64 {
        (self.queued.max(0) - self.reserved.max(0)).max(0) as u64
    }
}

/// Demand for one served set, summed over the job sets it covers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServedDemand {
    pub queued: u64,
    pub reserved: u64,
    pub running: u64,
    /// The job sets with unreserved demand, for the oldest-queued read.
    pub waiting_sets: Vec<String>,
}

/// The demand of `served` (a machine label set) over the job sets read.
pub fn served_demand(served: &[String], sets: &[SetCounts]) -> ServedDemand {
    let mut demand = ServedDemand::default();
    for set in sets.iter().filter(|s| is_subset(&s.labels, served)) {
        demand.queued += set.unreserved();
        demand.reserved += set.reserved.max(0) as u64;
        demand.running += set.running.max(0) as u64;
        if set.unreserved() > 0 {
            demand.waiting_sets.push(set.labelset.clone());
        }
    }
    demand
}

/// How `count` reservations for `served` spread over the job sets it
/// covers: as much as each set's unreserved demand allows, largest first
/// (ties by id, so two readers of the same counters plan alike). The sum may
/// be less than `count`: a reservation never outnumbers the demand.
pub fn spread_reservations(served: &[String], sets: &[SetCounts], count: u32) -> Vec<(SetCounts, u32)> {
    let mut candidates: Vec<&SetCounts> =
        sets.iter().filter(|s| is_subset(&s.labels, served) && s.unreserved() > 0).collect();
    candidates.sort_by(|a, b| b.unreserved().cmp(&a.unreserved()).then_with(|| a.labelset.cmp(&b.labelset)));
    let mut left = u64::from(count);
    let mut plan = Vec::new();
    for set in candidates {
        if left == 0 {
            break;
        }
        let take = set.unreserved().min(left);
        left -= take;
        plan.push((set.clone(), take as u32));
    }
    plan
}

/// One datapoint of the published demand metrics: a served label set of a
/// workspace, what is queued (and no reservation covers) and running there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemandDatapoint {
    pub workspace_id: String,
    pub labels: Vec<String>,
    pub queued: u64,
    pub running: u64,
}

/// The datapoints of one workspace: one per distinct label set its
/// provisioners serve, zeros included (an auto scaling group scales in on
/// them). Two provisioners serving the same set publish it once: the metric
/// is the set's demand, and two datapoints a period would be summed by a
/// `Sum` statistic.
pub fn workspace_datapoints<'a>(
    workspace_id: &str,
    served: impl IntoIterator<Item = &'a Vec<String>>,
    sets: &[SetCounts],
) -> Vec<DemandDatapoint> {
    let mut distinct: Vec<Vec<String>> = served
        .into_iter()
        .map(|labels| {
            let mut labels = labels.clone();
            labels.sort();
            labels.dedup();
            labels
        })
        .collect();
    distinct.sort();
    distinct.dedup();
    distinct
        .into_iter()
        .map(|labels| {
            let demand = served_demand(&labels, sets);
            DemandDatapoint {
                workspace_id: workspace_id.to_string(),
                labels,
                queued: demand.queued,
                running: demand.running,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(id: &str, labels: &[&str], queued: i64, reserved: i64, running: i64) -> SetCounts {
        SetCounts {
            labelset: id.into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            queued,
            reserved,
            running,
        }
    }

    fn labels(l: &[&str]) -> Vec<String> {
        l.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn a_served_set_counts_the_jobs_whose_labels_it_covers_less_what_is_reserved() {
        let sets = [
            set("a", &["linux"], 10, 3, 2),
            set("b", &["linux", "x64"], 4, 0, 1),
            set("c", &["gpu", "linux"], 7, 0, 0),
            set("d", &["linux"], -2, 0, 0),
        ];
        let demand = served_demand(&labels(&["linux", "x64"]), &sets);
        assert_eq!((demand.queued, demand.reserved, demand.running), (11, 3, 3));
        assert_eq!(demand.waiting_sets, vec!["a".to_string(), "b".into()]);
    }

    #[test]
    fn a_reservation_never_outnumbers_unreserved_demand() {
        let sets = [set("a", &["linux"], 3, 1, 0), set("b", &["linux", "x64"], 4, 0, 0), set("c", &["gpu"], 9, 0, 0)];
        let plan = spread_reservations(&labels(&["linux", "x64"]), &sets, 100);
        let spread: Vec<(&str, u32)> = plan.iter().map(|(s, k)| (s.labelset.as_str(), *k)).collect();
        assert_eq!(spread, vec![("b", 4), ("a", 2)]);
        let plan = spread_reservations(&labels(&["linux", "x64"]), &sets, 5);
        assert_eq!(plan.iter().map(|(_, k)| k).sum::<u32>(), 5);
        assert!(spread_reservations(&labels(&["arm"]), &sets, 5).is_empty());
    }

    #[test]
    fn a_workspace_publishes_each_served_set_once_zeros_included() {
        let sets = [set("a", &["linux"], 5, 2, 1), set("b", &["gpu", "linux"], 2, 0, 0)];
        let served =
            [labels(&["x64", "linux"]), labels(&["linux", "x64"]), labels(&["arm"]), labels(&["gpu", "linux"])];
        let points = workspace_datapoints("ws", &served, &sets);
        let figures: Vec<(String, u64, u64)> =
            points.iter().map(|p| (p.labels.join(","), p.queued, p.running)).collect();
        assert_eq!(
            figures,
            vec![("arm".to_string(), 0, 0), ("gpu,linux".into(), 5, 1), ("linux,x64".into(), 3, 1)],
            "two provisioners on linux,x64 (in any order) make one datapoint; arm has nothing queued and still publishes"
        );
        assert!(points.iter().all(|p| p.workspace_id == "ws"));
    }
}
