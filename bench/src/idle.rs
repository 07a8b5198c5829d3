//! What an idle runner costs: its long polls finding nothing, and the
//! `$connect` of its push socket, each measured with nothing queued.

use baton_bench::cost::{self, Usage};
use baton_tests::TestStack;

use crate::recorder::{Recorder, Request};
use crate::windows::settle_except;
use crate::workflows::RUNS_ON;

/// Idle polling, measured: one runner alone, nothing queued, for `polls`
/// long polls of `wait_s`; returns the usage of one poll (its Lambda time
/// priced separately by [`cost::idle_runner`]).
pub(crate) async fn idle_poll(
    stack: &TestStack,
    recorder: &Recorder,
    workspace: &str,
    wait_s: u64,
    polls: usize,
) -> Usage {
    let runner = stack.runner(workspace, &[RUNS_ON]).await;
    settle_except(recorder, "").await;
    let (mark, invocation_mark) = (recorder.mark(), stack.host.invocations.mark());
    let client = baton_client::Client::new(&stack.api).expect("a client");
    for _ in 0..polls {
        let got = client.claim(&runner.session_token, wait_s, uuid::Uuid::now_v7(), false).await;
        assert!(matches!(got, Ok(None)), "an idle poll finds nothing: {got:?}");
    }
    let window = recorder.since(mark);
    let invocations = stack.host.invocations.since(invocation_mark);
    // The held time is priced by the caller; this is the requests' part.
    usage_per(&window, &invocations, polls, true)
}

/// What one `$connect` of a runner's push socket costs (the push-connect
/// invocation and its reads and write): `connects` sockets opened and
/// closed one after the other, averaged.
pub(crate) async fn idle_connect(stack: &TestStack, recorder: &Recorder, workspace: &str, connects: usize) -> Usage {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let url = stack.host.config.push.url.clone().expect("the bench's stack serves the push socket");
    let runner = stack.runner(workspace, &[RUNS_ON]).await;
    settle_except(recorder, "").await;
    let (mark, invocation_mark) = (recorder.mark(), stack.host.invocations.mark());
    for _ in 0..connects {
        let mut request = url.as_str().into_client_request().expect("a request");
        let bearer = format!("Bearer {}", runner.session_token);
        request.headers_mut().insert(http::header::AUTHORIZATION, bearer.parse().expect("a header value"));
        let (mut socket, _) = tokio_tungstenite::connect_async(request).await.expect("the socket opens");
        let _ = socket.close(None).await;
    }
    let window: Vec<Request> =
        recorder.since(mark).into_iter().filter(|r| r.function.as_deref() == Some("push-connect")).collect();
    let invocations: Vec<_> =
        stack.host.invocations.since(invocation_mark).into_iter().filter(|r| r.function == "push-connect").collect();
    // `$connect` and `$disconnect` both invoke it; neither is an HTTP API request.
    usage_per(&window, &invocations, connects, false)
}

/// The usage of `n` units of idle work from its requests and invocations:
/// DynamoDB units, invocations, modelled Lambda time, and (`http`) the
/// invocations that answered an HTTP API request.
fn usage_per(window: &[Request], invocations: &[baton_devhost::invocations::Record], n: usize, http: bool) -> Usage {
    let ddb: Vec<&Request> = window.iter().filter(|r| r.is_dynamodb()).collect();
    let n = n.max(1) as f64;
    Usage {
        dynamodb_read_units: ddb.iter().map(|r| r.read_units).sum::<f64>() / n,
        dynamodb_write_units: ddb.iter().map(|r| r.write_units).sum::<f64>() / n,
        lambda_invocations: invocations.len() as f64 / n,
        lambda_gb_seconds: cost::modelled_gb_seconds(
            invocations.len() as f64,
            window.iter().filter(|r| r.function.is_some()).count() as f64,
            cost::FUNCTION_MEMORY_MB,
        ) / n,
        api_requests: if http { invocations.iter().filter(|r| r.status.is_some()).count() as f64 / n } else { 0.0 },
        ..Usage::default()
    }
}
