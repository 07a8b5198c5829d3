//! The local provisioner's loop against a fake of the provisioner routes
//! (the real ones are tested end to end in `tests/runner`): it reserves what
//! demand asks, starts a "runner" per reservation, reports every state in
//! order, stops what an intent names, and stops the rest on shutdown.
//!
//! The runner here is a shell script that logs the agent's `registered`
//! line (JSON) and then either exits 0 (an ephemeral runner whose job ended)
//! or waits to be stopped.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use baton_api::provisioners::{
    Demand, InstanceEvent, InstanceList, InstanceReport, InstanceReportAnswer, InstanceState, InstanceView,
    LabelSetDemand, Reservation, ReserveRequest, Reserved, TerminateIntent, TerminateReason,
};
use baton_runner::provisioner::local::{run, LocalConfig, LocalError, Summary};
use chrono::Utc;
use uuid::Uuid;

#[derive(Default)]
struct Fake {
    /// Jobs queued and not yet reserved.
    queued: u64,
    version: u64,
    asked: Vec<ReserveRequest>,
    events: Vec<InstanceEvent>,
    /// Instances Baton wants gone, by provider id.
    intents: HashMap<String, TerminateReason>,
    /// How many reserves to come are applied but answered API Gateway's
    /// 504 (their answers lost).
    answers_lost: u32,
    /// What each named reserve made: a repeat of it gets the same back, as
    /// from Baton.
    made: HashMap<Uuid, Vec<Reservation>>,
}

type Shared = Arc<Mutex<Fake>>;

fn lock(fake: &Shared) -> std::sync::MutexGuard<'_, Fake> {
    fake.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn demand(State(fake): State<Shared>, Query(query): Query<HashMap<String, String>>) -> Json<Demand> {
    // A long poll in miniature: an unchanged version waits a little.
    let current = lock(&fake).version.to_string();
    if query.get("since") == Some(&current) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let fake = lock(&fake);
    Json(Demand {
        label_sets: vec![LabelSetDemand {
            labels: vec!["linux".into(), "x64".into()],
            queued: fake.queued,
            reserved: 0,
            running: 0,
            idle_sessions: 0,
            oldest_queued_at: None,
        }],
        version: fake.version.to_string(),
    })
}

async fn reserve(State(fake): State<Shared>, Json(body): Json<ReserveRequest>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut fake = lock(&fake);
    let earlier = body.request_id.and_then(|id| fake.made.get(&id).cloned());
    let request_id = body.request_id;
    fake.asked.push(body.clone());
    let reservations = match earlier {
        Some(made) => made,
        None => {
            let granted = u64::from(body.count).min(fake.queued);
            fake.queued -= granted;
            fake.version += 1;
            let made: Vec<Reservation> = (0..granted)
                .map(|_| Reservation {
                    id: Uuid::now_v7(),
                    registration_token: format!("brt_{}", Uuid::now_v7().simple()),
                    expires_at: Utc::now(),
                })
                .collect();
            if let Some(id) = request_id {
                fake.made.insert(id, made.clone());
            }
            made
        }
    };
    if fake.answers_lost > 0 {
        fake.answers_lost -= 1;
        return (StatusCode::GATEWAY_TIMEOUT, Json(serde_json::json!({"message": "Endpoint request timed out"})))
            .into_response();
    }
    (StatusCode::CREATED, Json(Reserved { reservations })).into_response()
}

async fn report(State(fake): State<Shared>, Json(body): Json<InstanceReport>) -> Json<InstanceReportAnswer> {
    let mut fake = lock(&fake);
    assert!(body.events.len() <= 100);
    let accepted = body.events.len() as u32;
    fake.events.extend(body.events);
    Json(InstanceReportAnswer { accepted, reservations_released: 0, terminate_intents_honored: vec![] })
}

/// The instances with an intent, as Baton lists them (`intent=terminate`):
/// live ones only, in their last reported state. (Listing an ended one as
/// running made the provisioner take it for an earlier run's instance and
/// report it terminated a second time, when a read fell between its end
/// and the shutdown.)
async fn instances(State(fake): State<Shared>) -> Json<InstanceList> {
    let fake = lock(&fake);
    let states = states_by_instance(&fake.events);
    let items = fake
        .intents
        .iter()
        .filter_map(|(id, reason)| {
            let state = states.get(id).and_then(|s| s.last().copied()).unwrap_or(InstanceState::Running);
            (!state.is_terminal()).then(|| InstanceView {
                provider_runner_id: id.clone(),
                state,
                reservation_id: None,
                runner_session_id: None,
                terminate: Some(TerminateIntent { reason: *reason, at: Utc::now() }),
                first_seen_at: None,
            })
        })
        .collect();
    Json(InstanceList { items, next_cursor: None })
}

async fn serve(fake: Shared) -> String {
    let app = Router::new()
        .route("/v1/provisioners/demand", get(demand))
        .route("/v1/provisioners/reservations", post(reserve))
        .route("/v1/provisioners/instances", post(report).get(instances))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let address = listener.local_addr().expect("an address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}

/// The first runner started exits 0 once registered; the others wait.
fn runner_script(dir: &std::path::Path) -> PathBuf {
    let script = dir.join("runner.sh");
    let body = format!(
        r#"#!/bin/sh
echo '{{"level":"INFO","fields":{{"message":"registered","session":"'"$(cat /proc/sys/kernel/random/uuid)"'"}}}}'
if mkdir "{first}" 2>/dev/null; then exit 0; fi
exec sleep 600
"#,
        first = dir.join("first").display()
    );
    std::fs::write(&script, body).expect("the script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("executable");
    script
}

/// The states reported for each instance, in order.
fn states_by_instance(events: &[InstanceEvent]) -> HashMap<String, Vec<InstanceState>> {
    let mut by: HashMap<String, Vec<InstanceState>> = HashMap::new();
    for event in events {
        by.entry(event.provider_runner_id.clone()).or_default().push(event.state);
    }
    by
}

/// The local provisioner's loop, running against `fake` in a scratch
/// directory of its own, with `runner_script` as its runner.
struct Provisioner {
    dir: PathBuf,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<Summary, LocalError>>,
}

impl Provisioner {
    async fn start(fake: &Shared) -> Self {
        let dir = std::env::temp_dir().join(format!("baton-local-provisioner-{}", Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let runner_bin = runner_script(&dir);
        // Past any other test's fork that might still hold the script open for writing.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let api = serve(fake.clone()).await;
        let config = LocalConfig {
            intent_poll: Duration::from_millis(100),
            kill_grace: Duration::from_secs(5),
            ..LocalConfig::new(&api, "bpt_test", runner_bin, dir.join("work"))
        };
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        Self { dir, stop, task: tokio::spawn(run(config, shutdown)) }
    }

    /// Asks it to stop, as a signal would; what it did, once it stopped.
    async fn shut_down(self) -> Summary {
        self.stop.send_replace(true);
        let summary = tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("the provisioner stops in time")
            .expect("no panic")
            .expect("no error");
        let _ = std::fs::remove_dir_all(&self.dir);
        summary
    }
}

async fn eventually(what: &str, fake: &Shared, holds: impl Fn(&Fake) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !holds(&lock(fake)) {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}: {:?}", lock(fake).events);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_local_provisioner_starts_what_demand_needs_and_stops_what_baton_or_its_shutdown_asks() {
    let fake: Shared = Arc::new(Mutex::new(Fake { queued: 3, version: 1, ..Fake::default() }));
    let provisioner = Provisioner::start(&fake).await;

    // Three queued jobs: three reservations, three runners; one ends on its own.
    eventually("three running instances, one ended", &fake, |f| {
        let by = states_by_instance(&f.events);
        by.len() == 3
            && by.values().filter(|s| s.contains(&InstanceState::Running)).count() == 3
            && by.values().filter(|s| s.last() == Some(&InstanceState::Terminated)).count() == 1
    })
    .await;
    let asked: u32 = lock(&fake).asked.iter().map(|r| r.count).sum();
    assert_eq!(asked, 3, "nothing asked beyond the demand: {:?}", lock(&fake).asked);
    let ended_on_its_own = {
        let f = lock(&fake);
        let by = states_by_instance(&f.events);
        let (id, states) = by.iter().find(|(_, s)| s.last() == Some(&InstanceState::Terminated)).expect("one");
        assert_eq!(
            states,
            &vec![InstanceState::Requested, InstanceState::Booting, InstanceState::Running, InstanceState::Terminated],
            "an exhausted runner's instance"
        );
        assert!(f.events.iter().filter(|e| &e.provider_runner_id == id).all(|e| e.reservation_id.is_some()));
        let running = f.events.iter().find(|e| &e.provider_runner_id == id && e.state == InstanceState::Running);
        assert!(running.and_then(|e| e.runner_session_id).is_some(), "the session read from the runner's log");
        id.clone()
    };

    // Baton asks one of the waiting two to go.
    let doomed = {
        let mut f = lock(&fake);
        let by = states_by_instance(&f.events);
        let doomed = by.keys().find(|id| **id != ended_on_its_own).cloned().expect("a waiting instance");
        f.intents.insert(doomed.clone(), TerminateReason::Idle);
        doomed
    };
    eventually("the doomed instance terminated", &fake, |f| {
        states_by_instance(&f.events).get(&doomed).and_then(|s| s.last().copied()) == Some(InstanceState::Terminated)
    })
    .await;

    // Shutdown stops the last one.
    let summary = provisioner.shut_down().await;
    assert_eq!((summary.reserved, summary.started, summary.terminated, summary.failed), (3, 3, 3, 0));
    assert_eq!(summary.stopped_on_intent, 1);
    let by = states_by_instance(&lock(&fake).events);
    for (id, states) in &by {
        if *id == ended_on_its_own {
            continue;
        }
        assert_eq!(
            &states[states.len() - 2..],
            &[InstanceState::Terminating, InstanceState::Terminated],
            "{id}: {states:?}"
        );
    }
}

#[tokio::test]
async fn a_reserve_whose_answers_stay_lost_past_its_tries_is_sent_again_with_its_id_and_its_reservations_start() {
    // Two queued jobs; the first reserve takes them, and its answer is lost
    // more times than one round of tries sends it.
    let fake: Shared = Arc::new(Mutex::new(Fake { queued: 2, version: 1, answers_lost: 6, ..Fake::default() }));
    let provisioner = Provisioner::start(&fake).await;

    // Demand reads none queued once the lost reserve took both: only the
    // same reserve sent again can start the machines its reservations wait for.
    eventually("both reservations' instances running", &fake, |f| {
        states_by_instance(&f.events).values().filter(|s| s.contains(&InstanceState::Running)).count() == 2
    })
    .await;
    {
        let f = lock(&fake);
        let ids: std::collections::HashSet<_> = f.asked.iter().map(|r| r.request_id).collect();
        assert_eq!(ids.len(), 1, "one reserve, sent again under its id: {:?}", f.asked);
        assert!(f.asked.len() > 6, "sent until answered: {:?}", f.asked);
        let reserved: std::collections::HashSet<_> = f.made.values().flatten().map(|r| r.id).collect();
        let started: std::collections::HashSet<_> = f.events.iter().filter_map(|e| e.reservation_id).collect();
        assert_eq!(started, reserved, "the machines are those of the reservations the lost answers held");
    }
    let summary = provisioner.shut_down().await;
    assert_eq!((summary.reserved, summary.started, summary.failed), (2, 2, 0));
}
