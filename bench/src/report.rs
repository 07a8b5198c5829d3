//! The printed report's tables: the claim path per operation, contention,
//! the idle runner's cost, and the previous main's report to compare with.

use std::collections::BTreeMap;

use baton_bench::cost;
use baton_domain::runners::claim::HEAD_READ;

use crate::contention::ContentionFigures;
use crate::windows::OperationFigures;

fn fmt_ops(by: &BTreeMap<String, usize>) -> String {
    by.iter().map(|(op, n)| if *n == 1 { op.clone() } else { format!("{op}×{n}") }).collect::<Vec<_>>().join(" + ")
}

pub(crate) fn verdict(meets: Option<bool>) -> &'static str {
    match meets {
        Some(true) => "meets",
        Some(false) => "MISSES",
        None => "",
    }
}

/// The claim path's per-operation table.
pub(crate) fn render_operations(ops: &[OperationFigures]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<34} {:>4} {:>3} {:>3} {:>6} {:>6}  {:<48} {}\n",
        "operation", "reqs", "rd", "wr", "RCU", "WCU", "DynamoDB requests", "target"
    ));
    for f in ops {
        let target = match &f.target {
            Some(t) => format!("{t}: {}", verdict(f.meets_target)),
            None => String::new(),
        };
        // Requests to other services ride along in the target column
        // (`+ SSM:GetParameters`: the claim that reads secrets), less the
        // dev host's trigger pollers that happened to poll meanwhile.
        let polling = |op: &str| op.starts_with("DynamoDB Streams:") || op == "SQS:ReceiveMessage";
        let others = f.other_services.iter().filter(|(op, _)| !polling(op)).map(|(op, n)| {
            if *n == 1 {
                op.clone()
            } else {
                format!("{op}×{n}")
            }
        });
        let target = others.map(|op| format!("+ {op} ")).collect::<String>() + &target;
        s.push_str(&format!(
            "{:<34} {:>4} {:>3} {:>3} {:>6.1} {:>6.1}  {:<48} {}\n",
            f.name,
            f.requests,
            f.read_requests,
            f.write_requests,
            f.read_units,
            f.write_units,
            fmt_ops(&f.by_operation),
            target
        ));
    }
    s.push_str("   (rd/wr: read/write requests; RCU/WCU: read/write capacity units as AWS would bill them;\n");
    s.push_str("    a transaction counts each of its items twice)\n\n");
    s
}

pub(crate) fn render_contention(cont: &[ContentionFigures]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:>7} {:>3} {:>6} {:>5} {:>9} {:>10} {:>8} {:>6} {:>8} {:>7} {:>7} {:>9} {:>7}  {}\n",
        "runners",
        "ws",
        "claims",
        "empty",
        "failed-cw",
        "failed/clm",
        "backlog",
        "tail",
        "reqs/clm",
        "RCU/clm",
        "WCU/clm",
        "claim p50",
        "wall s",
        "target"
    ));
    for c in cont {
        let target = match &c.target {
            Some(t) => format!("{t}: {}", verdict(c.meets_target)),
            None => String::new(),
        };
        s.push_str(&format!(
            "{:>7} {:>3} {:>6} {:>5} {:>9} {:>10.3} {:>8.3} {:>6.2} {:>8.2} {:>7.2} {:>7.2} {:>7.0}ms {:>7.1}  {}\n",
            c.runners,
            c.workspaces,
            c.claims,
            c.empty_claims,
            c.failed_conditional_writes,
            c.failed_conditional_writes_per_claim,
            c.failed_per_claim_backlog,
            c.failed_per_claim_tail,
            c.dynamodb_requests_per_claim,
            c.read_units_per_claim,
            c.write_units_per_claim,
            c.claim_http_median_ms,
            c.wall_seconds,
            target
        ));
        if c.claim_errors > 0 {
            s.push_str(&format!("        ({} claim/complete calls answered an error)\n", c.claim_errors));
        }
    }
    s.push_str(&format!(
        "   (failed-cw: conditional writes that failed, mostly lost claim races; failed/clm: per successful claim,\n\
         \x20   over the whole drain, then split: backlog = while ≥ {HEAD_READ} jobs were left (the claim window), tail = the last\n\
         \x20   {HEAD_READ}; empty: 204 answers; wall seconds and latencies are information only: the emulator is slow)\n"
    ));
    for c in cont {
        let times: Vec<String> = c.median_ms_by_operation.iter().map(|(op, ms)| format!("{op} {ms:.0} ms")).collect();
        s.push_str(&format!(
            "   emulator median answer, {} runner(s), {} workspace(s): {}\n",
            c.runners,
            c.workspaces,
            times.join(", ")
        ));
    }
    s
}

pub(crate) fn render_idle(idle: &[(cost::IdleRunner, cost::Usage)]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:>6} {:>6} {:>12} {:>14} {:>8} {:>8} {:>9} {:>9} {:>9}\n",
        "wait", "pause", "polls/month", "RCU per poll", "invoc", "$/month", "Lambda", "DynamoDB", "API GW"
    ));
    for (i, per_poll) in idle {
        s.push_str(&format!(
            "{:>5.0}s {:>5.0}s {:>12.0} {:>14.1} {:>8.2} {:>8.3} {:>9.3} {:>9.3} {:>9.3}\n",
            i.wait_s,
            i.pause_s,
            i.polls_per_month,
            per_poll.dynamodb_read_units,
            per_poll.lambda_invocations,
            i.cost.total,
            i.cost.lambda,
            i.cost.dynamodb,
            i.cost.api_gateway
        ));
    }
    s.push_str(&format!(
        "   (first row: the agent's default, a 20 s long poll back to back; the claim function is billed for the time\n\
         \x20   it holds a poll open, at {} MB. Second row: `--claim-wait-s 0`, the agent then backs off to the\n\
         \x20   session's poll_interval_s, 5 s by default. Reads per poll measured; no writes while idle)\n",
        cost::FUNCTION_MEMORY_MB
    ));
    s
}

/// The agent's default keep-alive period (`--push-ping-s`).
pub(crate) const PUSH_PING_S: f64 = 540.0;

pub(crate) fn render_idle_pushed(
    p: &cost::IdlePushedRunner,
    per_connect: &cost::Usage,
    long_poll_month: Option<f64>,
) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:>12} {:>8} {:>13} {:>14} {:>9} {:>9} {:>9} {:>9}   {}\n",
        "safety poll",
        "ping",
        "polls/month",
        "connects/month",
        "$/month",
        "API GW",
        "Lambda",
        "DynamoDB",
        "target ≤ $0.05"
    ));
    s.push_str(&format!(
        "{:>11.0}s {:>7.0}s {:>13.0} {:>14.0} {:>9.4} {:>9.4} {:>9.4} {:>9.4}   {}\n",
        p.safety_poll_s,
        p.ping_s,
        p.polls_per_month,
        p.connects_per_month,
        p.cost.total,
        p.cost.api_gateway,
        p.cost.lambda,
        p.cost.dynamodb,
        verdict(Some(p.cost.total <= 0.05))
    ));
    s.push_str(&format!(
        "   (API GW: 43,200 connection-minutes, a ping and its reply every {:.0} s, and the safety polls' HTTP requests;\n\
         \x20   a socket measured at {:.1} RCU, {:.1} WCU, {:.0} invocations ($connect, $disconnect), renewed every 2 h;\n\
         \x20   each safety poll is the `--claim-wait-s 0` poll above. Previous main (20 s long polls): {})\n",
        p.ping_s,
        per_connect.dynamodb_read_units,
        per_connect.dynamodb_write_units,
        per_connect.lambda_invocations,
        long_poll_month.map_or("not measured".to_string(), |m| format!("${m:.2} a month"))
    ));
    s
}
