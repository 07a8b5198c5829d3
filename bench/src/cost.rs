//! The cost model: what a unit of work (a job, a run, a month of idling)
//! costs at published list prices, from the requests the bench counted.
//!
//! Prices are us-east-1 on-demand list prices, read on 2026-12-02 from the
//! pages named on each constant; free tiers and volume tiers are ignored (a
//! fleet worth benchmarking is past the free tier, far from the volume tiers).
//! What the model leaves out: storage (DynamoDB GB-months, outbox items expire
//! by TTL), CloudWatch Logs ingestion, X-Ray, data transfer, and the Lambda
//! INIT phase of cold starts. DynamoDB Streams reads made by a Lambda trigger
//! are free, so the relay's `GetRecords` cost nothing.

use serde::Serialize;

/// DynamoDB on-demand, per write request unit (1 KB of item, twice in a
/// transaction): $0.625 per million. <https://aws.amazon.com/dynamodb/pricing/on-demand/>
pub const DYNAMODB_WRITE_UNIT_USD: f64 = 0.625 / 1e6;
/// DynamoDB on-demand, per read request unit (4 KB strongly consistent read,
/// half for an eventually consistent one): $0.125 per million. Same page.
pub const DYNAMODB_READ_UNIT_USD: f64 = 0.125 / 1e6;
/// Step Functions Standard, per state transition: $0.025 per 1,000.
/// <https://aws.amazon.com/step-functions/pricing/>
pub const SFN_TRANSITION_USD: f64 = 0.025 / 1e3;
/// Lambda, per request: $0.20 per million. <https://aws.amazon.com/lambda/pricing/>
pub const LAMBDA_REQUEST_USD: f64 = 0.20 / 1e6;
/// Lambda on Arm (Graviton), per GB-second, first tier. Same page.
pub const LAMBDA_ARM_GB_SECOND_USD: f64 = 0.000_013_333_4;
/// SQS standard queue, per request (each 64 KB chunk): $0.40 per million.
/// <https://aws.amazon.com/sqs/pricing/>
pub const SQS_REQUEST_USD: f64 = 0.40 / 1e6;
/// EventBridge, per custom event published (each 64 KB chunk): $1.00 per
/// million. <https://aws.amazon.com/eventbridge/pricing/>
pub const EVENTBRIDGE_EVENT_USD: f64 = 1.00 / 1e6;
/// API Gateway HTTP API, per request (each 512 KB chunk), first 300 million
/// a month: $1.00 per million. <https://aws.amazon.com/api-gateway/pricing/>
pub const HTTP_API_REQUEST_USD: f64 = 1.00 / 1e6;

/// API Gateway WebSocket API, per message (each 32 KB chunk), sent or
/// received, first billion a month: $1.00 per million. Same page.
pub const WEBSOCKET_MESSAGE_USD: f64 = 1.00 / 1e6;
/// API Gateway WebSocket API, per connection-minute: $0.25 per million. Same page.
pub const WEBSOCKET_CONNECTION_MINUTE_USD: f64 = 0.25 / 1e6;
/// API Gateway closes a WebSocket after 2 hours; the runner reconnects.
pub const WEBSOCKET_MAX_LIFE_S: f64 = 2.0 * 3600.0;

/// The memory every function gets (`functionMemoryMb`, the CDK stack's default).
pub const FUNCTION_MEMORY_MB: f64 = 256.0;
/// Billed Lambda time is modelled, not measured: the emulator answers several
/// times slower than DynamoDB in-region (single-digit ms), and its answers
/// queue behind one lock. An invocation is billed this much of its own time …
pub const ASSUMED_HANDLER_MS: f64 = 3.0;
/// … plus this much for every AWS request it makes (an in-region round trip).
pub const ASSUMED_AWS_REQUEST_MS: f64 = 10.0;
/// Seconds in a 30-day month.
pub const MONTH_S: f64 = 30.0 * 24.0 * 3600.0;

/// Billable usage of some unit of work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    pub dynamodb_read_units: f64,
    pub dynamodb_write_units: f64,
    pub sfn_transitions: f64,
    pub lambda_invocations: f64,
    pub lambda_gb_seconds: f64,
    pub sqs_requests: f64,
    pub eventbridge_events: f64,
    pub api_requests: f64,
    pub websocket_messages: f64,
    pub websocket_connection_minutes: f64,
}

impl Usage {
    /// The same usage `k` times (or divided, with `k` < 1).
    pub fn scaled(&self, k: f64) -> Usage {
        Usage {
            dynamodb_read_units: self.dynamodb_read_units * k,
            dynamodb_write_units: self.dynamodb_write_units * k,
            sfn_transitions: self.sfn_transitions * k,
            lambda_invocations: self.lambda_invocations * k,
            lambda_gb_seconds: self.lambda_gb_seconds * k,
            sqs_requests: self.sqs_requests * k,
            eventbridge_events: self.eventbridge_events * k,
            api_requests: self.api_requests * k,
            websocket_messages: self.websocket_messages * k,
            websocket_connection_minutes: self.websocket_connection_minutes * k,
        }
    }

    /// Two usages together.
    pub fn plus(&self, other: &Usage) -> Usage {
        Usage {
            dynamodb_read_units: self.dynamodb_read_units + other.dynamodb_read_units,
            dynamodb_write_units: self.dynamodb_write_units + other.dynamodb_write_units,
            sfn_transitions: self.sfn_transitions + other.sfn_transitions,
            lambda_invocations: self.lambda_invocations + other.lambda_invocations,
            lambda_gb_seconds: self.lambda_gb_seconds + other.lambda_gb_seconds,
            sqs_requests: self.sqs_requests + other.sqs_requests,
            eventbridge_events: self.eventbridge_events + other.eventbridge_events,
            api_requests: self.api_requests + other.api_requests,
            websocket_messages: self.websocket_messages + other.websocket_messages,
            websocket_connection_minutes: self.websocket_connection_minutes + other.websocket_connection_minutes,
        }
    }
}

/// Lambda GB-seconds under the model above: `invocations` that together made
/// `aws_requests` requests, at `memory_mb`.
pub fn modelled_gb_seconds(invocations: f64, aws_requests: f64, memory_mb: f64) -> f64 {
    (invocations * ASSUMED_HANDLER_MS + aws_requests * ASSUMED_AWS_REQUEST_MS) / 1000.0 * memory_mb / 1024.0
}

/// Dollars, by service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Cost {
    pub dynamodb: f64,
    pub step_functions: f64,
    pub lambda: f64,
    pub sqs: f64,
    pub eventbridge: f64,
    pub api_gateway: f64,
    pub total: f64,
}

/// What `usage` costs at the list prices above.
pub fn price(usage: &Usage) -> Cost {
    let dynamodb =
        usage.dynamodb_read_units * DYNAMODB_READ_UNIT_USD + usage.dynamodb_write_units * DYNAMODB_WRITE_UNIT_USD;
    let step_functions = usage.sfn_transitions * SFN_TRANSITION_USD;
    let lambda = usage.lambda_invocations * LAMBDA_REQUEST_USD + usage.lambda_gb_seconds * LAMBDA_ARM_GB_SECOND_USD;
    let sqs = usage.sqs_requests * SQS_REQUEST_USD;
    let eventbridge = usage.eventbridge_events * EVENTBRIDGE_EVENT_USD;
    let api_gateway = usage.api_requests * HTTP_API_REQUEST_USD
        + usage.websocket_messages * WEBSOCKET_MESSAGE_USD
        + usage.websocket_connection_minutes * WEBSOCKET_CONNECTION_MINUTE_USD;
    Cost {
        dynamodb,
        step_functions,
        lambda,
        sqs,
        eventbridge,
        api_gateway,
        total: dynamodb + step_functions + lambda + sqs + eventbridge + api_gateway,
    }
}

/// What one idle runner costs a month: it polls the claim route, each poll
/// held open by the claim function for `wait_s` seconds (Lambda bills that
/// wall time), then pauses `pause_s` before the next; each poll costs
/// `per_poll` besides (the reads the claim makes while it waits, the API
/// request, the invocation).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct IdleRunner {
    pub wait_s: f64,
    pub pause_s: f64,
    pub polls_per_month: f64,
    pub usage: Usage,
    pub cost: Cost,
}

pub fn idle_runner(wait_s: f64, pause_s: f64, per_poll: &Usage, memory_mb: f64) -> IdleRunner {
    let polls_per_month = MONTH_S / (wait_s + pause_s).max(1.0);
    let held = Usage { lambda_gb_seconds: wait_s * memory_mb / 1024.0, ..Usage::default() };
    let usage = per_poll.plus(&held).scaled(polls_per_month);
    IdleRunner { wait_s, pause_s, polls_per_month, usage, cost: price(&usage) }
}

/// What one idle runner holding a push socket costs a month: the socket's
/// connection-minutes, a keep-alive message every `ping_s` (and the
/// gateway's reply), a reconnect (a `$connect` invocation, `per_connect`)
/// every 2 hours when the gateway closes the socket, and a claim that
/// answers at once (`per_poll`, no held time) every `safety_poll_s`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct IdlePushedRunner {
    pub safety_poll_s: f64,
    pub ping_s: f64,
    pub polls_per_month: f64,
    pub connects_per_month: f64,
    pub usage: Usage,
    pub cost: Cost,
}

pub fn idle_pushed_runner(safety_poll_s: f64, ping_s: f64, per_poll: &Usage, per_connect: &Usage) -> IdlePushedRunner {
    let polls_per_month = MONTH_S / safety_poll_s.max(1.0);
    let connects_per_month = MONTH_S / WEBSOCKET_MAX_LIFE_S;
    let socket = Usage {
        websocket_connection_minutes: MONTH_S / 60.0,
        websocket_messages: 2.0 * MONTH_S / ping_s.max(1.0),
        ..Usage::default()
    };
    let usage = socket.plus(&per_poll.scaled(polls_per_month)).plus(&per_connect.scaled(connects_per_month));
    IdlePushedRunner { safety_poll_s, ping_s, polls_per_month, connects_per_month, usage, cost: price(&usage) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_dominate_a_job_that_costs_a_few_units_elsewhere() {
        let job = Usage {
            dynamodb_read_units: 5.0,
            dynamodb_write_units: 25.0,
            sfn_transitions: 12.0,
            lambda_invocations: 10.0,
            lambda_gb_seconds: 0.1,
            sqs_requests: 15.0,
            eventbridge_events: 5.0,
            api_requests: 4.0,
            ..Usage::default()
        };
        let thousand = price(&job.scaled(1000.0));
        // 12,000 transitions at $0.025 per 1,000.
        assert!((thousand.step_functions - 0.30).abs() < 1e-9, "{thousand:?}");
        // 25,000 WRU at $0.625/M + 5,000 RRU at $0.125/M.
        assert!((thousand.dynamodb - (0.015_625 + 0.000_625)).abs() < 1e-9, "{thousand:?}");
        let parts = thousand.dynamodb
            + thousand.step_functions
            + thousand.lambda
            + thousand.sqs
            + thousand.eventbridge
            + thousand.api_gateway;
        assert!((thousand.total - parts).abs() < 1e-12);
        assert!(thousand.step_functions > thousand.total / 2.0);
    }

    #[test]
    fn a_pushed_idle_runner_pays_for_its_socket_and_a_few_quick_polls() {
        let per_poll = Usage { lambda_invocations: 1.0, api_requests: 1.0, ..Usage::default() };
        let per_connect = Usage { lambda_invocations: 1.0, dynamodb_write_units: 1.0, ..Usage::default() };
        let idle = idle_pushed_runner(300.0, 540.0, &per_poll, &per_connect);
        assert_eq!(idle.polls_per_month, 8_640.0);
        assert_eq!(idle.connects_per_month, 360.0);
        // 43,200 connection-minutes, 9,600 messages, 8,640 API requests.
        let gateway = 43_200.0 * 0.25e-6 + 9_600.0 * 1e-6 + 8_640.0 * 1e-6;
        assert!((idle.cost.api_gateway - gateway).abs() < 1e-9, "{:?}", idle.cost);
        assert!(idle.cost.total < 0.05, "{:?}", idle.cost);
    }

    #[test]
    fn an_idle_runner_pays_mostly_for_the_time_the_claim_function_holds_its_poll() {
        let per_poll = Usage { lambda_invocations: 1.0, api_requests: 1.0, ..Usage::default() };
        let idle = idle_runner(20.0, 0.0, &per_poll, 256.0);
        assert_eq!(idle.polls_per_month, 129_600.0);
        // 129,600 polls × 20 s × 0.25 GB × $0.0000133334.
        assert!((idle.cost.lambda - (8.640_043 + 0.025_92)).abs() < 1e-3, "{:?}", idle.cost);
        assert!((idle.cost.api_gateway - 0.1296).abs() < 1e-9);
        // Polling every 5 s without holding costs the round trips only.
        let short = idle_runner(0.0, 5.0, &per_poll, 256.0);
        assert_eq!(short.polls_per_month, 518_400.0);
        assert!(short.cost.lambda < idle.cost.lambda / 10.0);
    }

    #[test]
    fn the_model_bills_time_for_requests_and_memory() {
        // 2 invocations × 3 ms + 10 requests × 10 ms = 106 ms at 0.5 GB.
        assert!((modelled_gb_seconds(2.0, 10.0, 512.0) - 0.053).abs() < 1e-12);
    }
}
