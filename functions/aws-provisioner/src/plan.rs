//! The AWS provisioner's decisions, as plain functions over plain values
//! (the shell in `lib.rs` reads EC2, SSM and the API, and does what these
//! say): what state an EC2 instance is in Baton's terms, which states to
//! report, which instances to terminate, what to launch for a reservation
//! (its tags, its token parameter, its boot script) and which token
//! parameters must go. How many instances to reserve is every provisioner's
//! decision, `baton_api::provisioners::instances_to_reserve`.

use std::collections::HashMap;

use baton_api::provisioners::{
    InstanceEvent, InstanceState, InstanceView, ReserveRequest, TerminateReason, MAX_RESERVATION_EXPIRY_S,
};
use baton_domain::runners::labels::label_set_text;
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

/// The tags of every instance Baton launches. `baton:stage` is the one the
/// CDK's `ec2:TerminateInstances` condition names, so this function may
/// terminate nothing else.
pub const TAG_STAGE: &str = "baton:stage";
pub const TAG_PROVISIONER: &str = "baton:provisioner";
pub const TAG_RESERVATION: &str = "baton:reservation";
pub const TAG_LABELS: &str = "baton:labels";
/// The longest EC2 tag value, in characters.
const TAG_VALUE_CHARS: usize = 256;
/// Where the instance's token waits (also in its boot script): an operator
/// looking at an instance sees which parameter it was handed.
pub const TAG_TOKEN_PARAMETER: &str = "baton:token-parameter";

/// The instance's boot script (user data), with its settings put in front.
const BOOT_SCRIPT: &str = include_str!("../../../infra/boot/runner-boot.sh");

/// A failed launch has no instance id; the reservation is reported under
/// this one so Baton releases it now instead of at its expiry.
const LAUNCH_FAILED_PREFIX: &str = "launch-failed-";

/// The path every runner token of `stage` is written under (the IAM
/// grants of the function and of the instances are scoped to it).
pub fn token_path(stage: &str) -> String {
    format!("/baton/{stage}/runner-tokens")
}

/// The SecureString parameter that hands reservation `id`'s token to its
/// instance.
pub fn token_parameter(stage: &str, reservation: Uuid) -> String {
    format!("{}/{reservation}", token_path(stage))
}

/// The reservation a token parameter of `stage` is for (`None`: a name this
/// function never writes).
pub fn reservation_of_parameter(stage: &str, name: &str) -> Option<Uuid> {
    let rest = name.strip_prefix(&token_path(stage))?.strip_prefix('/')?;
    Uuid::parse_str(rest).ok()
}

/// The parameter that keeps a reserve until it is answered: written before
/// the reserve is sent, deleted once its reservations are launched. A tick
/// whose reserve went unanswered (its answer lost, the API unreachable)
/// leaves it, and the next tick sends that reserve again under its
/// `request_id`, so Baton answers with the reservations a lost answer made
/// instead of those holding demand unstarted until they expire. Under the
/// token path (what the function's `ssm:runner-tokens` grant reaches),
/// named for this provisioner; a String, since it holds no secret.
pub fn kept_reserve_parameter(stage: &str, provisioner: Uuid, request_id: Uuid) -> String {
    format!("{}/{}{request_id}", token_path(stage), kept_reserve_prefix(provisioner))
}

fn kept_reserve_prefix(provisioner: Uuid) -> String {
    format!("reserve-{provisioner}-")
}

/// A reserve kept by an earlier tick: its parameter, and the reserve to
/// send again (`None`: a value this function never wrote, to delete).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptReserve {
    pub parameter: String,
    pub reserve: Option<ReserveRequest>,
}

/// This provisioner's kept reserves among `parameters`, oldest first (the
/// order they were asked in). Another provisioner's are not its to send.
pub fn kept_reserves(stage: &str, provisioner: Uuid, parameters: &[TokenParameter]) -> Vec<KeptReserve> {
    let prefix = format!("{}/{}", token_path(stage), kept_reserve_prefix(provisioner));
    let mut kept: Vec<&TokenParameter> = parameters
        .iter()
        .filter(|p| p.name.strip_prefix(&prefix).is_some_and(|id| Uuid::parse_str(id).is_ok()))
        .collect();
    kept.sort_by_key(|p| p.written_at);
    kept.into_iter()
        .map(|p| KeptReserve {
            parameter: p.name.clone(),
            reserve: p
                .value
                .as_deref()
                .and_then(|v| serde_json::from_str::<ReserveRequest>(v).ok())
                .filter(|r| r.request_id.is_some()),
        })
        .collect()
}

/// An EC2 instance state (`InstanceStateName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ec2State {
    Pending,
    Running,
    ShuttingDown,
    Stopping,
    Stopped,
    Terminated,
}

impl Ec2State {
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "pending" => Ec2State::Pending,
            "running" => Ec2State::Running,
            "shutting-down" => Ec2State::ShuttingDown,
            "stopping" => Ec2State::Stopping,
            "stopped" => Ec2State::Stopped,
            "terminated" => Ec2State::Terminated,
            _ => return None,
        })
    }

    /// The machine is ending or gone: its token, if still unread, is of no
    /// use to anyone.
    pub fn is_ending(self) -> bool {
        !matches!(self, Ec2State::Pending | Ec2State::Running)
    }
}

/// One of this provisioner's instances as EC2 describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub instance_id: String,
    pub state: Ec2State,
    /// From its `baton:reservation` tag.
    pub reservation_id: Option<Uuid>,
}

/// What Baton is told an instance in `state` is in. A stopped instance is
/// `terminating`, not `terminated`: it is not gone until it is terminated
/// (the provisioner does that, [`terminations`]).
pub fn instance_state(state: Ec2State) -> InstanceState {
    match state {
        Ec2State::Pending => InstanceState::Booting,
        Ec2State::Running => InstanceState::Running,
        Ec2State::ShuttingDown | Ec2State::Stopping | Ec2State::Stopped => InstanceState::Terminating,
        Ec2State::Terminated => InstanceState::Terminated,
    }
}

/// How long after Baton first heard of an instance EC2 may still not list
/// it: `DescribeInstances` is eventually consistent, and a tag-filtered
/// describe can miss an instance launched a moment before.
pub const DESCRIBE_LAG_GRACE: Duration = Duration::minutes(5);

/// The events that tell Baton something new: each machine's state when it
/// is ahead of what Baton holds (Baton's states only move forward, so an
/// event at or behind it would be a write for nothing), and `terminated`
/// for each instance Baton thinks alive that EC2 no longer shows (EC2
/// forgets terminated instances after about an hour: one that ended while
/// no tick saw it), once it is older than [`DESCRIBE_LAG_GRACE`]: a fresh
/// one missing is EC2's lag, and reporting it would release its
/// reservation, launch a replacement and refuse the real one's runner.
pub fn reports(machines: &[Machine], known: &[InstanceView], now: DateTime<Utc>) -> Vec<InstanceEvent> {
    let known_state: HashMap<&str, InstanceState> =
        known.iter().map(|v| (v.provider_runner_id.as_str(), v.state)).collect();
    let mut events: Vec<InstanceEvent> = machines
        .iter()
        .filter_map(|m| {
            let state = instance_state(m.state);
            let ahead = known_state.get(m.instance_id.as_str()).is_none_or(|k| state.rank() > k.rank());
            ahead.then(|| event(&m.instance_id, state, m.reservation_id))
        })
        .collect();
    events.extend(
        known
            .iter()
            .filter(|v| !v.state.is_terminal() && !machines.iter().any(|m| m.instance_id == v.provider_runner_id))
            .filter(|v| v.first_seen_at.is_none_or(|seen| now - seen >= DESCRIBE_LAG_GRACE))
            .map(|v| event(&v.provider_runner_id, InstanceState::Terminated, v.reservation_id)),
    );
    events
}

/// The report of a reservation whose instance could not be launched:
/// `failed`, so Baton releases the reservation (and its demand comes back)
/// now rather than when it expires.
pub fn launch_failed(reservation: Uuid) -> InstanceEvent {
    event(&format!("{LAUNCH_FAILED_PREFIX}{reservation}"), InstanceState::Failed, Some(reservation))
}

fn event(id: &str, state: InstanceState, reservation_id: Option<Uuid>) -> InstanceEvent {
    InstanceEvent { provider_runner_id: id.to_string(), state, reservation_id, runner_session_id: None, at: None }
}

/// Why the provisioner terminates an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Baton asked (a terminate intent).
    Intent(TerminateReason),
    /// It stopped (someone stopped it, or its boot script shut it down
    /// with `stop` behaviour): a runner instance is never started again,
    /// and a stopped one still bills its volumes.
    Stopped,
}

/// The instances to terminate: those Baton wants gone that still run (or
/// are starting, or stopped), and stopped ones. An instance already
/// shutting down or terminated needs nothing more.
pub fn terminations(machines: &[Machine], known: &[InstanceView]) -> Vec<(String, Why)> {
    machines
        .iter()
        .filter_map(|m| {
            let intent = known
                .iter()
                .find(|v| v.provider_runner_id == m.instance_id && !v.state.is_terminal())
                .and_then(|v| v.terminate.as_ref());
            match (m.state, intent) {
                (Ec2State::ShuttingDown | Ec2State::Terminated, _) => None,
                (_, Some(intent)) => Some((m.instance_id.clone(), Why::Intent(intent.reason))),
                (Ec2State::Stopped, None) => Some((m.instance_id.clone(), Why::Stopped)),
                _ => None,
            }
        })
        .collect()
}

/// A token parameter found under [`token_path`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenParameter {
    pub name: String,
    pub written_at: Option<DateTime<Utc>>,
    /// A String parameter's value (a kept reserve's JSON); `None` for a
    /// SecureString, whose token is never decrypted by a listing.
    pub value: Option<String>,
}

/// The token parameters that must go, so that a token never lingers: the
/// instance's boot script deletes its own once read, but an instance that
/// ended without booting (terminated by intent, failed) never will. A
/// parameter whose reservation has an ending instance goes; one with no
/// instance at all goes once its token has surely expired (a reservation
/// lives at most `MAX_RESERVATION_EXPIRY_S`): its launch failed and the
/// deletion then failed too, or a tick died between the write and the launch.
/// A kept reserve (`kept_reserve_parameter`) goes at the same age: its
/// reservations have surely expired, so sending it again would get nothing.
pub fn tokens_to_delete(
    stage: &str,
    parameters: &[TokenParameter],
    machines: &[Machine],
    now: DateTime<Utc>,
) -> Vec<String> {
    let expired_before = now - Duration::seconds(i64::from(MAX_RESERVATION_EXPIRY_S) + 300);
    parameters
        .iter()
        .filter(|p| {
            let instance = reservation_of_parameter(stage, &p.name)
                .and_then(|r| machines.iter().find(|m| m.reservation_id == Some(r)));
            match instance {
                Some(machine) => machine.state.is_ending(),
                None => p.written_at.is_none_or(|at| at < expired_before),
            }
        })
        .map(|p| p.name.clone())
        .collect()
}

/// What the shell writes and launches for one reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub reservation_id: Uuid,
    /// The SecureString parameter that holds the token until the instance reads it.
    pub token_parameter: String,
    pub tags: Vec<(String, String)>,
    /// The boot script with this instance's settings (plain text; the shell encodes it).
    pub user_data: String,
}

/// Who launches: the stage, the provisioner and the API its runners talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher<'a> {
    pub stage: &'a str,
    pub provisioner_id: Uuid,
    pub api_url: &'a str,
    /// More arguments for `baton-runner` on every instance.
    pub runner_args: &'a [String],
}

/// The launch of reservation `reservation` for `labels`.
pub fn launch(launcher: &Launcher<'_>, reservation: Uuid, labels: &[String]) -> Launch {
    let token_parameter = token_parameter(launcher.stage, reservation);
    let tags = vec![
        (TAG_STAGE.to_string(), launcher.stage.to_string()),
        (TAG_PROVISIONER.to_string(), launcher.provisioner_id.to_string()),
        (TAG_RESERVATION.to_string(), reservation.to_string()),
        // For the operator's eye only (nothing filters on it), shortened to
        // fit: a long set would fail every launch.
        (TAG_LABELS.to_string(), label_set_text(labels, TAG_VALUE_CHARS)),
        (TAG_TOKEN_PARAMETER.to_string(), token_parameter.clone()),
        ("Name".to_string(), format!("baton-{}-runner", launcher.stage)),
    ];
    let settings = [
        ("BATON_API", launcher.api_url.to_string()),
        ("BATON_LABELS", labels.join(",")),
        ("BATON_TOKEN_PARAMETER", token_parameter.clone()),
        ("BATON_RUNNER_ARGS", launcher.runner_args.join(" ")),
    ];
    Launch { reservation_id: reservation, token_parameter, tags, user_data: boot_script(&settings) }
}

/// The repo's boot script with `settings` assigned right after its `#!`
/// line (cloud-init runs user data that starts with `#!` as a script).
fn boot_script(settings: &[(&str, String)]) -> String {
    let (shebang, body) = BOOT_SCRIPT.split_once('\n').unwrap_or(("#!/bin/bash", BOOT_SCRIPT));
    let mut script = format!("{shebang}\n# Settings written by Baton's AWS provisioner for this instance.\n");
    for (name, value) in settings {
        script.push_str(&format!("{name}={}\n", sh_quote(value)));
    }
    script.push_str(body);
    script
}

/// `value` as one single-quoted shell word, whatever it holds.
fn sh_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// The `provider_runner_id`s this provisioner gave failed launches.
pub fn is_launch_failure(id: &str) -> bool {
    id.starts_with(LAUNCH_FAILED_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_api::provisioners::TerminateIntent;

    fn machine(id: &str, state: Ec2State, reservation: Option<Uuid>) -> Machine {
        Machine { instance_id: id.into(), state, reservation_id: reservation }
    }

    fn view(id: &str, state: InstanceState, intent: Option<TerminateReason>) -> InstanceView {
        InstanceView {
            provider_runner_id: id.into(),
            state,
            reservation_id: None,
            runner_session_id: None,
            terminate: intent.map(|reason| TerminateIntent { reason, at: Utc::now() }),
            first_seen_at: Some(Utc::now() - Duration::hours(1)),
        }
    }

    #[test]
    fn a_provisioner_sends_again_its_own_kept_reserves_oldest_first_and_the_sweep_drops_them_once_surely_expired() {
        let (me, other) = (Uuid::now_v7(), Uuid::now_v7());
        let (older, newer) = (Uuid::now_v7(), Uuid::now_v7());
        let now = Utc::now();
        let reserve = |id: Uuid| ReserveRequest {
            labels: vec!["linux".into()],
            count: 2,
            expires_in_s: Some(300),
            request_id: Some(id),
        };
        let kept = |provisioner: Uuid, id: Uuid, age_s: i64| TokenParameter {
            name: kept_reserve_parameter("prod", provisioner, id),
            written_at: Some(now - Duration::seconds(age_s)),
            value: serde_json::to_string(&reserve(id)).ok(),
        };
        let garbled = TokenParameter {
            name: kept_reserve_parameter("prod", me, Uuid::now_v7()),
            written_at: Some(now - Duration::seconds(80)),
            value: Some("{not json".into()),
        };
        let token = TokenParameter {
            name: token_parameter("prod", Uuid::now_v7()),
            written_at: Some(now - Duration::seconds(30)),
            value: None,
        };
        let not_an_id = TokenParameter {
            name: format!("{}/reserve-{me}-not-an-id", token_path("prod")),
            written_at: Some(now),
            value: None,
        };
        let parameters = vec![
            kept(me, newer, 5),
            kept(other, Uuid::now_v7(), 60),
            token,
            kept(me, older, 70),
            garbled.clone(),
            not_an_id,
        ];
        assert_eq!(
            kept_reserves("prod", me, &parameters),
            vec![
                KeptReserve { parameter: garbled.name.clone(), reserve: None },
                KeptReserve { parameter: kept_reserve_parameter("prod", me, older), reserve: Some(reserve(older)) },
                KeptReserve { parameter: kept_reserve_parameter("prod", me, newer), reserve: Some(reserve(newer)) },
            ],
            "its own, oldest first, the unreadable one to delete"
        );
        assert!(kept_reserves("staging", me, &parameters).is_empty(), "another stage's path");

        // A kept reserve is no instance's token: it goes only once its
        // reservations have surely expired (sending it then gets nothing).
        let stale = i64::from(MAX_RESERVATION_EXPIRY_S) + 301;
        let (young, old) = (kept(me, older, 70), kept(me, newer, stale));
        assert_eq!(tokens_to_delete("prod", &[young, old.clone()], &[], now), vec![old.name]);
    }

    #[test]
    fn ec2_states_map_to_baton_states_as_the_machine_lives() {
        let cases = [
            ("pending", InstanceState::Booting),
            ("running", InstanceState::Running),
            ("shutting-down", InstanceState::Terminating),
            ("stopping", InstanceState::Terminating),
            ("stopped", InstanceState::Terminating),
            ("terminated", InstanceState::Terminated),
        ];
        for (name, expected) in cases {
            let state = Ec2State::parse(name).expect("an EC2 state");
            assert_eq!(instance_state(state), expected, "{name}");
        }
        assert_eq!(Ec2State::parse("exploded"), None);
    }

    #[test]
    fn only_states_ahead_of_batons_are_reported() {
        let r = Uuid::now_v7();
        let machines = [
            machine("i-new", Ec2State::Pending, Some(r)),
            machine("i-same", Ec2State::Running, None),
            machine("i-ahead", Ec2State::Terminated, None),
        ];
        let known = [view("i-same", InstanceState::Running, None), view("i-ahead", InstanceState::Running, None)];
        let events = reports(&machines, &known, Utc::now());
        let got: Vec<(&str, InstanceState)> = events.iter().map(|e| (e.provider_runner_id.as_str(), e.state)).collect();
        assert_eq!(got, vec![("i-new", InstanceState::Booting), ("i-ahead", InstanceState::Terminated)]);
        assert_eq!(events[0].reservation_id, Some(r), "the first report ties the instance to its reservation");
    }

    #[test]
    fn an_instance_ec2_no_longer_shows_is_reported_terminated_once() {
        let known = [
            view("i-gone", InstanceState::Running, None),
            view("i-done", InstanceState::Terminated, None),
            view("launch-failed-x", InstanceState::Failed, None),
        ];
        let events = reports(&[], &known, Utc::now());
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!((events[0].provider_runner_id.as_str(), events[0].state), ("i-gone", InstanceState::Terminated));
    }

    #[test]
    fn a_fresh_instance_ec2_does_not_list_yet_is_not_reported_terminated() {
        let now = Utc::now();
        let mut fresh = view("i-fresh", InstanceState::Booting, None);
        fresh.first_seen_at = Some(now - Duration::seconds(20));
        assert!(reports(&[], &[fresh.clone()], now).is_empty(), "EC2's describe lags a launch");
        let later = now + DESCRIBE_LAG_GRACE;
        assert_eq!(reports(&[], &[fresh], later).len(), 1, "still missing past the grace: gone");
    }

    #[test]
    fn a_failed_launch_is_reported_failed_under_its_reservation() {
        let r = Uuid::now_v7();
        let event = launch_failed(r);
        assert_eq!(event.state, InstanceState::Failed);
        assert_eq!(event.reservation_id, Some(r));
        assert!(is_launch_failure(&event.provider_runner_id));
        assert!(event.provider_runner_id.len() <= 256, "within the API's bound");
    }

    #[test]
    fn intents_terminate_live_and_stopped_instances_never_ending_ones() {
        let machines = [
            machine("i-orphan", Ec2State::Pending, None),
            machine("i-done", Ec2State::Running, None),
            machine("i-ending", Ec2State::ShuttingDown, None),
            machine("i-stopped", Ec2State::Stopped, None),
            machine("i-busy", Ec2State::Running, None),
        ];
        let known = [
            view("i-orphan", InstanceState::Booting, Some(TerminateReason::Orphan)),
            view("i-done", InstanceState::Running, Some(TerminateReason::Exhausted)),
            view("i-ending", InstanceState::Terminating, Some(TerminateReason::Idle)),
            view("i-busy", InstanceState::Running, None),
        ];
        assert_eq!(
            terminations(&machines, &known),
            vec![
                ("i-orphan".to_string(), Why::Intent(TerminateReason::Orphan)),
                ("i-done".to_string(), Why::Intent(TerminateReason::Exhausted)),
                ("i-stopped".to_string(), Why::Stopped),
            ]
        );
    }

    #[test]
    fn a_token_goes_once_its_instance_ends_or_it_has_surely_expired() {
        let now = Utc::now();
        let (booting, ended, unlaunched, fresh) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let machines =
            [machine("i-1", Ec2State::Pending, Some(booting)), machine("i-2", Ec2State::Terminated, Some(ended))];
        let param = |r: Uuid, age_s: i64| TokenParameter {
            value: None,
            name: token_parameter("prod", r),
            written_at: Some(now - Duration::seconds(age_s)),
        };
        let parameters = [
            param(booting, 5_000),
            param(ended, 10),
            param(unlaunched, 4_000),
            param(fresh, 10),
            TokenParameter { name: "/baton/prod/runner-tokens/not-a-uuid".into(), written_at: None, value: None },
        ];
        let doomed = tokens_to_delete("prod", &parameters, &machines, now);
        assert_eq!(
            doomed,
            vec![
                token_parameter("prod", ended),
                token_parameter("prod", unlaunched),
                "/baton/prod/runner-tokens/not-a-uuid".to_string()
            ],
            "a booting instance's token waits for it, a fresh one for its launch"
        );
    }

    #[test]
    fn a_launch_names_its_reservation_in_its_tags_parameter_and_boot_script() {
        let provisioner_id = Uuid::now_v7();
        let reservation = Uuid::now_v7();
        let args = vec!["--no-push".to_string()];
        let launcher = Launcher { stage: "prod", provisioner_id, api_url: "https://api.example", runner_args: &args };
        let launch = launch(&launcher, reservation, &["linux".into(), "x64".into()]);
        assert_eq!(launch.token_parameter, format!("/baton/prod/runner-tokens/{reservation}"));
        let tag = |k: &str| launch.tags.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(tag(TAG_STAGE), Some("prod"));
        assert_eq!(tag(TAG_PROVISIONER), Some(provisioner_id.to_string().as_str()));
        assert_eq!(tag(TAG_RESERVATION), Some(reservation.to_string().as_str()));
        assert_eq!(tag(TAG_LABELS), Some("linux,x64"));
        assert!(launch.user_data.starts_with("#!"), "cloud-init runs it as a script");
        assert!(launch.user_data.contains(&format!("BATON_TOKEN_PARAMETER='{}'", launch.token_parameter)));
        assert!(launch.user_data.contains("BATON_LABELS='linux,x64'"));
        // `launch` is never given the token: it reaches the instance through
        // the parameter only (user data is readable with DescribeInstanceAttribute).
        assert!(!launch.user_data.contains("BATON_REGISTRATION_TOKEN='"));
        assert_eq!(reservation_of_parameter("prod", &launch.token_parameter), Some(reservation));
        assert_eq!(reservation_of_parameter("dev", &launch.token_parameter), None, "another stage's");
    }

    #[test]
    fn settings_are_single_quoted_whatever_they_hold() {
        assert_eq!(sh_quote("it's $HOME"), r"'it'\''s $HOME'");
    }
}
