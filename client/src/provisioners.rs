//! The provisioner routes (api.md "Provisioners"), with a `bpt_` token:
//! demand (a long poll), reservations, instance reports and the instances
//! Baton wants gone. A 401 here means the provisioner was removed or its
//! token revoked.

use std::time::Duration;

use baton_api::provisioners::{
    Demand, InstanceEvent, InstanceList, InstanceReport, InstanceReportAnswer, ReserveRequest, Reserved,
    MAX_DEMAND_WAIT_S, MAX_INSTANCE_EVENTS,
};
use reqwest::Method;

use crate::error::ClientError;
use crate::Client;

/// A provisioner (`bpt_…` token) talking to one API.
#[derive(Debug, Clone)]
pub struct ProvisionerClient {
    client: Client,
    token: String,
}

impl ProvisionerClient {
    pub fn new(client: Client, token: &str) -> Self {
        Self { client, token: token.to_string() }
    }

    /// `GET /v1/provisioners/demand`: at once when the demand's version is
    /// not `since` (or there is no `since`), else when it changes, or after
    /// `wait_s` (at most 20) with the same version.
    pub async fn demand(&self, since: Option<&str>, wait_s: u32) -> Result<Demand, ClientError> {
        let wait_s = wait_s.min(MAX_DEMAND_WAIT_S);
        let path = format!("/v1/provisioners/demand?{}", demand_query(since, wait_s));
        let long_poll = Duration::from_secs(u64::from(wait_s));
        self.client.send_waiting_for::<(), _>(Method::GET, &path, &self.token, None, long_poll).await
    }

    /// `POST /v1/provisioners/reservations`: possibly fewer reservations than
    /// asked (none at all) when demand or `max_instances` allows no more.
    pub async fn reserve(&self, body: &ReserveRequest) -> Result<Reserved, ClientError> {
        self.client.send_for(Method::POST, "/v1/provisioners/reservations", &self.token, Some(body)).await
    }

    /// `POST /v1/provisioners/instances` with at most 100 events (see
    /// [`report_batches`] for more).
    pub async fn report(&self, events: &[InstanceEvent]) -> Result<InstanceReportAnswer, ClientError> {
        if events.len() > MAX_INSTANCE_EVENTS {
            // Refused here rather than by the server: a caller bug, not a retryable failure.
            return Err(ClientError::Permanent {
                status: 0,
                code: "invalid-request".into(),
                message: format!("{} events in one report; at most {MAX_INSTANCE_EVENTS}", events.len()),
            });
        }
        let body = InstanceReport { events: events.to_vec() };
        self.client.send_for(Method::POST, "/v1/provisioners/instances", &self.token, Some(&body)).await
    }

    /// `GET /v1/provisioners/instances`: every instance Baton knows of this
    /// provisioner, or with `only_terminate` those it wants gone.
    /// Every page, followed to the last.
    pub async fn instances(&self, only_terminate: bool) -> Result<InstanceList, ClientError> {
        let mut all = InstanceList { items: Vec::new(), next_cursor: None };
        let mut cursor: Option<String> = None;
        loop {
            let path = instances_path(only_terminate, cursor.as_deref());
            let page: InstanceList = self.client.send_for::<(), _>(Method::GET, &path, &self.token, None).await?;
            all.items.extend(page.items);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(all),
            }
        }
    }
}

/// The path of one page of the instance list (the serializer is not
/// `Send`, as for [`demand_query`]).
fn instances_path(only_terminate: bool, cursor: Option<&str>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    if only_terminate {
        query.append_pair("intent", "terminate");
    }
    if let Some(cursor) = cursor {
        query.append_pair("cursor", cursor);
    }
    format!("/v1/provisioners/instances?{}", query.finish())
}

/// The query of a demand read (the serializer is not `Send`, so it lives
/// apart from the request's await).
fn demand_query(since: Option<&str>, wait_s: u32) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("wait_s", &wait_s.to_string());
    if let Some(since) = since {
        query.append_pair("since", since);
    }
    query.finish()
}

/// `events` cut into reports of at most `size` events (and never more than
/// the API's 100), in order, so that one instance's states still arrive in
/// the order they happened.
pub fn report_batches(events: &[InstanceEvent], size: usize) -> impl Iterator<Item = &[InstanceEvent]> {
    events.chunks(size.clamp(1, MAX_INSTANCE_EVENTS))
}

/// How many events the next report carries, after the last one `delivered`
/// or failed transiently. A report is all or nothing for its caller: each
/// event is a couple of conditional writes, so under failures a large
/// report almost never gets through whole (at a 30 % fault rate, one of 13
/// events about never), and resending it whole keeps every machine that
/// ended unreported and its reservation's slot held. So a failure halves
/// the next report, down to one event, and a delivery doubles it back.
pub fn next_report_size(size: usize, delivered: bool) -> usize {
    if delivered {
        (size * 2).min(MAX_INSTANCE_EVENTS)
    } else {
        (size / 2).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_api::provisioners::InstanceState;

    fn event(n: usize) -> InstanceEvent {
        InstanceEvent {
            provider_runner_id: format!("local-{n}"),
            state: InstanceState::Running,
            reservation_id: None,
            runner_session_id: None,
            at: None,
        }
    }

    #[test]
    fn reports_carry_at_most_a_hundred_events_in_their_order() {
        let events: Vec<InstanceEvent> = (0..250).map(event).collect();
        let batches: Vec<&[InstanceEvent]> = report_batches(&events, 1_000).collect();
        assert_eq!(batches.iter().map(|b| b.len()).collect::<Vec<_>>(), vec![100, 100, 50]);
        assert_eq!(batches[1][0].provider_runner_id, "local-100");
        assert_eq!(report_batches(&[], 100).count(), 0, "nothing to report sends nothing");
        let small: Vec<usize> = report_batches(&events[..5], 2).map(<[InstanceEvent]>::len).collect();
        assert_eq!(small, vec![2, 2, 1]);
        assert_eq!(report_batches(&events[..2], 0).count(), 2, "never a report of nothing");
    }

    #[test]
    fn a_failed_report_halves_the_next_down_to_one_event_and_a_delivered_one_doubles_it_back() {
        let mut size = MAX_INSTANCE_EVENTS;
        let mut seen = Vec::new();
        for _ in 0..8 {
            size = next_report_size(size, false);
            seen.push(size);
        }
        assert_eq!(seen, vec![50, 25, 12, 6, 3, 1, 1, 1]);
        for _ in 0..8 {
            size = next_report_size(size, true);
        }
        assert_eq!(size, MAX_INSTANCE_EVENTS, "back to the API's most, never past it");
    }

    #[test]
    fn a_demand_read_passes_back_the_version_it_last_saw() {
        assert_eq!(demand_query(None, 20), "wait_s=20");
        assert_eq!(demand_query(Some("v 1&x"), 0), "wait_s=0&since=v+1%26x", "an opaque version is encoded");
    }

    #[tokio::test]
    async fn an_oversized_report_is_refused_before_it_is_sent() {
        let client = ProvisionerClient::new(Client::new("http://127.0.0.1:9").expect("a client"), "bpt_x");
        let events: Vec<InstanceEvent> = (0..101).map(event).collect();
        let err = client.report(&events).await.expect_err("refused");
        assert!(matches!(err, ClientError::Permanent { ref code, .. } if code == "invalid-request"), "{err:?}");
    }
}
