//! An SDK interceptor that records every AWS request the clients send: the
//! service, the operation (from the config bag's `Metadata`), the request
//! body size and, for DynamoDB, the capacity the request would consume on
//! AWS and whether a conditional write failed.
//!
//! Capacity is computed from item sizes (moto reports `ConsumedCapacity` for
//! single-item calls only, not for transactions), with DynamoDB's rules:
//! - an item's size is the sum of its attribute names and values (strings
//!   and binaries by length, numbers about one byte per two digits plus one,
//!   booleans and nulls one byte, lists and maps 3 bytes plus one per element);
//! - a write costs one unit per started KB of the item (the larger of its old
//!   and new image for an update), twice inside `TransactWriteItems`; a failed
//!   conditional write is billed as if it had written;
//! - a strongly consistent read costs one unit per started 4 KB (a `Query`
//!   sums the items it returns before rounding), half when eventually
//!   consistent, twice in a transaction; a `ConditionCheck` is a
//!   transactional read of its item.
//!
//! Update and delete requests do not carry the item, so the recorder
//! remembers the size of every item it saw written or read (by `pk`/`sk`)
//! and uses it; an item it never saw counts as its key plus the values the
//! request sets. All the bench's items are written through these clients.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents, SharedInterceptor};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use serde_json::{Map, Value};

/// One recorded request (one attempt: a retried request records twice).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Request {
    pub service: String,
    pub operation: String,
    pub request_bytes: usize,
    pub status: u16,
    pub read_units: f64,
    /// Write units, the global secondary indexes' included.
    pub write_units: f64,
    /// The part of `write_units` that the indexes bill: DynamoDB copies an
    /// indexed item's change into each index whose keys it has, billed by
    /// what the index projects (a key change is a delete and a put there).
    pub index_write_units: f64,
    /// A conditional write that failed its condition (alone, or as a
    /// transaction cancelled by `ConditionalCheckFailed`).
    pub failed_condition: bool,
    /// Entries of a batch request (`PutEvents`, `SendMessageBatch`,
    /// `DeleteMessageBatch`), or messages a `ReceiveMessage` got.
    pub entries: usize,
    /// The function invocation that sent it (none: the bench itself).
    pub function: Option<String>,
    #[serde(skip)]
    pub invocation: Option<u64>,
    /// The error type, when the request failed.
    pub error: Option<String>,
    pub millis: f64,
    /// When the response arrived.
    #[serde(skip)]
    pub at: Option<Instant>,
}

impl Request {
    pub fn is_dynamodb(&self) -> bool {
        self.service.eq_ignore_ascii_case("dynamodb")
    }
}

/// What the request phase leaves for the response phase (per attempt).
#[derive(Debug, Clone)]
struct Pending {
    started: Instant,
    request_bytes: usize,
    read_units: f64,
    write_units: f64,
    index_write_units: f64,
    /// `ConsistentRead` of a read request.
    consistent: bool,
    entries: usize,
    invocation: Option<baton_devhost::invocations::Invocation>,
    /// Writes to apply to the size cache once the request succeeded:
    /// (key, Some(size)) puts, (key, None) deletes.
    effects: Vec<(String, Option<usize>)>,
    /// Index membership to record once the request succeeded: (key, index, in it).
    index_effects: Vec<(String, usize, bool)>,
}

impl Storable for Pending {
    type Storer = StoreReplace<Self>;
}

#[derive(Debug, Default)]
struct State {
    requests: Vec<Request>,
    /// Item size by `pk|sk` (the bench's stack has one table).
    sizes: HashMap<String, usize>,
    /// Items known to be in an index: (`pk|sk`, index number).
    indexed: std::collections::HashSet<(String, usize)>,
}

/// A global secondary index of the table, as resources.json defines it.
#[derive(Debug)]
struct IndexSpec {
    partition_key: String,
    sort_key: String,
    keys_only: bool,
}

static INDEXES: std::sync::LazyLock<Vec<IndexSpec>> = std::sync::LazyLock::new(|| {
    baton_localstack::resources::Resources::load()
        .table
        .global_secondary_indexes
        .iter()
        .map(|g| IndexSpec {
            partition_key: g.partition_key.name.clone(),
            sort_key: g.sort_key.name.clone(),
            keys_only: g.projection == "KEYS_ONLY",
        })
        .collect()
});

/// What one index write costs: a keys-only entry is under 1 KB; a full copy
/// weighs what the item does.
fn index_units(index: &IndexSpec, item_size: usize) -> f64 {
    if index.keys_only {
        1.0
    } else {
        write_units_for(item_size)
    }
}

/// The shared record; clone it freely.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    state: Arc<Mutex<State>>,
}

impl Recorder {
    pub fn interceptor(&self) -> SharedInterceptor {
        SharedInterceptor::new(Counting { recorder: self.clone() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many requests were recorded so far (a mark for [`Recorder::since`]).
    pub fn mark(&self) -> usize {
        self.lock().requests.len()
    }

    /// The requests recorded after `mark`.
    pub fn since(&self, mark: usize) -> Vec<Request> {
        self.lock().requests[mark..].to_vec()
    }

    fn size_of(&self, key: &str) -> Option<usize> {
        self.lock().sizes.get(key).copied()
    }

    fn learn(&self, key: String, size: usize) {
        self.lock().sizes.insert(key, size);
    }

    fn is_indexed(&self, key: &str, index: usize) -> bool {
        self.lock().indexed.contains(&(key.to_string(), index))
    }
}

#[derive(Debug)]
struct Counting {
    recorder: Recorder,
}

impl Intercept for Counting {
    fn name(&self) -> &'static str {
        "BatonBenchCounting"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let body = context.request().body().bytes().unwrap_or_default();
        let is_dynamodb = cfg.load::<Metadata>().is_some_and(|m| m.service().eq_ignore_ascii_case("dynamodb"));
        let operation = cfg.load::<Metadata>().map(|m| m.name().to_string()).unwrap_or_default();
        let mut pending = Pending {
            started: Instant::now(),
            request_bytes: body.len(),
            read_units: 0.0,
            write_units: 0.0,
            index_write_units: 0.0,
            consistent: false,
            entries: 0,
            // The interceptor runs in the task that sent the request, so the
            // dev host's invocation scope is visible here.
            invocation: baton_devhost::invocations::current(),
            effects: Vec::new(),
            index_effects: Vec::new(),
        };
        if let Ok(request) = serde_json::from_slice::<Value>(body) {
            if is_dynamodb {
                self.price_request(&operation, &request, &mut pending);
            } else {
                pending.entries = request["Entries"].as_array().map_or(0, Vec::len);
            }
        }
        cfg.interceptor_state().store_put(pending);
        Ok(())
    }

    fn read_before_deserialization(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        // The body is read into memory only during deserialisation; the
        // response phase is handled in `read_after_deserialization`. Here we
        // only note the time the response arrived.
        let _ = context;
        if let Some(pending) = cfg.load::<Pending>().cloned() {
            let millis = pending.started.elapsed().as_secs_f64() * 1000.0;
            cfg.interceptor_state().store_put(Elapsed(millis));
        }
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &aws_sdk_dynamodb::config::interceptors::AfterDeserializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(mut pending) = cfg.load::<Pending>().cloned() else { return Ok(()) };
        let millis = cfg.load::<Elapsed>().map(|e| e.0).unwrap_or_default();
        let (service, operation) =
            cfg.load::<Metadata>().map(|m| (m.service().to_string(), m.name().to_string())).unwrap_or_default();
        let response = context.response();
        let status = response.status().as_u16();
        let body: Option<Value> = response.body().bytes().and_then(|b| serde_json::from_slice(b).ok());
        let header_type = response.headers().get("x-amzn-errortype").map(|t| t.to_string());
        let is_dynamodb = service.eq_ignore_ascii_case("dynamodb");
        let mut error = None;
        let mut failed_condition = false;
        if status >= 400 {
            let body_type = body.as_ref().and_then(|b| b["__type"].as_str()).map(str::to_string);
            let kind = header_type.or(body_type).map(|t| short_type(&t));
            if is_dynamodb {
                failed_condition = match kind.as_deref() {
                    Some("ConditionalCheckFailedException") => true,
                    Some("TransactionCanceledException") => body
                        .as_ref()
                        .and_then(|b| b["CancellationReasons"].as_array())
                        .is_some_and(|reasons| reasons.iter().any(|r| r["Code"] == "ConditionalCheckFailed")),
                    _ => false,
                };
            }
            error = kind;
        } else if operation == "ReceiveMessage" {
            pending.entries = body.as_ref().and_then(|b| b["Messages"].as_array()).map_or(0, Vec::len);
        } else if is_dynamodb {
            if let Some(body) = &body {
                self.price_response(&operation, body, &mut pending);
            }
            for (key, size) in pending.effects.drain(..) {
                match size {
                    Some(size) => self.recorder.learn(key, size),
                    None => {
                        self.recorder.lock().sizes.remove(&key);
                    }
                }
            }
            let mut state = self.recorder.lock();
            for (key, index, member) in pending.index_effects.drain(..) {
                if member {
                    state.indexed.insert((key, index));
                } else {
                    state.indexed.remove(&(key, index));
                }
            }
        }
        self.recorder.lock().requests.push(Request {
            service,
            operation,
            request_bytes: pending.request_bytes,
            status,
            read_units: pending.read_units,
            write_units: pending.write_units + pending.index_write_units,
            index_write_units: pending.index_write_units,
            failed_condition,
            entries: pending.entries,
            function: pending.invocation.as_ref().map(|i| i.function.clone()),
            invocation: pending.invocation.as_ref().map(|i| i.id),
            error,
            millis,
            at: Some(Instant::now()),
        });
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct Elapsed(f64);

impl Storable for Elapsed {
    type Storer = StoreReplace<Self>;
}

/// `com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException` → the last part.
fn short_type(t: &str) -> String {
    let t = t.split(':').next().unwrap_or(t);
    t.rsplit('#').next().unwrap_or(t).to_string()
}

const KB: usize = 1024;

fn write_units_for(size: usize) -> f64 {
    size.div_ceil(KB).max(1) as f64
}

fn read_units_for(size: usize) -> f64 {
    size.div_ceil(4 * KB).max(1) as f64
}

/// DynamoDB's size of one attribute value.
pub fn value_size(value: &Value) -> usize {
    let Some(obj) = value.as_object() else { return 0 };
    let Some((kind, inner)) = obj.iter().next() else { return 0 };
    match kind.as_str() {
        "S" => inner.as_str().map_or(0, str::len),
        "B" => inner.as_str().map_or(0, |b| b.len() * 3 / 4),
        "N" => number_size(inner.as_str().unwrap_or("0")),
        "BOOL" | "NULL" => 1,
        "SS" => inner.as_array().map_or(0, |a| a.iter().map(|s| s.as_str().map_or(0, str::len)).sum()),
        "NS" => inner.as_array().map_or(0, |a| a.iter().map(|s| number_size(s.as_str().unwrap_or("0"))).sum()),
        "BS" => inner.as_array().map_or(0, |a| a.iter().map(|s| s.as_str().map_or(0, |b| b.len() * 3 / 4)).sum()),
        "L" => 3 + inner.as_array().map_or(0, |a| a.iter().map(|v| value_size(v) + 1).sum::<usize>()),
        "M" => 3 + inner.as_object().map_or(0, |m| m.iter().map(|(k, v)| k.len() + value_size(v) + 1).sum::<usize>()),
        _ => 0,
    }
}

fn number_size(n: &str) -> usize {
    let digits = n.chars().filter(|c| c.is_ascii_digit()).count();
    digits.div_ceil(2) + 1
}

/// DynamoDB's size of an item: attribute names plus values.
pub fn item_size(item: &Map<String, Value>) -> usize {
    item.iter().map(|(name, value)| name.len() + value_size(value)).sum()
}

/// The size-cache key of an item or a key (`pk`/`sk`, the table's keys).
fn cache_key(key: &Map<String, Value>) -> Option<String> {
    let part = |name: &str| key.get(name).and_then(|v| v["S"].as_str().or_else(|| v["N"].as_str()));
    Some(format!("{}|{}", part("pk")?, part("sk").unwrap_or("")))
}

impl Counting {
    /// The size of the item a request names, as last seen; else its key.
    fn known_size(&self, key: &Map<String, Value>) -> usize {
        cache_key(key).and_then(|k| self.recorder.size_of(&k)).unwrap_or_else(|| item_size(key))
    }

    /// Write units of one Put/Update/Delete (`multiplier` 2 in a transaction)
    /// and its effect on the size cache.
    fn price_write(&self, kind: &str, op: &Value, multiplier: f64, pending: &mut Pending) {
        match kind {
            "Put" => {
                let item = op["Item"].as_object().cloned().unwrap_or_default();
                let new = item_size(&item);
                let old = cache_key(&item).and_then(|k| self.recorder.size_of(&k)).unwrap_or(0);
                pending.write_units += multiplier * write_units_for(new.max(old));
                if let Some(k) = cache_key(&item) {
                    for (i, index) in INDEXES.iter().enumerate() {
                        let (was, is) = (self.recorder.is_indexed(&k, i), item.contains_key(&index.partition_key));
                        if is {
                            pending.index_write_units += index_units(index, new);
                        } else if was {
                            pending.index_write_units += index_units(index, old);
                        }
                        pending.index_effects.push((k.clone(), i, is));
                    }
                    pending.effects.push((k, Some(new)));
                }
            }
            "Update" => {
                let key = op["Key"].as_object().cloned().unwrap_or_default();
                let old = self.known_size(&key);
                let values: usize =
                    op["ExpressionAttributeValues"].as_object().map_or(0, |v| v.values().map(value_size).sum());
                let names: usize = op["ExpressionAttributeNames"]
                    .as_object()
                    .map_or(0, |n| n.values().filter_map(Value::as_str).map(str::len).sum());
                // Set values mostly replace attributes of the same size; an
                // unknown item counts as its key plus what the update sets.
                let new = if cache_key(&key).and_then(|k| self.recorder.size_of(&k)).is_some() {
                    old
                } else {
                    item_size(&key) + values + names
                };
                pending.write_units += multiplier * write_units_for(old.max(new));
                if let Some(k) = cache_key(&key) {
                    self.price_index_update(&k, op, old.max(new), pending);
                    pending.effects.push((k, Some(old.max(new))));
                }
            }
            "Delete" => {
                let key = op["Key"].as_object().cloned().unwrap_or_default();
                pending.write_units += multiplier * write_units_for(self.known_size(&key));
                if let Some(k) = cache_key(&key) {
                    for (i, index) in INDEXES.iter().enumerate() {
                        if self.recorder.is_indexed(&k, i) {
                            pending.index_write_units += index_units(index, self.known_size(&key));
                            pending.index_effects.push((k.clone(), i, false));
                        }
                    }
                    pending.effects.push((k, None));
                }
            }
            "ConditionCheck" => {
                let key = op["Key"].as_object().cloned().unwrap_or_default();
                pending.read_units += 2.0 * read_units_for(self.known_size(&key));
            }
            _ => {}
        }
    }

    /// An update's index writes: moving an index key is a delete and a put
    /// in that index; setting it adds the item, removing it takes it out;
    /// any other change rewrites a full copy (`ALL`) and leaves a keys-only
    /// index alone.
    fn price_index_update(&self, key: &str, op: &Value, size: usize, pending: &mut Pending) {
        let expression = op["UpdateExpression"].as_str().unwrap_or_default();
        // Attribute names as written, aliases resolved.
        let names: Vec<&str> = op["ExpressionAttributeNames"]
            .as_object()
            .map(|n| n.values().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let (set_part, remove_part) = match expression.find("REMOVE") {
            Some(at) => (&expression[..at], &expression[at..]),
            None => (expression, ""),
        };
        let mentions = |part: &str, attribute: &str| {
            part.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '#')).any(|word| {
                word == attribute
                    || (word.starts_with('#')
                        && names.contains(&attribute)
                        && op["ExpressionAttributeNames"][word] == attribute)
            })
        };
        for (i, index) in INDEXES.iter().enumerate() {
            let was = self.recorder.is_indexed(key, i);
            let keys = [index.partition_key.as_str(), index.sort_key.as_str()];
            let sets_key = keys.iter().any(|k| mentions(set_part, k));
            let removes_key = keys.iter().any(|k| mentions(remove_part, k));
            let units = match (was, sets_key, removes_key) {
                (true, _, true) => {
                    pending.index_effects.push((key.to_string(), i, false));
                    index_units(index, size)
                }
                (true, true, false) => 2.0 * index_units(index, size),
                (true, false, false) if index.keys_only => 0.0,
                (true, false, false) => index_units(index, size),
                (false, true, false) => {
                    pending.index_effects.push((key.to_string(), i, true));
                    index_units(index, size)
                }
                (false, _, _) => 0.0,
            };
            pending.index_write_units += units;
        }
    }

    fn price_request(&self, operation: &str, request: &Value, pending: &mut Pending) {
        pending.consistent = request["ConsistentRead"].as_bool().unwrap_or(false);
        match operation {
            "PutItem" => self.price_write("Put", request, 1.0, pending),
            "UpdateItem" => self.price_write("Update", request, 1.0, pending),
            "DeleteItem" => self.price_write("Delete", request, 1.0, pending),
            "TransactWriteItems" => {
                for item in request["TransactItems"].as_array().into_iter().flatten() {
                    if let Some((kind, op)) = item.as_object().and_then(|o| o.iter().next()) {
                        self.price_write(kind, op, 2.0, pending);
                    }
                }
            }
            "BatchWriteItem" => {
                for (table, writes) in request["RequestItems"].as_object().into_iter().flatten() {
                    for write in writes.as_array().into_iter().flatten() {
                        let mut op = write["PutRequest"].clone();
                        let kind = if op.is_null() {
                            op = write["DeleteRequest"].clone();
                            "Delete"
                        } else {
                            "Put"
                        };
                        if let Some(o) = op.as_object_mut() {
                            o.insert("TableName".into(), Value::String(table.clone()));
                        }
                        self.price_write(kind, &op, 1.0, pending);
                    }
                }
            }
            _ => {}
        }
    }

    /// Read units, from the items a read returned; the size cache learns them.
    fn price_response(&self, operation: &str, response: &Value, pending: &mut Pending) {
        let consistency = if pending.consistent { 1.0 } else { 0.5 };
        match operation {
            "GetItem" => {
                let size = response["Item"].as_object().map_or(0, item_size);
                pending.read_units += consistency * read_units_for(size);
                self.learn_items(pending, response["Item"].as_object().into_iter());
            }
            "Query" | "Scan" => {
                let items = response["Items"].as_array().cloned().unwrap_or_default();
                let total: usize = items.iter().filter_map(Value::as_object).map(item_size).sum();
                pending.read_units += consistency * read_units_for(total);
                self.learn_items(pending, items.iter().filter_map(Value::as_object));
            }
            "TransactGetItems" => {
                for response in response["Responses"].as_array().into_iter().flatten() {
                    let size = response["Item"].as_object().map_or(0, item_size);
                    pending.read_units += 2.0 * read_units_for(size);
                }
            }
            "BatchGetItem" => {
                for items in response["Responses"].as_object().into_iter().flat_map(|m| m.values()) {
                    for item in items.as_array().into_iter().flatten().filter_map(Value::as_object) {
                        pending.read_units += 0.5 * read_units_for(item_size(item));
                    }
                }
            }
            "UpdateItem" => {
                // ALL_NEW returned: the exact new size.
                if let Some(item) = response["Attributes"].as_object() {
                    let size = item_size(item);
                    if let Some((_, Some(old))) = pending.effects.first().cloned() {
                        let new_units = write_units_for(size.max(old));
                        if new_units > pending.write_units {
                            pending.write_units = new_units;
                        }
                    }
                    if let Some((key, _)) = pending.effects.first().cloned() {
                        pending.effects[0] = (key, Some(size));
                    }
                }
            }
            _ => {}
        }
    }

    fn learn_items<'a>(&self, pending: &mut Pending, items: impl Iterator<Item = &'a Map<String, Value>>) {
        for item in items {
            if let Some(k) = cache_key(item) {
                for (i, index) in INDEXES.iter().enumerate() {
                    if item.contains_key(&index.partition_key) {
                        pending.index_effects.push((k.clone(), i, true));
                    }
                }
                pending.effects.push((k, Some(item_size(item))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn counting() -> Counting {
        Counting { recorder: Recorder::default() }
    }

    fn pending() -> Pending {
        Pending {
            started: Instant::now(),
            request_bytes: 0,
            read_units: 0.0,
            write_units: 0.0,
            index_write_units: 0.0,
            consistent: false,
            entries: 0,
            invocation: None,
            effects: Vec::new(),
            index_effects: Vec::new(),
        }
    }

    #[test]
    fn index_writes_follow_what_the_index_projects_and_whether_its_key_moves() {
        let c = counting();
        let lease = json!({"TableName": "t", "Item": {
            "pk": {"S": "EXEC#1"}, "sk": {"S": "LEASE"}, "lx_shard": {"S": "L#1"}, "lx_expires_at": {"N": "1"},
            "steps": {"S": "s".repeat(3000)}}});
        let mut p = pending();
        c.price_request("PutItem", &lease, &mut p);
        assert_eq!((p.write_units, p.index_write_units), (3.0, 1.0), "a keys-only entry is one unit");
        for (key, index, member) in p.index_effects.drain(..) {
            if member {
                c.recorder.lock().indexed.insert((key, index));
            }
        }
        c.recorder.learn("EXEC#1|LEASE".into(), 3100);
        // A heartbeat moves the index key: a delete and a put in the index.
        let heartbeat = json!({"TableName": "t", "Key": {"pk": {"S": "EXEC#1"}, "sk": {"S": "LEASE"}},
            "UpdateExpression": "SET expires_at = :x, lx_expires_at = :n", "ExpressionAttributeValues": {":x": {"S": "t"}, ":n": {"N": "2"}}});
        let mut p = pending();
        c.price_request("UpdateItem", &heartbeat, &mut p);
        assert_eq!(p.index_write_units, 2.0);
        // A step report leaves a keys-only index alone.
        let report = json!({"TableName": "t", "Key": {"pk": {"S": "EXEC#1"}, "sk": {"S": "LEASE"}},
            "UpdateExpression": "SET steps.#id = :s", "ExpressionAttributeNames": {"#id": "a"}, "ExpressionAttributeValues": {":s": {"S": "x"}}});
        let mut p = pending();
        c.price_request("UpdateItem", &report, &mut p);
        assert_eq!(p.index_write_units, 0.0);
        // A full copy (runs-by-workspace) is rewritten by any change, by size.
        let run = json!({"TableName": "t", "Item": {"pk": {"S": "RUN#1"}, "sk": {"S": "RUN"}, "rw_pk": {"S": "WS#a"},
            "rw_sk": {"S": "x"}, "state": {"S": "s".repeat(2500)}}});
        let mut p = pending();
        c.price_request("PutItem", &run, &mut p);
        assert_eq!(p.index_write_units, 3.0);
    }

    #[test]
    fn item_size_is_names_plus_values() {
        let item = json!({
            "pk": {"S": "EXEC#1"},
            "n": {"N": "12345"},
            "ok": {"BOOL": true},
            "tags": {"L": [{"S": "ab"}]},
            "m": {"M": {"k": {"S": "v"}}}
        });
        // pk 2+6, n 1+(3+1), ok 2+1, tags 4+(3+2+1), m 1+(3+1+1+1)
        assert_eq!(item_size(item.as_object().unwrap()), 8 + 5 + 3 + 10 + 7);
    }

    #[test]
    fn a_transaction_bills_each_item_twice_per_started_kb() {
        let c = counting();
        let big = "x".repeat(1500);
        let request = json!({"TransactItems": [
            {"Put": {"TableName": "t", "Item": {"pk": {"S": "A"}, "sk": {"S": "B"}, "v": {"S": big}}}},
            {"Update": {"TableName": "t", "Key": {"pk": {"S": "C"}, "sk": {"S": "D"}},
                        "ExpressionAttributeValues": {":x": {"S": "1"}}}},
            {"ConditionCheck": {"TableName": "t", "Key": {"pk": {"S": "E"}, "sk": {"S": "F"}}}}
        ]});
        let mut p = pending();
        c.price_request("TransactWriteItems", &request, &mut p);
        assert_eq!(p.write_units, 2.0 * 2.0 + 2.0 * 1.0);
        assert_eq!(p.read_units, 2.0);
    }

    #[test]
    fn an_update_of_a_known_item_is_billed_on_its_size() {
        let c = counting();
        c.recorder.learn("A|B".into(), 2500);
        let request = json!({"TableName": "t", "Key": {"pk": {"S": "A"}, "sk": {"S": "B"}},
                             "ExpressionAttributeValues": {":x": {"S": "1"}}});
        let mut p = pending();
        c.price_request("UpdateItem", &request, &mut p);
        assert_eq!(p.write_units, 3.0);
    }

    #[test]
    fn reads_round_up_per_4_kb_and_halve_when_eventually_consistent() {
        let c = counting();
        let item = |i: usize| json!({"pk": {"S": format!("P{i}")}, "v": {"S": "y".repeat(1000)}});
        let response = json!({"Items": (0..5).map(item).collect::<Vec<_>>()});
        let mut p = pending();
        c.price_response("Query", &response, &mut p);
        assert_eq!(p.read_units, 1.0, "about 5 KB: 2 units, halved");
        let mut p = pending();
        p.consistent = true;
        c.price_response("GetItem", &json!({}), &mut p);
        assert_eq!(p.read_units, 1.0, "a miss still costs a unit");
    }
}
