//! Index lag: on AWS a global secondary index is eventually consistent. A
//! `Query` on one answers the index as it stood a moment ago (usually under
//! a second, longer on a busy table): an item written just now is missing,
//! or still found where it was, with its old attributes; an item deleted
//! just now, or moved out of the index's range, is still listed. moto
//! updates its indexes with the write, so code that trusts an index read
//! (the reaper's expiry index, the workspace listings) is never tested
//! against a stale one. This module keeps what it needs to answer as AWS
//! would: each write's time and the item as it was before it.
//!
//! Switched on by `index_lag_ms=<ms>` in `BATON_FAULTS` (`crate::faults`):
//! every DynamoDB write of the plan's clients first reads the items it
//! writes (one consistent `GetItem` each, not a fault draw, not counted),
//! and every `Query` with an `IndexName` is answered from moto's current
//! index, with each item written within the lag replaced by its image from
//! before its oldest write in that window (absent if it was absent, left
//! out if it no longer matches the query). Only writes made through the
//! plan's clients lag: a test's own setup writes are seen at once.
//!
//! What the rewrite understands: key conditions and filters that are `AND`s
//! of comparisons (`=`, `<>`, `<`, `<=`, `>`, `>=`), `BETWEEN` and
//! `begins_with` on attribute paths; a query with anything else (or a
//! `ProjectionExpression`, or `Select: COUNT`) is answered unchanged, with a
//! warning, rather than guessed at. A page stays within its `Limit` and its
//! bounds (`ExclusiveStartKey`, `LastEvaluatedKey`): a stale item that
//! would fall outside them is left out, as an index that lags may also do.
//!
//! TTL: moto never deletes expired items (its TTL is accepted and never
//! applied), which is AWS's "late" taken to its end: code that reads items
//! past their `ttl` must already check it. Nothing to add here.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::resources::{Gsi, Table};
use baton_domain::workflows::expressions::Comparison;
use serde_json::{Map, Value};

/// An item in DynamoDB JSON (`{"pk": {"S": "…"}, …}`).
pub type Item = Map<String, Value>;

/// One item's identity: its table and its key (DynamoDB JSON text).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ItemId {
    table: String,
    key: String,
}

/// The writes of the lag's window, by item, oldest first: when each was
/// answered and the item before it (`None`: absent).
type Window = HashMap<ItemId, VecDeque<(Instant, Option<Item>)>>;

/// A write about to be sent: the item it changes and, when known without
/// reading (a put on the condition that the item does not exist), the
/// item before it.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub table: String,
    pub key: Item,
    /// `true`: the write applies only where the item is absent, so the
    /// item before it was absent; no read needed.
    pub known_absent: bool,
}

/// The writes of the lag's window and what they replaced.
pub struct IndexLag {
    lag: Duration,
    table: Table,
    /// Writes within `lag` of the last look.
    writes: Mutex<Window>,
    /// Index reads answered otherwise than moto answered them.
    stale_reads: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for IndexLag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexLag").field("lag", &self.lag).finish()
    }
}

impl IndexLag {
    /// Indexes of `table` (Baton's one table: `infra/resources.json`) that
    /// lag `lag` behind its writes.
    pub fn new(lag: Duration, table: Table) -> Self {
        Self { lag, table, writes: Mutex::default(), stale_reads: Default::default() }
    }

    pub fn lag(&self) -> Duration {
        self.lag
    }

    /// How many index reads so far were answered otherwise than moto
    /// answered them (an item missing, stale or added).
    pub fn stale_reads(&self) -> u64 {
        self.stale_reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The key of `item`: its partition and sort key attributes.
    fn key_of(&self, item: &Item) -> Option<Item> {
        let mut key = Item::new();
        for name in [&self.table.partition_key, &self.table.sort_key] {
            key.insert(name.clone(), item.get(name)?.clone());
        }
        Some(key)
    }

    fn id(table: &str, key: &Item) -> ItemId {
        ItemId { table: table.to_string(), key: Value::Object(key.clone()).to_string() }
    }

    /// The items a write request (`PutItem`, `UpdateItem`, `DeleteItem`,
    /// `TransactWriteItems`, `BatchWriteItem`) changes if it applies.
    pub fn written(&self, operation: &str, body: &Value) -> Vec<Written> {
        let table = |v: &Value| v.get("TableName").and_then(Value::as_str).map(str::to_string);
        let put = |v: &Value, table: Option<String>| -> Option<Written> {
            let key = self.key_of(v.get("Item")?.as_object()?)?;
            let known_absent = v.get("ConditionExpression").and_then(Value::as_str).is_some_and(|c| {
                c.trim().starts_with("attribute_not_exists(") && !c.contains(" OR ") && !c.contains(" or ")
            });
            Some(Written { table: table?, key, known_absent })
        };
        let keyed = |v: &Value, table: Option<String>| -> Option<Written> {
            Some(Written { table: table?, key: v.get("Key")?.as_object()?.clone(), known_absent: false })
        };
        match operation {
            "PutItem" => put(body, table(body)).into_iter().collect(),
            "UpdateItem" | "DeleteItem" => keyed(body, table(body)).into_iter().collect(),
            "TransactWriteItems" => body
                .get("TransactItems")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|t| {
                    if let Some(p) = t.get("Put") {
                        put(p, table(p))
                    } else if let Some(u) = t.get("Update") {
                        keyed(u, table(u))
                    } else if let Some(d) = t.get("Delete") {
                        keyed(d, table(d))
                    } else {
                        None
                    }
                })
                .collect(),
            "BatchWriteItem" => body
                .get("RequestItems")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .flat_map(|(name, requests)| {
                    requests.as_array().into_iter().flatten().filter_map(move |r| {
                        if let Some(p) = r.get("PutRequest") {
                            put(p, Some(name.clone()))
                        } else {
                            keyed(r.get("DeleteRequest")?, Some(name.clone()))
                        }
                    })
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Records writes answered at `at`, each with the item before it.
    pub fn record(&self, writes: Vec<(Written, Option<Item>)>, at: Instant) {
        let mut all = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        for (written, before) in writes {
            all.entry(Self::id(&written.table, &written.key)).or_default().push_back((at, before));
        }
        self.forget_before(&mut all, at);
    }

    /// Forgets the writes the index has caught up with at `now`.
    fn forget_before(&self, all: &mut Window, now: Instant) {
        let Some(horizon) = now.checked_sub(self.lag) else { return };
        all.retain(|_, writes| {
            while writes.front().is_some_and(|(at, _)| *at <= horizon) {
                writes.pop_front();
            }
            !writes.is_empty()
        });
    }

    /// The items of `table` the index has not caught up with at `now`, each
    /// as the index still has it (`None`: not there).
    fn lagging(&self, table: &str, now: Instant) -> Vec<(ItemId, Option<Item>)> {
        let mut all = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        self.forget_before(&mut all, now);
        all.iter()
            .filter(|(id, _)| id.table == table)
            .filter_map(|(id, writes)| writes.front().map(|(_, before)| (id.clone(), before.clone())))
            .collect()
    }

    /// moto's answer `answer` to the index query `request`, as an index
    /// lagging behind the writes would give it at `now`.
    pub fn page(&self, request: &Value, mut answer: Value, now: Instant) -> Value {
        let Some(index) = request
            .get("IndexName")
            .and_then(Value::as_str)
            .and_then(|name| self.table.global_secondary_indexes.iter().find(|g| g.name == name))
        else {
            return answer;
        };
        let Some(table) = request.get("TableName").and_then(Value::as_str) else { return answer };
        let lagging = self.lagging(table, now);
        if lagging.is_empty() {
            return answer;
        }
        let Some(query) = Query::of(request, index) else {
            tracing::warn!(index = %index.name, "index lag: a query this emulation cannot evaluate is answered as moto has it");
            return answer;
        };
        let stale: HashSet<&ItemId> = lagging.iter().map(|(id, _)| id).collect();
        let Some(items) = answer.get_mut("Items").and_then(Value::as_array_mut) else { return answer };
        let answered = items.len();
        items.retain(|item| {
            let key = item.as_object().and_then(|i| self.key_of(i));
            !key.is_some_and(|key| stale.contains(&Self::id(table, &key)))
        });
        let end = answer.get("LastEvaluatedKey").and_then(Value::as_object).cloned();
        let mut found: Vec<Item> = lagging
            .into_iter()
            .filter_map(|(_, before)| before)
            .filter(|item| query.selects(item))
            .filter(|item| query.start.as_ref().is_none_or(|start| query.order(item, start) == Ordering::Greater))
            .filter(|item| end.as_ref().is_none_or(|end| query.order(item, end) != Ordering::Greater))
            .map(|item| self.projected(index, item))
            .collect();
        found.sort_by(|a, b| query.order(a, b));
        let kept = answer.get("Items").and_then(Value::as_array).map_or(0, Vec::len);
        let mut changed = kept < answered;
        let Some(items) = answer.get_mut("Items").and_then(Value::as_array_mut) else { return answer };
        for item in found {
            if query.limit.is_some_and(|limit| items.len() >= limit) {
                break;
            }
            let at = items
                .iter()
                .position(|i| i.as_object().is_some_and(|i| query.order(i, &item) == Ordering::Greater))
                .unwrap_or(items.len());
            items.insert(at, Value::Object(item));
            changed = true;
        }
        if changed {
            self.stale_reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let count = items.len();
        answer["Count"] = Value::from(count);
        let scanned = answer.get("ScannedCount").and_then(Value::as_u64).unwrap_or(0);
        answer["ScannedCount"] = Value::from(scanned.max(count as u64));
        answer
    }

    /// What `index` copies of `item`.
    fn projected(&self, index: &Gsi, item: Item) -> Item {
        if index.projection != "KEYS_ONLY" {
            return item;
        }
        let names = [&self.table.partition_key, &self.table.sort_key, &index.partition_key.name, &index.sort_key.name];
        item.into_iter().filter(|(name, _)| names.contains(&name)).collect()
    }
}

/// An index query as far as the lag needs it: what it selects, in which
/// order, from where, how many.
struct Query<'a> {
    index: &'a Gsi,
    key_condition: Condition,
    filter: Option<Condition>,
    names: Map<String, Value>,
    values: Map<String, Value>,
    forward: bool,
    start: Option<Item>,
    limit: Option<usize>,
}

impl<'a> Query<'a> {
    /// `None` when the request asks what this emulation cannot answer.
    fn of(request: &Value, index: &'a Gsi) -> Option<Self> {
        if request.get("ProjectionExpression").is_some()
            || request
                .get("Select")
                .and_then(Value::as_str)
                .is_some_and(|s| s != "ALL_ATTRIBUTES" && s != "ALL_PROJECTED_ATTRIBUTES")
        {
            return None;
        }
        let key_condition = Condition::parse(request.get("KeyConditionExpression")?.as_str()?)?;
        let filter = match request.get("FilterExpression") {
            Some(filter) => Some(Condition::parse(filter.as_str()?)?),
            None => None,
        };
        let object = |field: &str| request.get(field).and_then(Value::as_object).cloned();
        Some(Self {
            index,
            key_condition,
            filter,
            names: object("ExpressionAttributeNames").unwrap_or_default(),
            values: object("ExpressionAttributeValues").unwrap_or_default(),
            forward: request.get("ScanIndexForward").and_then(Value::as_bool).unwrap_or(true),
            start: object("ExclusiveStartKey"),
            limit: request.get("Limit").and_then(Value::as_u64).map(|l| l as usize),
        })
    }

    /// Whether the index holds `item` (it has the index's keys) and the
    /// query selects it.
    fn selects(&self, item: &Item) -> bool {
        item.contains_key(&self.index.partition_key.name)
            && item.contains_key(&self.index.sort_key.name)
            && self.key_condition.holds(item, &self.names, &self.values)
            && self.filter.as_ref().is_none_or(|f| f.holds(item, &self.names, &self.values))
    }

    /// `a` against `b` in the order of the query's answer (by the index's
    /// sort key, as the query asked).
    fn order(&self, a: &Item, b: &Item) -> Ordering {
        let name = &self.index.sort_key.name;
        let ordering = match (a.get(name), b.get(name)) {
            (Some(a), Some(b)) => compare(a, b).unwrap_or(Ordering::Equal),
            _ => Ordering::Equal,
        };
        if self.forward {
            ordering
        } else {
            ordering.reverse()
        }
    }
}

/// Two attribute values of the same scalar type, compared as DynamoDB
/// does (strings by their UTF-8 bytes, numbers by value).
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    if let (Some(a), Some(b)) = (a.get("S").and_then(Value::as_str), b.get("S").and_then(Value::as_str)) {
        return Some(a.cmp(b));
    }
    if let (Some(a), Some(b)) = (a.get("N").and_then(Value::as_str), b.get("N").and_then(Value::as_str)) {
        return a.parse::<f64>().ok()?.partial_cmp(&b.parse::<f64>().ok()?);
    }
    (a == b).then_some(Ordering::Equal)
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    /// An attribute path: names or `#placeholders`, `.`-separated.
    Path(Vec<String>),
    /// A `:placeholder` of `ExpressionAttributeValues`.
    Value(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Term {
    Compare(Operand, Comparison, Operand),
    Between(Operand, Operand, Operand),
    BeginsWith(Operand, Operand),
}

/// A condition expression that is an `AND` of terms.
#[derive(Debug, Clone, PartialEq)]
struct Condition(Vec<Term>);

impl Condition {
    /// `None` for anything but an `AND` of comparisons, `BETWEEN`s and
    /// `begins_with`s.
    fn parse(expression: &str) -> Option<Self> {
        let tokens = tokens(expression)?;
        let mut at = 0;
        let mut terms = Vec::new();
        loop {
            terms.push(term(&tokens, &mut at)?);
            match tokens.get(at) {
                None => return Some(Self(terms)),
                Some(t) if t.eq_ignore_ascii_case("AND") => at += 1,
                Some(_) => return None,
            }
        }
    }

    fn holds(&self, item: &Item, names: &Map<String, Value>, values: &Map<String, Value>) -> bool {
        let value = |operand: &Operand| -> Option<Value> {
            match operand {
                Operand::Value(placeholder) => values.get(placeholder).cloned(),
                Operand::Path(path) => {
                    let name = |segment: &String| -> Option<String> {
                        if segment.starts_with('#') {
                            names.get(segment)?.as_str().map(str::to_string)
                        } else {
                            Some(segment.clone())
                        }
                    };
                    let (first, rest) = path.split_first()?;
                    let mut current = item.get(&name(first)?)?.clone();
                    for segment in rest {
                        current = current.get("M")?.get(name(segment)?)?.clone();
                    }
                    Some(current)
                }
            }
        };
        self.0.iter().all(|term| match term {
            Term::Compare(a, comparator, b) => {
                let (Some(a), Some(b)) = (value(a), value(b)) else { return false };
                let ordering = compare(&a, &b);
                comparator.holds(
                    ordering == Some(Ordering::Equal),
                    ordering == Some(Ordering::Less),
                    ordering == Some(Ordering::Greater),
                )
            }
            Term::Between(a, low, high) => {
                let (Some(a), Some(low), Some(high)) = (value(a), value(low), value(high)) else { return false };
                matches!(compare(&a, &low), Some(Ordering::Greater | Ordering::Equal))
                    && matches!(compare(&a, &high), Some(Ordering::Less | Ordering::Equal))
            }
            Term::BeginsWith(a, prefix) => {
                let (Some(a), Some(prefix)) = (value(a), value(prefix)) else { return false };
                match (a.get("S").and_then(Value::as_str), prefix.get("S").and_then(Value::as_str)) {
                    (Some(a), Some(prefix)) => a.starts_with(prefix),
                    _ => false,
                }
            }
        })
    }
}

/// The tokens of a condition expression: words (names, paths,
/// placeholders, keywords), comparators, parentheses and commas.
fn tokens(expression: &str) -> Option<Vec<String>> {
    let mut tokens = Vec::new();
    let mut chars = expression.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '(' | ')' | ',' | '=' => tokens.push(c.to_string()),
            '<' | '>' => {
                let mut token = c.to_string();
                if let Some(next) = chars.next_if(|n| *n == '=' || (c == '<' && *n == '>')) {
                    token.push(next);
                }
                tokens.push(token);
            }
            c if c.is_alphanumeric() || "#:_.-".contains(c) => {
                let mut word = c.to_string();
                while let Some(next) = chars.next_if(|n| n.is_alphanumeric() || "#:_.-".contains(*n)) {
                    word.push(next);
                }
                tokens.push(word);
            }
            _ => return None,
        }
    }
    Some(tokens)
}

fn operand(tokens: &[String], at: &mut usize) -> Option<Operand> {
    let token = tokens.get(*at)?;
    *at += 1;
    if let Some(placeholder) = token.strip_prefix(':') {
        return Some(Operand::Value(format!(":{placeholder}")));
    }
    let keyword = ["AND", "OR", "NOT", "BETWEEN", "IN"].iter().any(|k| token.eq_ignore_ascii_case(k));
    if keyword || !token.chars().next().is_some_and(|c| c.is_alphabetic() || c == '#' || c == '_') {
        return None;
    }
    Some(Operand::Path(token.split('.').map(str::to_string).collect()))
}

fn term(tokens: &[String], at: &mut usize) -> Option<Term> {
    if tokens.get(*at)?.eq_ignore_ascii_case("begins_with") {
        let expect = |at: &mut usize, what: &str| -> Option<()> { (tokens.get(*at)? == what).then(|| *at += 1) };
        *at += 1;
        expect(at, "(")?;
        let path = operand(tokens, at)?;
        expect(at, ",")?;
        let prefix = operand(tokens, at)?;
        expect(at, ")")?;
        return Some(Term::BeginsWith(path, prefix));
    }
    let left = operand(tokens, at)?;
    let comparator = tokens.get(*at)?.clone();
    *at += 1;
    if comparator.eq_ignore_ascii_case("BETWEEN") {
        let low = operand(tokens, at)?;
        if !tokens.get(*at)?.eq_ignore_ascii_case("AND") {
            return None;
        }
        *at += 1;
        let high = operand(tokens, at)?;
        return Some(Term::Between(left, low, high));
    }
    let comparator = match comparator.as_str() {
        "=" => Comparison::Eq,
        "<>" => Comparison::Ne,
        "<" => Comparison::Lt,
        "<=" => Comparison::Le,
        ">" => Comparison::Gt,
        ">=" => Comparison::Ge,
        _ => return None,
    };
    let right = operand(tokens, at)?;
    Some(Term::Compare(left, comparator, right))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lag() -> IndexLag {
        IndexLag::new(Duration::from_secs(10), crate::resources::Resources::load().table)
    }

    fn item(value: Value) -> Item {
        value.as_object().cloned().unwrap_or_default()
    }

    fn lease(pk: &str, expires: i64) -> Item {
        item(
            json!({"pk": {"S": pk}, "sk": {"S": "LEASE"}, "lx_shard": {"S": "L#1"}, "lx_expires_at": {"N": expires.to_string()}, "token": {"S": "secret"}}),
        )
    }

    fn expired_before(now: i64, limit: Option<u64>) -> Value {
        let mut request = json!({
            "TableName": "baton-test-state", "IndexName": "leases-by-expiry",
            "KeyConditionExpression": "lx_shard = :shard AND lx_expires_at < :now",
            "ExpressionAttributeValues": {":shard": {"S": "L#1"}, ":now": {"N": now.to_string()}},
        });
        if let Some(limit) = limit {
            request["Limit"] = json!(limit);
        }
        request
    }

    fn keys(page: &Value) -> Vec<String> {
        page["Items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["pk"]["S"].as_str().unwrap_or("?").to_string())
            .collect()
    }

    fn answer(items: &[Item]) -> Value {
        let projected: Vec<Value> = items
            .iter()
            .map(|i| {
                Value::Object(
                    i.iter().filter(|(k, _)| k.as_str() != "token").map(|(k, v)| (k.clone(), v.clone())).collect(),
                )
            })
            .collect();
        json!({"Items": projected, "Count": items.len(), "ScannedCount": items.len()})
    }

    fn written(table: &str, pk: &str) -> Written {
        Written { table: table.into(), key: item(json!({"pk": {"S": pk}, "sk": {"S": "LEASE"}})), known_absent: false }
    }

    #[test]
    fn an_index_read_within_the_lag_still_lists_what_was_moved_out_and_misses_what_was_moved_in() {
        let lag = lag();
        let t0 = Instant::now();
        // `a` expired at 100 and was moved up to 500 (a heartbeat's
        // advance); `b` was deleted (a complete); `c` is new, at 50.
        lag.record(
            vec![
                (written("baton-test-state", "a"), Some(lease("a", 100))),
                (written("baton-test-state", "b"), Some(lease("b", 200))),
                (written("baton-test-state", "c"), None),
            ],
            t0,
        );
        // moto's index now: c (50) and d (150), untouched.
        let now_index = answer(&[lease("c", 50), lease("d", 150)]);
        let page = lag.page(&expired_before(300, None), now_index.clone(), t0 + Duration::from_secs(1));
        assert_eq!(keys(&page), ["a", "d", "b"], "in expiry order, as the index stood: {page}");
        assert_eq!(page["Count"], 3);
        assert!(page["Items"][0].get("token").is_none(), "a KEYS_ONLY index copies keys only");
        // Once the lag has passed, the index has caught up.
        let later = lag.page(&expired_before(300, None), now_index, t0 + Duration::from_secs(11));
        assert_eq!(keys(&later), ["c", "d"]);
        assert_eq!(lag.stale_reads(), 1, "one read answered stale");
    }

    #[test]
    fn a_stale_item_stays_within_the_pages_limit_and_bounds_and_only_where_the_query_selects_it() {
        let lag = lag();
        let t0 = Instant::now();
        lag.record(
            vec![
                (written("baton-test-state", "a"), Some(lease("a", 100))),
                (written("baton-test-state", "late"), Some(lease("late", 900))),
                (written("other-table", "z"), Some(lease("z", 10))),
            ],
            t0,
        );
        let now = t0 + Duration::from_secs(1);
        // Full: a page of 2 from moto leaves no room.
        let full = lag.page(&expired_before(1000, Some(2)), answer(&[lease("d", 150), lease("e", 160)]), now);
        assert_eq!(keys(&full), ["d", "e"]);
        // Past the page's end (`LastEvaluatedKey` at 160): `late` is the next page's.
        let mut bounded = answer(&[lease("d", 150), lease("e", 160)]);
        bounded["LastEvaluatedKey"] = Value::Object(lease("e", 160));
        let page = lag.page(&expired_before(1000, Some(3)), bounded, now);
        assert_eq!(keys(&page), ["a", "d", "e"]);
        // Not selected by the key condition: `late` expires at 900, after 300.
        let page = lag.page(&expired_before(300, None), answer(&[]), now);
        assert_eq!(keys(&page), ["a"], "another table's writes are not this one's");
        // Descending, from an exclusive start at 150.
        let mut request = expired_before(1000, None);
        request["ScanIndexForward"] = json!(false);
        request["ExclusiveStartKey"] = Value::Object(lease("d", 150));
        let page = lag.page(&request, answer(&[]), now);
        assert_eq!(keys(&page), ["a"], "only what sorts after the start: {page}");
    }

    #[test]
    fn an_index_with_all_attributes_answers_the_old_image_and_filters_apply_to_it() {
        let lag = lag();
        let t0 = Instant::now();
        let run = |status: &str| {
            item(json!({"pk": {"S": "RUN#1"}, "sk": {"S": "RUN"}, "rw_pk": {"S": "WS#w#RUNS"}, "rw_sk": {"S": "1"},
                "state": {"M": {"status": {"S": status}}}}))
        };
        lag.record(
            vec![(
                Written { table: "t".into(), key: lag.key_of(&run("x")).unwrap_or_default(), known_absent: false },
                Some(run("queued")),
            )],
            t0,
        );
        let request = |status: &str| {
            json!({"TableName": "t", "IndexName": "runs-by-workspace", "KeyConditionExpression": "rw_pk = :ws",
                "FilterExpression": "#state.#status = :status",
                "ExpressionAttributeNames": {"#state": "state", "#status": "status"},
                "ExpressionAttributeValues": {":ws": {"S": "WS#w#RUNS"}, ":status": {"S": status}}})
        };
        let now = t0 + Duration::from_secs(1);
        // moto has it cancelled; the lagging index still has it queued.
        let page = lag.page(&request("queued"), json!({"Items": [], "Count": 0}), now);
        assert_eq!(page["Items"][0]["state"]["M"]["status"]["S"], "queued", "{page}");
        let page =
            lag.page(&request("cancelled"), json!({"Items": [Value::Object(run("cancelled"))], "Count": 1}), now);
        assert_eq!(page["Count"], 0, "the new image is not in the index yet: {page}");
    }

    #[test]
    fn the_writes_of_every_write_operation_are_found_and_a_query_it_cannot_read_is_left_alone() {
        let lag = lag();
        let key = json!({"pk": {"S": "p"}, "sk": {"S": "s"}});
        let put = json!({"TableName": "t", "Item": {"pk": {"S": "p"}, "sk": {"S": "s"}, "x": {"N": "1"}}, "ConditionExpression": "attribute_not_exists(pk)"});
        assert_eq!(
            lag.written("PutItem", &put),
            vec![Written { table: "t".into(), key: item(key.clone()), known_absent: true }]
        );
        let transaction = json!({"TransactItems": [
            {"Put": put}, {"Update": {"TableName": "t", "Key": key}}, {"Delete": {"TableName": "t", "Key": key}},
            {"ConditionCheck": {"TableName": "t", "Key": key}}]});
        assert_eq!(lag.written("TransactWriteItems", &transaction).len(), 3, "a condition check writes nothing");
        let batch = json!({"RequestItems": {"t": [{"PutRequest": {"Item": {"pk": {"S": "p"}, "sk": {"S": "s"}}}}, {"DeleteRequest": {"Key": key}}]}});
        let found = lag.written("BatchWriteItem", &batch);
        assert_eq!(found.len(), 2);
        assert!(!found[0].known_absent, "an unconditional put may replace an item");
        assert!(lag.written("GetItem", &json!({"TableName": "t", "Key": key})).is_empty());

        lag.record(vec![(written("t", "a"), Some(lease("a", 1)))], Instant::now());
        let mut request = expired_before(10, None);
        request["TableName"] = json!("t");
        request["KeyConditionExpression"] = json!("lx_shard = :shard OR lx_expires_at < :now");
        let unchanged = json!({"Items": [], "Count": 0});
        assert_eq!(lag.page(&request, unchanged.clone(), Instant::now()), unchanged, "OR is not guessed at");
    }

    #[test]
    fn conditions_parse_as_dynamodb_reads_them() {
        let names = Map::new();
        let values = item(json!({":a": {"N": "5"}, ":b": {"N": "9"}, ":p": {"S": "ab"}}));
        let holds = |expression: &str, it: Value| {
            Condition::parse(expression).expect(expression).holds(&item(it), &names, &values)
        };
        assert!(holds("x BETWEEN :a AND :b AND begins_with(s, :p)", json!({"x": {"N": "7"}, "s": {"S": "abc"}})));
        assert!(!holds("x BETWEEN :a AND :b", json!({"x": {"N": "10"}})));
        assert!(holds("x>=:a AND x<>:b", json!({"x": {"N": "5"}})));
        assert!(!holds("x < :a", json!({})), "a missing attribute compares false");
        for unsupported in ["attribute_exists(x)", "x = :a OR x = :b", "NOT x = :a", "x IN (:a, :b)", "size(x) > :a"] {
            assert!(Condition::parse(unsupported).is_none(), "{unsupported}");
        }
    }
}
