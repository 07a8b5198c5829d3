//! AWS's limits that moto does not enforce, enforced by the local stack so
//! that a test whose writes would fail on AWS fails locally, with the error
//! AWS answers (`faults::FaultyHttpClient` checks every request the dev
//! host's functions send, faults or not):
//!
//! | service | limit |
//! | --- | --- |
//! | DynamoDB | item 400 KB; partition key 2048 bytes, sort key 1024; numbers of magnitude 1e-130 to 1e126 and 38 digits; a transaction 100 items and 4 MB; a batch write 25 items |
//! | EventBridge | `PutEvents`: 10 entries, 256 KB of entries (each counted as 14 bytes + source + detail type + detail + resources) |
//! | SQS | a message (or a batch's messages) 256 KB; a batch 10 entries |
//! | Step Functions | execution input and task output 256 KB; a failure's cause 32,768 characters |
//! | SSM | `PutParameter`: no `{{`…`}}` in a value (Parameter Store reserves it for references to other parameters) |
//! | EC2 | a tag's key 128 characters, its value 256 (`RunInstances`' tag specifications, `CreateTags`) |
//!
//! Sizes follow AWS's own accounting closely enough to catch what matters:
//! a DynamoDB item is its attribute names plus their values' bytes (numbers
//! about half a byte a digit), which is what the 400 KB limit counts.

use serde_json::Value;

/// DynamoDB's largest item.
pub const DYNAMODB_ITEM_BYTES: usize = 400 * 1024;
/// DynamoDB's largest partition key value.
pub const DYNAMODB_PARTITION_KEY_BYTES: usize = 2048;
/// DynamoDB's largest sort key value.
pub const DYNAMODB_SORT_KEY_BYTES: usize = 1024;
/// The most items of one `TransactWriteItems`.
pub const DYNAMODB_TRANSACTION_ITEMS: usize = 100;
/// The largest `TransactWriteItems`, by its items' sizes.
pub const DYNAMODB_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;
/// The most entries of one `PutEvents`.
pub const EVENTS_ENTRIES: usize = 10;
/// The largest `PutEvents`, by its entries' sizes.
pub const EVENTS_BYTES: usize = 256 * 1024;
/// The largest SQS message (or batch of messages).
pub const SQS_MESSAGE_BYTES: usize = 256 * 1024;
/// The largest Step Functions execution input or task output.
pub const STATES_PAYLOAD_BYTES: usize = 256 * 1024;
/// The longest EC2 tag key, in characters.
pub const EC2_TAG_KEY_CHARS: usize = 128;
/// The longest EC2 tag value, in characters.
pub const EC2_TAG_VALUE_CHARS: usize = 256;

/// What AWS answers a request over a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub error: &'static str,
    pub message: String,
}

fn refuse(error: &'static str, message: impl Into<String>) -> Option<Refusal> {
    Some(Refusal { status: 400, error, message: message.into() })
}

const VALIDATION: &str = "ValidationException";

/// AWS's refusal of `service`'s `operation` with this JSON `body`, if AWS
/// would refuse it for a limit moto does not enforce.
pub fn refusal(service: &str, operation: &str, body: &[u8]) -> Option<Refusal> {
    let request: Value = serde_json::from_slice(body).ok()?;
    match (service, operation) {
        ("dynamodb", "PutItem") => put(&request["Item"]),
        ("dynamodb", "UpdateItem") => key(&request["Key"]).or_else(|| values(&request["ExpressionAttributeValues"])),
        ("dynamodb", "DeleteItem") => key(&request["Key"]),
        ("dynamodb", "TransactWriteItems") => transaction(&request),
        ("dynamodb", "BatchWriteItem") => {
            let writes: usize =
                request["RequestItems"].as_object()?.values().filter_map(Value::as_array).map(Vec::len).sum();
            if writes > 25 {
                return refuse(VALIDATION, "Too many items requested for the BatchWriteItem call");
            }
            None
        }
        ("events", "PutEvents") => put_events(&request),
        ("sqs", "SendMessage") => sqs_bytes(request["MessageBody"].as_str().map_or(0, str::len)),
        ("sqs", "SendMessageBatch") => {
            let entries = request["Entries"].as_array()?;
            if entries.len() > 10 {
                return refuse("TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10");
            }
            sqs_bytes(entries.iter().map(|e| e["MessageBody"].as_str().map_or(0, str::len)).sum())
        }
        ("ssm", "PutParameter") => {
            let value = request["Value"].as_str().unwrap_or_default();
            let nests = value.find("{{").is_some_and(|open| value[open + 2..].contains("}}"));
            if nests {
                return refuse(
                    VALIDATION,
                    "Parameter value can't nest another parameter. Do not use \"{{}}\" in the value.",
                );
            }
            None
        }
        ("scheduler", "CreateSchedule" | "UpdateSchedule") => {
            schedule_expression(request["ScheduleExpression"].as_str().unwrap_or_default())
        }
        ("states", "StartExecution") => states_payload(&request["input"], "InvalidExecutionInput"),
        ("states", "SendTaskSuccess") => states_payload(&request["output"], "InvalidOutput"),
        ("states", "SendTaskFailure") => {
            let cause = request["cause"].as_str().map_or(0, |c| c.chars().count());
            if cause > 32_768 {
                return refuse(VALIDATION, "Member 'cause' must have length less than or equal to 32768");
            }
            None
        }
        _ => None,
    }
}

/// EventBridge Scheduler's rules for a `cron(…)` expression that moto
/// does not check: six fields (minutes hours day-of-month month
/// day-of-week year); exactly one of the two day fields `?`; the day of
/// the week 1–7 or `SUN`–`SAT`, with no step.
fn schedule_expression(expression: &str) -> Option<Refusal> {
    let fields = expression.strip_prefix("cron(").and_then(|e| e.strip_suffix(')'))?;
    let invalid = || refuse(VALIDATION, format!("Invalid Schedule Expression {expression}."));
    let fields: Vec<&str> = fields.split_whitespace().collect();
    let [_, _, dom, _, dow, _] = fields[..] else {
        return invalid();
    };
    if (dom == "?") == (dow == "?") || dow.contains('/') {
        return invalid();
    }
    const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
    let day = |d: &str| DAYS.contains(&d.to_ascii_uppercase().as_str()) || matches!(d.parse::<u8>(), Ok(1..=7));
    let days_ok = dow == "?"
        || dow == "*"
        || dow.split(',').all(|item| item.split('-').all(|d| day(d.split('#').next().unwrap_or(d))));
    if !days_ok {
        return invalid();
    }
    None
}

/// AWS's refusal of the EC2 `action` with this form body (the Query
/// protocol: `TagSpecification.1.Tag.2.Value=…`, `Tag.1.Key=…`), if AWS
/// would refuse it for a limit moto does not enforce.
pub fn ec2_refusal(action: &str, form: &[u8]) -> Option<Refusal> {
    if !matches!(action, "RunInstances" | "CreateTags") {
        return None;
    }
    for (name, value) in form_urlencoded::parse(form) {
        let length = value.chars().count();
        let tag = name.starts_with("Tag.") || name.starts_with("TagSpecification.");
        if tag && name.ends_with(".Key") && length > EC2_TAG_KEY_CHARS {
            return refuse(
                "InvalidParameterValue",
                format!("Tag key exceeds the maximum length of {EC2_TAG_KEY_CHARS} characters"),
            );
        }
        if tag && name.ends_with(".Value") && length > EC2_TAG_VALUE_CHARS {
            return refuse(
                "InvalidParameterValue",
                format!("Tag value exceeds the maximum length of {EC2_TAG_VALUE_CHARS} characters"),
            );
        }
    }
    None
}

fn put(item: &Value) -> Option<Refusal> {
    let size = item_size(item);
    if size > DYNAMODB_ITEM_BYTES {
        return refuse(VALIDATION, format!("Item size has exceeded the maximum allowed size ({size} bytes)"));
    }
    key(item).or_else(|| numbers(item))
}

/// The table's keys are `pk` (partition) and `sk` (sort).
fn key(item: &Value) -> Option<Refusal> {
    let length = |name: &str| item[name]["S"].as_str().map_or(0, str::len);
    if length("pk") > DYNAMODB_PARTITION_KEY_BYTES {
        return refuse(
            VALIDATION,
            format!("One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of {DYNAMODB_PARTITION_KEY_BYTES} bytes"),
        );
    }
    if length("sk") > DYNAMODB_SORT_KEY_BYTES {
        return refuse(
            VALIDATION,
            format!("One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of {DYNAMODB_SORT_KEY_BYTES} bytes"),
        );
    }
    None
}

/// An update's values: each within an item, every number storable.
fn values(values: &Value) -> Option<Refusal> {
    let values = values.as_object()?;
    let size: usize = values.values().map(value_size).sum();
    if size > DYNAMODB_ITEM_BYTES {
        return refuse(VALIDATION, format!("Item size to update has exceeded the maximum allowed size ({size} bytes)"));
    }
    values.values().find_map(numbers)
}

fn transaction(request: &Value) -> Option<Refusal> {
    let items = request["TransactItems"].as_array()?;
    if items.len() > DYNAMODB_TRANSACTION_ITEMS {
        return refuse(
            VALIDATION,
            format!("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to {DYNAMODB_TRANSACTION_ITEMS}"),
        );
    }
    let mut total = 0;
    for item in items {
        if let Some(put_request) = item.get("Put") {
            if let Some(refusal) = put(&put_request["Item"]) {
                return Some(refusal);
            }
            total += item_size(&put_request["Item"]);
        } else if let Some(update) = item.get("Update") {
            if let Some(refusal) = key(&update["Key"]).or_else(|| values(&update["ExpressionAttributeValues"])) {
                return Some(refusal);
            }
            total += item_size(&update["Key"])
                + update["ExpressionAttributeValues"].as_object().map_or(0, |v| v.values().map(value_size).sum());
        } else if let Some(other) = item.get("Delete").or_else(|| item.get("ConditionCheck")) {
            if let Some(refusal) = key(&other["Key"]) {
                return Some(refusal);
            }
            total += item_size(&other["Key"]);
        }
    }
    if total > DYNAMODB_TRANSACTION_BYTES {
        return refuse(VALIDATION, format!("Transaction request cannot be larger than 4 MB ({total} bytes)"));
    }
    None
}

fn put_events(request: &Value) -> Option<Refusal> {
    let entries = request["Entries"].as_array()?;
    if entries.len() > EVENTS_ENTRIES {
        return refuse(
            VALIDATION,
            format!("1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length less than or equal to {EVENTS_ENTRIES}"),
        );
    }
    let text = |entry: &Value, field: &str| entry[field].as_str().map_or(0, str::len);
    let size: usize = entries
        .iter()
        .map(|e| {
            let resources: usize =
                e["Resources"].as_array().map_or(0, |r| r.iter().filter_map(Value::as_str).map(str::len).sum());
            14 + text(e, "Source") + text(e, "DetailType") + text(e, "Detail") + resources
        })
        .sum();
    if size > EVENTS_BYTES {
        return refuse(
            VALIDATION,
            format!("Total size of the entries in the request is over the limit ({size} bytes)"),
        );
    }
    None
}

fn sqs_bytes(size: usize) -> Option<Refusal> {
    if size > SQS_MESSAGE_BYTES {
        return refuse(
            "InvalidParameterValue",
            format!(
                "One or more parameters are invalid. Reason: Message must be shorter than {SQS_MESSAGE_BYTES} bytes."
            ),
        );
    }
    None
}

fn states_payload(payload: &Value, error: &'static str) -> Option<Refusal> {
    let size = payload.as_str().map_or(0, str::len);
    if size > STATES_PAYLOAD_BYTES {
        return refuse(error, format!("The payload is {size} bytes; the maximum is {STATES_PAYLOAD_BYTES}"));
    }
    None
}

/// An item's size as DynamoDB counts it: each attribute's name and value.
fn item_size(item: &Value) -> usize {
    item.as_object().map_or(0, |attributes| attributes.iter().map(|(name, value)| name.len() + value_size(value)).sum())
}

/// The size of one attribute value in its wire form (`{"S": …}`, `{"M": …}`, …).
fn value_size(value: &Value) -> usize {
    let Some((kind, inner)) = value.as_object().and_then(|v| v.iter().next()) else { return 0 };
    match kind.as_str() {
        "S" => inner.as_str().map_or(0, str::len),
        // Binary travels base64-encoded: three bytes a four-character group.
        "B" => inner.as_str().map_or(0, |b| b.len() / 4 * 3),
        "N" => inner.as_str().map_or(0, |n| n.len().div_ceil(2) + 1),
        "BOOL" | "NULL" => 1,
        "SS" => inner.as_array().map_or(0, |v| v.iter().filter_map(Value::as_str).map(str::len).sum()),
        "NS" => {
            inner.as_array().map_or(0, |v| v.iter().filter_map(Value::as_str).map(|n| n.len().div_ceil(2) + 1).sum())
        }
        "BS" => inner.as_array().map_or(0, |v| v.iter().filter_map(Value::as_str).map(|b| b.len() / 4 * 3).sum()),
        "L" => 3 + inner.as_array().map_or(0, |v| v.iter().map(|e| 1 + value_size(e)).sum()),
        "M" => 3 + inner.as_object().map_or(0, |m| m.iter().map(|(k, e)| 1 + k.len() + value_size(e)).sum()),
        _ => 0,
    }
}

/// The first number DynamoDB cannot store in `value` (an item, a value).
fn numbers(value: &Value) -> Option<Refusal> {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(n)) = map.get("N") {
                return number(n);
            }
            map.values().find_map(numbers)
        }
        Value::Array(items) => items.iter().find_map(numbers),
        _ => None,
    }
}

fn number(text: &str) -> Option<Refusal> {
    let digits = text.trim_start_matches('-').split(['e', 'E']).next().unwrap_or("").replace('.', "");
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
    let magnitude = text.parse::<f64>().map(f64::abs).unwrap_or(f64::INFINITY);
    if significant > 38 {
        return refuse(VALIDATION, "Attempting to store more than 38 significant digits in a Number");
    }
    if magnitude != 0.0 && !(1e-130..1e126).contains(&magnitude) {
        return refuse(
            VALIDATION,
            "Number overflow. Attempting to store a number with magnitude larger than supported range",
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(value: Value) -> Vec<u8> {
        serde_json::to_vec(&value).unwrap()
    }

    #[test]
    fn an_item_over_400_kb_and_keys_over_their_limits_are_refused_as_aws_does() {
        let item = |pk: String, blob: usize| json!({"Item": {"pk": {"S": pk}, "sk": {"S": "x"}, "d": {"S": "b".repeat(blob)}}});
        assert_eq!(refusal("dynamodb", "PutItem", &body(item("a".into(), 399 * 1024))), None);
        let big = refusal("dynamodb", "PutItem", &body(item("a".into(), 401 * 1024))).expect("refused");
        assert_eq!((big.status, big.error), (400, "ValidationException"));
        assert!(refusal("dynamodb", "PutItem", &body(item("a".repeat(2049), 1))).is_some());
        assert!(refusal(
            "dynamodb",
            "DeleteItem",
            &body(json!({"Key": {"pk": {"S": "a"}, "sk": {"S": "s".repeat(1025)}}}))
        )
        .is_some());
    }

    #[test]
    fn numbers_outside_dynamodbs_range_are_refused() {
        let with = |n: &str| body(json!({"Item": {"pk": {"S": "a"}, "v": {"M": {"x": {"N": n}}}}}));
        for ok in ["0", "-1.5", "1e125", "1E-129"] {
            assert_eq!(refusal("dynamodb", "PutItem", &with(ok)), None, "{ok}");
        }
        for bad in ["1e200", "-1e126", "1e-131", "1234567890123456789012345678901234567890"] {
            assert!(refusal("dynamodb", "PutItem", &with(bad)).is_some(), "{bad}");
        }
    }

    #[test]
    fn a_transaction_is_at_most_100_items_and_4_mb() {
        let put = |bytes: usize| json!({"Put": {"Item": {"pk": {"S": "a"}, "d": {"S": "x".repeat(bytes)}}}});
        let items =
            |n: usize, bytes: usize| body(json!({"TransactItems": (0..n).map(|_| put(bytes)).collect::<Vec<_>>()}));
        assert_eq!(refusal("dynamodb", "TransactWriteItems", &items(100, 10)), None);
        assert!(refusal("dynamodb", "TransactWriteItems", &items(101, 10)).is_some());
        assert_eq!(refusal("dynamodb", "TransactWriteItems", &items(10, 390 * 1024)), None);
        assert!(refusal("dynamodb", "TransactWriteItems", &items(11, 390 * 1024)).is_some(), "4.2 MB");
    }

    #[test]
    fn put_events_is_at_most_10_entries_and_256_kb() {
        let entry = |bytes: usize| json!({"Source": "s", "DetailType": "d", "Detail": "x".repeat(bytes)});
        let request =
            |n: usize, bytes: usize| body(json!({"Entries": (0..n).map(|_| entry(bytes)).collect::<Vec<_>>()}));
        assert_eq!(refusal("events", "PutEvents", &request(10, 100)), None);
        assert!(refusal("events", "PutEvents", &request(11, 100)).is_some());
        assert!(refusal("events", "PutEvents", &request(2, 130 * 1024)).is_some());
        assert!(refusal("events", "PutEvents", &request(1, 257 * 1024)).is_some(), "one entry over the limit");
    }

    #[test]
    fn sqs_messages_and_step_functions_payloads_are_at_most_256_kb() {
        assert!(refusal("sqs", "SendMessage", &body(json!({"MessageBody": "x".repeat(257 * 1024)}))).is_some());
        assert_eq!(refusal("sqs", "SendMessage", &body(json!({"MessageBody": "x"}))), None);
        let output =
            refusal("states", "SendTaskSuccess", &body(json!({"output": "x".repeat(257 * 1024)}))).expect("refused");
        assert_eq!(output.error, "InvalidOutput");
        assert!(refusal("states", "StartExecution", &body(json!({"input": "x".repeat(257 * 1024)}))).is_some());
    }

    #[test]
    fn an_ec2_tag_value_over_256_characters_or_key_over_128_is_refused() {
        let form = |key: &str, value: &str| {
            form_urlencoded::Serializer::new(String::new())
                .append_pair("Action", "RunInstances")
                .append_pair("TagSpecification.1.ResourceType", "instance")
                .append_pair("TagSpecification.1.Tag.1.Key", key)
                .append_pair("TagSpecification.1.Tag.1.Value", value)
                .finish()
        };
        let long = "a,".repeat(128) + "b";
        let refused = ec2_refusal("RunInstances", form("baton:labels", &long).as_bytes()).expect("refused");
        assert_eq!(refused.error, "InvalidParameterValue");
        assert!(ec2_refusal("RunInstances", form(&"k".repeat(129), "v").as_bytes()).is_some());
        assert_eq!(
            ec2_refusal("RunInstances", form("baton:labels", &"é".repeat(256)).as_bytes()),
            None,
            "characters, not bytes"
        );
        let tags = form_urlencoded::Serializer::new(String::new()).append_pair("Tag.1.Value", &long).finish();
        assert!(ec2_refusal("CreateTags", tags.as_bytes()).is_some());
        assert_eq!(ec2_refusal("DescribeInstances", tags.as_bytes()), None);
    }

    #[test]
    fn a_parameter_value_holding_double_braces_is_refused_as_parameter_store_does() {
        let put =
            |value: &str| body(json!({"Name": "/baton/dev/secrets/ws/X", "Value": value, "Type": "SecureString"}));
        let refused = refusal("ssm", "PutParameter", &put("password: {{ .Values.db.password }}")).expect("refused");
        assert_eq!((refused.status, refused.error), (400, "ValidationException"));
        assert!(refusal("ssm", "PutParameter", &put("{{ssm:other}}")).is_some());
        for fine in ["t0k3n", "{single}", "{{ unclosed", "closed only }}"] {
            assert_eq!(refusal("ssm", "PutParameter", &put(fine)), None, "{fine}");
        }
    }

    #[test]
    fn the_scheduler_refuses_a_cron_with_two_day_fields_or_a_weekday_step() {
        let create = |expression: &str| {
            let body = serde_json::json!({"ScheduleExpression": expression, "FlexibleTimeWindow": {"Mode": "OFF"}});
            refusal("scheduler", "CreateSchedule", body.to_string().as_bytes())
        };
        for fine in [
            "cron(* * * * ? *)",
            "cron(0 3 ? * MON,FRI *)",
            "cron(0/15 9-17 1/2 JAN,JUL ? *)",
            "cron(0 0 ? * 2-6 *)",
            "rate(5 minutes)",
        ] {
            assert_eq!(create(fine), None, "{fine}");
        }
        for refused in [
            "cron(* * * * * *)",
            "cron(0 0 ? * ? *)",
            "cron(0 0 13 * FRI *)",
            "cron(0 0 ? * */2 *)",
            "cron(0 0 ? * 0 *)",
            "cron(0 0 * * ?)",
        ] {
            let refusal = create(refused).unwrap_or_else(|| panic!("{refused} is refused"));
            assert_eq!(refusal.error, VALIDATION);
        }
    }
}
