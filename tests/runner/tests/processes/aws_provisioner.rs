//! The AWS reference provisioner (functions/aws-provisioner) end to end
//! against the emulator's EC2 and SSM: its handler is invoked as its
//! schedule would, with clients limited to its grants in resources.json (as
//! IAM limits it on AWS), against the dev host's API. No instance ever boots
//! in moto, so the test plays the boot script (infra/boot/runner-boot.sh):
//! read the token parameter, delete it, start a real `baton-runner` with the
//! token, and power the machine off when the runner exits.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::support::*;
use aws_sdk_ec2::types::{Filter, RequestLaunchTemplateData};
use aws_sdk_ssm::types::ParameterType;
use baton_aws_provisioner::settings::Settings;
use baton_aws_provisioner::{AwsProvisioner, Tick};
use baton_localstack::faults::{FaultPlan, FaultyHttpClient};
use baton_localstack::grants::Grants;
use baton_localstack::resources::Resources;
use baton_tests::runs::Identified;
use baton_tests::{endpoint, wait_for, workspace, TestStack, WAIT};
use serde_json::{json, Value};

/// The emulator's EC2 and SSM, as the test itself (not the function) uses them.
struct Cloud {
    ec2: aws_sdk_ec2::Client,
    ssm: aws_sdk_ssm::Client,
}

async fn sdk_config() -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(endpoint())
        .credentials_provider(aws_sdk_ec2::config::Credentials::new("testing", "testing", None, None, "test"))
        .load()
        .await
}

impl Cloud {
    async fn new() -> Self {
        let config = sdk_config().await;
        Self { ec2: aws_sdk_ec2::Client::new(&config), ssm: aws_sdk_ssm::Client::new(&config) }
    }

    /// The instances tagged with `stage`, as `(id, state, tags)`.
    async fn instances(&self, stage: &str) -> Vec<(String, String, HashMap<String, String>)> {
        let out = self
            .ec2
            .describe_instances()
            .filters(Filter::builder().name("tag:baton:stage").values(stage).build())
            .send()
            .await
            .expect("DescribeInstances");
        out.reservations()
            .iter()
            .flat_map(|r| r.instances())
            .map(|i| {
                let tags = i
                    .tags()
                    .iter()
                    .map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string()))
                    .collect();
                let state = i.state().and_then(|s| s.name()).map(|n| n.as_str().to_string()).unwrap_or_default();
                (i.instance_id().unwrap_or_default().to_string(), state, tags)
            })
            .collect()
    }

    /// The boot script an instance was launched with (its user data).
    async fn boot_script(&self, instance_id: &str) -> String {
        let user_data = self
            .ec2
            .describe_instance_attribute()
            .instance_id(instance_id)
            .attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData)
            .send()
            .await
            .expect("DescribeInstanceAttribute");
        let user_data = user_data.user_data().and_then(|u| u.value()).expect("user data");
        String::from_utf8(aws_smithy_types::base64::decode(user_data).expect("base64")).expect("UTF-8")
    }

    async fn parameter(&self, name: &str) -> Option<aws_sdk_ssm::types::Parameter> {
        match self.ssm.get_parameter().name(name).with_decryption(true).send().await {
            Ok(out) => out.parameter().cloned(),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_parameter_not_found()) => None,
            Err(err) => panic!("GetParameter {name}: {err:?}"),
        }
    }
}

/// A provisioner registered over the API, its token stored where the
/// function reads it, a launch template in EC2, and the function's cold
/// start with clients limited to its grants.
struct Fixture {
    stack: TestStack,
    cloud: Cloud,
    stage: String,
    ws: String,
    token: String,
    template_id: String,
    provisioner: AwsProvisioner,
}

async fn fixture(settings: Value) -> Fixture {
    fixture_on(settings, baton_devhost::HostOptions::default()).await
}

/// [`fixture`] on a dev host with `options` (answers it loses, …).
async fn fixture_on(settings: Value, options: baton_devhost::HostOptions) -> Fixture {
    fixture_with(settings, options, |http| http).await
}

/// [`fixture_on`], the function's AWS client made as slow or as lagging as
/// AWS can be by `like_aws` (`FaultyHttpClient::with_latency`, `with_describe_lag`).
async fn fixture_with(
    settings: Value,
    options: baton_devhost::HostOptions,
    like_aws: fn(FaultyHttpClient) -> FaultyHttpClient,
) -> Fixture {
    let stack = TestStack::start_custom(|_| {}, HashMap::new(), options).await;
    let cloud = Cloud::new().await;
    let stage = stack.provisioned.plan.prefix.trim_start_matches("baton-").trim_end_matches('-').to_string();
    let ws = workspace();
    let mut body = json!({"name": "aws", "label_sets": [["linux"]], "max_instances": 2, "jobs_per_instance": 1});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), settings.as_object()) {
        body.extend(extra.clone());
    }
    let (_, token) = stack.create_provisioner(&ws, body).await;

    // The operator's side of the set-up: the token in a SecureString, a
    // launch template naming an image.
    let token_parameter = format!("/ops/{stage}/baton-provisioner-token");
    cloud
        .ssm
        .put_parameter()
        .name(&token_parameter)
        .value(&token)
        .r#type(ParameterType::SecureString)
        .send()
        .await
        .expect("PutParameter");
    let images = cloud.ec2.describe_images().send().await.expect("DescribeImages");
    let image = images.images().first().and_then(|i| i.image_id()).expect("moto has images").to_string();
    let template_name = format!("baton-{stage}-runners");
    let template = cloud
        .ec2
        .create_launch_template()
        .launch_template_name(&template_name)
        .launch_template_data(
            RequestLaunchTemplateData::builder().image_id(image).instance_type("t3.micro".into()).build(),
        )
        .send()
        .await
        .expect("CreateLaunchTemplate");
    let template_id =
        template.launch_template().and_then(|t| t.launch_template_id()).expect("a template id").to_string();

    let env: HashMap<String, String> = [
        ("BATON_STAGE", stage.as_str()),
        ("BATON_API_URL", stack.api.as_str()),
        ("BATON_PROVISIONER_TOKEN_PARAMETER", token_parameter.as_str()),
        ("BATON_LAUNCH_TEMPLATE", template_name.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let settings = Settings::from_map(&env).expect("settings");
    let (ec2, ssm) = granted_clients(like_aws).await;
    let provisioner = AwsProvisioner::start(settings, ec2, ssm, reqwest::Client::new())
        .await
        .expect("the cold start reads its token");
    Fixture { stack, cloud, stage, ws, token, template_id, provisioner }
}

/// EC2 and SSM clients that may do only what resources.json grants the
/// function (`localstack/src/grants.rs`): a missing grant fails here as IAM
/// would fail it on AWS.
async fn granted_clients(
    like_aws: fn(FaultyHttpClient) -> FaultyHttpClient,
) -> (aws_sdk_ec2::Client, aws_sdk_ssm::Client) {
    let resources = Resources::load();
    let function = &resources.aws_provisioner.as_ref().expect("resources.json has aws_provisioner").function;
    let grants = Arc::new(Grants::of(function).expect("its permissions parse"));
    let http = like_aws(
        FaultyHttpClient::new(aws_smithy_http_client::Builder::new().build_http(), Arc::new(FaultPlan::none()))
            .with_grants(Some(grants)),
    );
    let config = sdk_config().await;
    (
        aws_sdk_ec2::Client::from_conf(aws_sdk_ec2::config::Builder::from(&config).http_client(http.clone()).build()),
        aws_sdk_ssm::Client::from_conf(aws_sdk_ssm::config::Builder::from(&config).http_client(http).build()),
    )
}

/// How long an invocation of the function may run (its Lambda timeout).
const TICK_TIMEOUT: Duration = Duration::from_secs(30);

impl Fixture {
    /// One invocation, as the schedule makes it: ended at its timeout, as
    /// Lambda ends it, and a tick that would run past it fails here.
    async fn tick(&self) -> Tick {
        let invocation = self.provisioner.tick(SystemTime::now() + TICK_TIMEOUT);
        tokio::time::timeout(TICK_TIMEOUT, invocation)
            .await
            .expect("the tick ended within the function's timeout")
            .expect("the tick succeeds")
    }

    async fn wait_queued(&self) {
        wait_for("the job in demand", WAIT, || async {
            let demand = self.stack.get_ok("/v1/provisioners/demand", &self.token).await;
            (demand["label_sets"][0]["queued"].as_u64() >= Some(1)).then_some(())
        })
        .await;
    }
}

fn one_job(run: &str) -> String {
    format!("jobs:\n  build:\n    runs-on: linux\n    steps:\n      - run: {run}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queued_job_launches_an_instance_whose_runner_runs_it_and_its_end_releases_the_reservation() {
    let f = fixture(json!({})).await;
    let run_id = f.stack.create_run(&f.ws, &one_job("echo hello from EC2")).await.id();
    f.wait_queued().await;

    let tick = f.tick().await;
    assert_eq!((tick.reserved, tick.launched, tick.launch_failures), (1, 1, 0), "{tick:?}");
    let instances = f.cloud.instances(&f.stage).await;
    assert_eq!(instances.len(), 1, "one instance for one job: {instances:?}");
    let (instance_id, _, tags) = &instances[0];
    assert_eq!(tags.get("aws:ec2launchtemplate:id"), Some(&f.template_id), "launched from the operator's template");
    assert_eq!(tags.get("baton:stage"), Some(&f.stage));
    assert_eq!(
        tags.get("baton:provisioner").map(String::as_str),
        Some(f.provisioner.provisioner_id.to_string().as_str())
    );
    let reservation = tags.get("baton:reservation").expect("the reservation tag").clone();
    let parameter_name = format!("/baton/{}/runner-tokens/{reservation}", f.stage);
    assert_eq!(tags.get("baton:token-parameter"), Some(&parameter_name));
    let script = f.cloud.boot_script(instance_id).await;
    assert!(script.contains(&format!("BATON_TOKEN_PARAMETER='{parameter_name}'")), "{script}");
    assert!(script.contains("aws ssm delete-parameter"), "the repo's boot script");

    // Baton knows the instance, booting, tied to its reservation.
    let known = f.stack.instances(&f.token).await;
    assert_eq!(known.len(), 1, "{known:#?}");
    assert_eq!(
        (known[0]["provider_runner_id"].as_str(), known[0]["state"].as_str()),
        (Some(instance_id.as_str()), Some("booting"))
    );
    assert_eq!(known[0]["reservation_id"].as_str(), Some(reservation.as_str()));

    // The boot script: read the SecureString, delete it, start the runner.
    let parameter = f.cloud.parameter(&parameter_name).await.expect("the token waits for its instance");
    assert_eq!(parameter.r#type(), Some(&ParameterType::SecureString));
    let runner_token = parameter.value().expect("a value").to_string();
    assert!(runner_token.starts_with("brt_"), "an ephemeral registration token");
    f.cloud.ssm.delete_parameter().name(&parameter_name).send().await.expect("DeleteParameter");
    let mut runner = Runner::start(&f.stack, &runner_token, "linux", &["--name", instance_id]);

    f.stack.wait_view(&f.ws, &run_id, "the run to succeed", |v| v["status"] == "succeeded").await;
    let status = runner.exited(WAIT).await;
    assert!(status.success(), "the ephemeral runner exits 0 once its one job is done: {status:?}");

    // The tick in between sees the instance running (moto runs it at once).
    let tick = f.tick().await;
    assert_eq!(tick.launched, 0, "the job ran: nothing more to launch");
    // ... and the boot script powers the machine off (shutdown behaviour
    // terminate): played here by terminating it.
    f.cloud.ec2.terminate_instances().instance_ids(instance_id).send().await.expect("TerminateInstances");
    let released = std::sync::atomic::AtomicU32::new(tick.reservations_released);
    let known = wait_for("the instance reported terminated", WAIT, || async {
        let tick = f.tick().await;
        released.fetch_add(tick.reservations_released, std::sync::atomic::Ordering::Relaxed);
        let known = f.stack.instances(&f.token).await;
        (known.first().is_some_and(|i| i["state"] == "terminated")).then_some(known)
    })
    .await;
    assert_eq!(known.len(), 1);
    let reservations = f.stack.items_of("reservation").await;
    assert_eq!(reservations.len(), 1, "one reservation for one job");
    assert!(
        reservations[0].contains_key("released_at"),
        "the ended machine released its reservation: {reservations:?}"
    );
    let released = released.into_inner();
    assert!(released >= 1, "a report released it ({released})");
    assert!(f.cloud.parameter(&parameter_name).await.is_none(), "no token lingers");
    let ending = f.cloud.instances(&f.stage).await;
    assert!(ending.iter().all(|(_, state, _)| state == "terminated"), "{ending:?}");
}

/// A burst bigger than one invocation can launch (`RunInstances` answered
/// in 2 s, as AWS at its slowest; the function has 30 s) is launched over
/// several ticks, none of them killed at its timeout: each stops launching
/// in time, and the next sends the kept reserve again for the rest, which
/// launches nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_forty_is_launched_over_several_ticks_none_killed_at_its_timeout() {
    let f = fixture_with(json!({"max_instances": 40}), baton_devhost::HostOptions::default(), |http| {
        http.with_latency("ec2", "RunInstances", Duration::from_secs(2))
    })
    .await;
    let jobs: String = (0..40).map(|i| format!("  j{i}:\n    runs-on: linux\n    steps: [{{run: echo}}]\n")).collect();
    f.stack.create_run(&f.ws, &format!("jobs:\n{jobs}")).await;
    wait_for("the burst in demand", WAIT, || async {
        let demand = f.stack.get_ok("/v1/provisioners/demand", &f.token).await;
        (demand["label_sets"][0]["queued"].as_u64() >= Some(40)).then_some(())
    })
    .await;

    let mut ticks = Vec::new();
    while ticks.iter().map(|t: &Tick| t.launched).sum::<u32>() < 40 && ticks.len() < 10 {
        ticks.push(f.tick().await);
    }
    let launched: u32 = ticks.iter().map(|t| t.launched).sum();
    assert_eq!(launched, 40, "{ticks:#?}");
    assert!(ticks.len() > 1, "more than one invocation's worth: {ticks:#?}");
    assert!(ticks[0].launches_deferred > 0, "the first tick left the rest to the next: {:?}", ticks[0]);
    assert_eq!(ticks.iter().map(|t| t.launch_failures).sum::<u32>(), 0, "{ticks:#?}");
    let instances = f.cloud.instances(&f.stage).await;
    let reservations: std::collections::HashSet<&String> =
        instances.iter().filter_map(|(_, _, tags)| tags.get("baton:reservation")).collect();
    assert_eq!((instances.len(), reservations.len()), (40, 40), "one instance a reservation, none twice");
}

/// EC2 lists a fresh launch late (its describe calls are eventually
/// consistent; the local stack lags a minute here): the next tick does not
/// take the missing instance for gone, so its reservation holds, nothing
/// is launched in its place, and its runner would not be refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instance_ec2_does_not_list_yet_is_neither_reported_terminated_nor_replaced() {
    let f = fixture_with(json!({}), baton_devhost::HostOptions::default(), |http| {
        http.with_describe_lag(Duration::from_secs(60))
    })
    .await;
    f.stack.create_run(&f.ws, &one_job("echo listed late")).await;
    f.wait_queued().await;
    let first = f.tick().await;
    assert_eq!((first.reserved, first.launched), (1, 1), "{first:?}");

    let second = f.tick().await;
    assert_eq!((second.launched, second.reservations_released), (0, 0), "{second:?}");
    let known = f.stack.instances(&f.token).await;
    assert_eq!(known.len(), 1, "{known:#?}");
    assert_eq!(known[0]["state"], "booting", "not taken for gone: {known:#?}");
    let reservations = f.stack.items_of("reservation").await;
    assert!(reservations.iter().all(|r| !r.contains_key("released_at")), "{reservations:?}");
}

/// Labels allow sets far longer than an EC2 tag value (256 characters, as
/// the local stack enforces it like AWS): such a set still launches, its
/// `baton:labels` tag shortened, its boot script carrying every label.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_label_set_longer_than_a_tag_value_launches_with_its_tag_shortened_and_every_label_booted() {
    let labels: Vec<String> = (0..12).map(|i| format!("pool-{i:02}-{}", "x".repeat(30))).collect();
    let joined = labels.join(",");
    assert!(joined.len() > 256, "longer than a tag value");
    let f = fixture(json!({"label_sets": [labels]})).await;
    let job = format!("jobs:\n  build:\n    runs-on: [{}]\n    steps:\n      - run: echo long\n", labels.join(", "));
    f.stack.create_run(&f.ws, &job).await;
    f.wait_queued().await;

    let tick = f.tick().await;
    assert_eq!((tick.reserved, tick.launched, tick.launch_failures), (1, 1, 0), "{tick:?}");
    let instances = f.cloud.instances(&f.stage).await;
    assert_eq!(instances.len(), 1, "{instances:?}");
    let (instance_id, _, tags) = &instances[0];
    let tag = tags.get("baton:labels").expect("the labels tag");
    assert!(tag.chars().count() <= 256 && tag.starts_with("pool-00-"), "{tag}");
    let script = f.cloud.boot_script(instance_id).await;
    assert!(script.contains(&format!("BATON_LABELS='{joined}'")), "{script}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instance_that_never_registers_is_terminated_on_its_orphan_intent_and_its_unread_token_deleted() {
    let f = fixture(json!({"boot_timeout_s": 10})).await;
    f.stack.create_run(&f.ws, &one_job("echo never")).await.id();
    f.wait_queued().await;
    let tick = f.tick().await;
    assert_eq!(tick.launched, 1, "{tick:?}");
    let instances = f.cloud.instances(&f.stage).await;
    let (instance_id, _, tags) = instances.first().cloned().expect("an instance");
    let parameter_name = tags.get("baton:token-parameter").cloned().expect("its token parameter");
    assert!(f.cloud.parameter(&parameter_name).await.is_some());

    // No runner starts: after boot_timeout_s Baton wants it gone.
    wait_for("the orphan intent", Duration::from_secs(60), || async {
        let known = f.stack.instances(&f.token).await;
        known
            .iter()
            .any(|i| i["provider_runner_id"] == instance_id.as_str() && i["terminate"]["reason"] == "orphan")
            .then_some(())
    })
    .await;
    let tick = f.tick().await;
    assert_eq!((tick.terminated, tick.orphans_terminated), (1, 1), "{tick:?}");
    let state = f.cloud.instances(&f.stage).await.into_iter().find(|(id, _, _)| *id == instance_id).map(|(_, s, _)| s);
    assert!(
        matches!(state.as_deref(), Some("shutting-down" | "terminated")),
        "TerminateInstances was called: {state:?}"
    );
    assert!(f.cloud.parameter(&parameter_name).await.is_none(), "the unread token was deleted with its instance");
    let known = f.stack.instances(&f.token).await;
    let view = known.iter().find(|i| i["provider_runner_id"] == instance_id.as_str()).expect("still listed");
    assert!(matches!(view["state"].as_str(), Some("terminating" | "terminated")), "{view:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reserve_whose_answers_were_lost_is_sent_again_by_the_next_tick_and_the_reservation_it_made_launched() {
    // Every answer of the reserve route is lost (the reserves are applied):
    // the first tick reserves, never hears of it, and its reservation
    // holds the job's demand. Asked anew, Baton would grant nothing until
    // that reservation expired; the next tick must send the same reserve
    // again and launch what it made.
    let options = baton_devhost::HostOptions::default();
    let lost = options.answers_lost.clone();
    let f = fixture_on(json!({}), options).await;
    f.stack.create_run(&f.ws, &one_job("echo after a lost answer")).await.id();
    f.wait_queued().await;

    lost.lock().expect("the list").push("/v1/provisioners/reservations".into());
    let tick = f.tick().await;
    assert_eq!((tick.reserved, tick.launched, tick.reserves_unanswered), (0, 0, 1), "{tick:?}");
    assert!(f.cloud.instances(&f.stage).await.is_empty(), "nothing launched without an answer");
    let made = f.stack.items_of("reservation").await;
    assert_eq!(made.len(), 1, "the lost answers' reserve was applied, and its tries made one: {made:?}");
    let reservation = made[0].get("id").and_then(|v| v.as_s().ok()).expect("its id").clone();
    let demand = f.stack.get_ok("/v1/provisioners/demand", &f.token).await;
    assert_eq!(demand["label_sets"][0]["queued"], 0, "its reservation holds the demand: {demand:#}");

    lost.lock().expect("the list").clear();
    let tick = f.tick().await;
    assert_eq!((tick.reserved, tick.launched, tick.reserves_unanswered), (1, 1, 0), "{tick:?}");
    let instances = f.cloud.instances(&f.stage).await;
    assert_eq!(instances.len(), 1, "{instances:?}");
    assert_eq!(
        instances[0].2.get("baton:reservation"),
        Some(&reservation),
        "the machine is the reservation the lost answers held"
    );
    assert_eq!(f.stack.items_of("reservation").await.len(), 1, "no second reservation");
    let kept = f
        .cloud
        .ssm
        .get_parameters_by_path()
        .path(format!("/baton/{}/runner-tokens", f.stage))
        .send()
        .await
        .expect("GetParametersByPath");
    let names: Vec<&str> = kept.parameters().iter().filter_map(|p| p.name()).collect();
    assert_eq!(
        names,
        vec![format!("/baton/{}/runner-tokens/{reservation}", f.stage).as_str()],
        "the answered reserve is no longer kept; the instance's token waits for it"
    );

    // The token the repeat handed back is the reservation's: its runner
    // registers and runs the job.
    let parameter_name = format!("/baton/{}/runner-tokens/{reservation}", f.stage);
    let runner_token = f.cloud.parameter(&parameter_name).await.and_then(|p| p.value().map(str::to_string));
    let runner_token = runner_token.expect("the token waits for its instance");
    f.cloud.ssm.delete_parameter().name(&parameter_name).send().await.expect("DeleteParameter");
    let instance_id = instances[0].0.clone();
    let mut runner = Runner::start(&f.stack, &runner_token, "linux", &["--name", &instance_id]);
    let status = runner.exited(WAIT).await;
    assert!(status.success(), "the ephemeral runner ran its one job and exited 0: {status:?}");
}
