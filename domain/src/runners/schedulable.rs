//! Whether anything can ever serve a queued job (behaviour.md §15, the
//! seed's unschedulable jobs): GitHub leaves a job "waiting for a runner to
//! pick up this job" for a day when no runner has its labels; Baton says so
//! when the job is queued and fails it after a configurable time instead.
//!
//! What can serve a job: a registered runner session whose labels include
//! the job's (the workspace's offers, one per label set a session
//! registered with, kept until the last such session's expiry), or a
//! provisioner that serves a label set including them (it would launch a
//! machine). A runner that registers later still claims the job before it
//! fails: the flag is a warning with a deadline, never a refusal.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::labels::is_subset;

/// A label set some registered session offers, until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    pub labels: Vec<String>,
    pub until: DateTime<Utc>,
}

/// Who can serve a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// A registered runner session.
    Session,
    /// This provisioner (it serves a fitting label set).
    Provisioner(Uuid),
}

/// Who can serve a job requiring `job` (canonical labels) at `now`: a live
/// offer first, then a provisioner (`(id, served label sets)`); `None`
/// when nothing can, ever, as things stand.
pub fn who_serves(
    job: &[String],
    offers: &[Offer],
    provisioners: &[(Uuid, Vec<Vec<String>>)],
    now: DateTime<Utc>,
) -> Option<Server> {
    if offers.iter().any(|offer| offer.until > now && is_subset(job, &offer.labels)) {
        return Some(Server::Session);
    }
    provisioners
        .iter()
        .find(|(_, sets)| sets.iter().any(|set| is_subset(job, set)))
        .map(|(id, _)| Server::Provisioner(*id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(text: &str) -> Vec<String> {
        text.split(',').map(String::from).collect()
    }

    #[test]
    fn a_live_session_or_a_provisioner_whose_labels_include_the_jobs_serves_it() {
        let now = Utc::now();
        let later = now + chrono::Duration::minutes(30);
        let offers = [Offer { labels: labels("linux,x64"), until: later }];
        assert_eq!(who_serves(&labels("linux"), &offers, &[], now), Some(Server::Session));
        assert_eq!(who_serves(&labels("linux,x64"), &offers, &[], now), Some(Server::Session));
        assert_eq!(who_serves(&labels("gpu,linux"), &offers, &[], now), None, "nobody offers gpu");

        let fleet = Uuid::from_u128(7);
        let provisioners = [(fleet, vec![labels("arm64,linux"), labels("gpu,linux,x64")])];
        assert_eq!(who_serves(&labels("gpu,linux"), &offers, &provisioners, now), Some(Server::Provisioner(fleet)));
        assert_eq!(who_serves(&labels("gpu,windows"), &offers, &provisioners, now), None);
    }

    #[test]
    fn an_offer_past_its_last_sessions_expiry_serves_nothing() {
        let now = Utc::now();
        let offers = [Offer { labels: labels("linux"), until: now }];
        assert_eq!(who_serves(&labels("linux"), &offers, &[], now), None);
        assert_eq!(
            who_serves(&labels("linux"), &offers, &[], now - chrono::Duration::seconds(1)),
            Some(Server::Session)
        );
    }
}
