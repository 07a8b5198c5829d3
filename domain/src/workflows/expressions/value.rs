//! An expression's values as GitHub Actions has them (null, boolean,
//! number, string, array, object), with its coercions: how a value counts
//! as true, how two values compare, and how a value reads as text.

use std::cmp::Ordering;
use std::collections::hash_map::{Entry, HashMap};
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};

/// A value an expression computes.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    /// Keys in their order (`toJSON` writes them so), looked up ignoring
    /// case, as GitHub's contexts are.
    Object(Vec<(String, Value)>),
}

impl Value {
    /// Falsy are `false`, `0`, `-0`, `NaN`, `''` and `null`; everything
    /// else (arrays and objects too) is truthy.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => *n != 0.0 && !n.is_nan(),
            Value::String(s) => !s.is_empty(),
            Value::Array(_) | Value::Object(_) => true,
        }
    }

    /// Null, boolean, number or string: what functions cast to text.
    pub fn is_primitive(&self) -> bool {
        !matches!(self, Value::Array(_) | Value::Object(_))
    }

    /// The value as a number, for comparing values of different kinds:
    /// null is 0, `true` 1, `false` 0, a string its number (`''` is 0,
    /// text that is no number `NaN`), an array or an object `NaN`.
    pub fn number(&self) -> f64 {
        match self {
            Value::Null => 0.0,
            Value::Bool(b) => f64::from(u8::from(*b)),
            Value::Number(n) => *n,
            Value::String(s) => parse_number(s),
            Value::Array(_) | Value::Object(_) => f64::NAN,
        }
    }

    /// The value as functions cast it to text (`format`, `join`,
    /// `contains`…): null is `''`, an array `Array` and an object `Object`
    /// (GitHub does not cast those).
    pub fn coerce_string(&self) -> String {
        match self {
            Value::Array(_) => "Array".into(),
            Value::Object(_) => "Object".into(),
            other => other.render(),
        }
    }

    /// The value put into text by `${{ … }}`: null is empty, an array or an
    /// object its JSON (as `toJSON` writes it).
    pub fn render(&self) -> String {
        match self {
            Value::Null => String::new(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => format_number(*n),
            Value::String(s) => s.clone(),
            Value::Array(_) | Value::Object(_) => self.to_json(),
        }
    }

    /// JSON indented by two spaces, as GitHub's `toJSON` writes it.
    pub fn to_json(&self) -> String {
        // Writing a value of plain data to a string cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// A JSON value as an expression's (objects keep their keys' order).
    pub fn from_serde(value: &serde_json::Value) -> Value {
        serde_json::from_value(value.clone()).unwrap_or(Value::Null)
    }

    /// Reads JSON text (`fromJSON`).
    pub fn from_json(text: &str) -> Result<Value, String> {
        serde_json::from_str(text).map_err(|err| err.to_string())
    }

    /// An object's property, its name compared ignoring case.
    pub fn property(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Object(entries) => entries.iter().find(|(key, _)| same_text(key, name)).map(|(_, value)| value),
            _ => None,
        }
    }
}

/// Two strings equal ignoring case (GitHub compares strings so).
pub fn same_text(a: &str, b: &str) -> bool {
    a.chars().flat_map(char::to_uppercase).eq(b.chars().flat_map(char::to_uppercase))
}

fn compare_text(a: &str, b: &str) -> Ordering {
    a.chars().flat_map(char::to_uppercase).cmp(b.chars().flat_map(char::to_uppercase))
}

/// Two values as a comparison sees them: of one kind they compare as they
/// are; of two primitive kinds both become numbers; an array or an object
/// against anything else does not compare.
enum Pair<'a> {
    Nulls,
    Bools(bool, bool),
    Numbers(f64, f64),
    Strings(&'a str, &'a str),
    /// Two arrays or two objects: GitHub compares their identity, and every
    /// array or object an expression makes is a new one.
    Containers,
    Unlike,
}

fn pair<'a>(a: &'a Value, b: &'a Value) -> Pair<'a> {
    match (a, b) {
        (Value::Null, Value::Null) => Pair::Nulls,
        (Value::Bool(x), Value::Bool(y)) => Pair::Bools(*x, *y),
        (Value::Number(x), Value::Number(y)) => Pair::Numbers(*x, *y),
        (Value::String(x), Value::String(y)) => Pair::Strings(x, y),
        (Value::Array(_), Value::Array(_)) | (Value::Object(_), Value::Object(_)) => Pair::Containers,
        _ if a.is_primitive() && b.is_primitive() => Pair::Numbers(a.number(), b.number()),
        _ => Pair::Unlike,
    }
}

/// `==`: `NaN` equals nothing.
pub fn loose_eq(a: &Value, b: &Value) -> bool {
    match pair(a, b) {
        Pair::Nulls => true,
        Pair::Bools(x, y) => x == y,
        Pair::Numbers(x, y) => x == y,
        Pair::Strings(x, y) => same_text(x, y),
        Pair::Containers | Pair::Unlike => false,
    }
}

/// `>`: false when either side is `NaN` or they do not compare.
pub fn greater(a: &Value, b: &Value) -> bool {
    match pair(a, b) {
        Pair::Bools(x, y) => x && !y,
        Pair::Numbers(x, y) => x > y,
        Pair::Strings(x, y) => compare_text(x, y) == Ordering::Greater,
        Pair::Nulls | Pair::Containers | Pair::Unlike => false,
    }
}

/// `<`: false when either side is `NaN` or they do not compare.
pub fn less(a: &Value, b: &Value) -> bool {
    greater(b, a)
}

/// A string literal holding `text`, as the language writes one.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A number as GitHub writes it: up to 15 significant digits, integers
/// without a fraction, exponents for the very large and very small
/// (`1E+15`, `1E-07`), `NaN`, `Infinity`, `-Infinity`.
pub fn format_number(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if n == 0.0 {
        return "0".into();
    }
    // Rounded to 15 significant digits: "d.dddddddddddddde<exp>".
    let scientific = format!("{n:.14e}");
    let Some((mantissa, exponent)) = scientific.split_once('e') else { return n.to_string() };
    let Ok(exponent) = exponent.parse::<i32>() else { return n.to_string() };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let mut out = String::new();
    if n < 0.0 {
        out.push('-');
    }
    if !(-4..15).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let sign = if exponent < 0 { '-' } else { '+' };
        out.push_str(&format!("E{sign}{:02}", exponent.abs()));
    } else if exponent < 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat(exponent.unsigned_abs() as usize - 1));
        out.push_str(digits);
    } else {
        let whole = exponent as usize + 1;
        if digits.len() <= whole {
            out.push_str(digits);
            out.push_str(&"0".repeat(whole - digits.len()));
        } else {
            out.push_str(&digits[..whole]);
            out.push('.');
            out.push_str(&digits[whole..]);
        }
    }
    out
}

/// Text as a number, as GitHub reads it: surrounding whitespace ignored,
/// `''` is 0, decimals with an optional sign, fraction and exponent
/// (`-2.99e-2`, `.5`), `0x`/`0o`/`0b` integers, `Infinity`; anything else
/// is `NaN`.
pub fn parse_number(text: &str) -> f64 {
    let text = text.trim();
    if text.is_empty() {
        return 0.0;
    }
    for (prefix, radix) in [("0x", 16), ("0X", 16), ("0o", 8), ("0O", 8), ("0b", 2), ("0B", 2)] {
        if let Some(digits) = text.strip_prefix(prefix) {
            if digits.is_empty() {
                return f64::NAN;
            }
            return digits
                .chars()
                .try_fold(0.0, |total, c| c.to_digit(radix).map(|d| total * f64::from(radix) + f64::from(d)))
                .unwrap_or(f64::NAN);
        }
    }
    match text {
        "Infinity" | "+Infinity" => return f64::INFINITY,
        "-Infinity" => return f64::NEG_INFINITY,
        _ => {}
    }
    if !is_decimal(text) {
        return f64::NAN;
    }
    text.parse::<f64>().unwrap_or(f64::NAN)
}

/// `[+-]digits[.digits][(e|E)[+-]digits]`, with a digit before or after the
/// point (Rust's own parser also takes `inf` and `nan`, which GitHub does
/// not).
fn is_decimal(text: &str) -> bool {
    let text = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    let mantissa_ok = digits(whole) && digits(fraction) && !(whole.is_empty() && fraction.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// Written as JSON keeping an object's key order; a whole number without
/// a fraction (`1`, not `1.0`), as GitHub writes it.
impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Number(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => serializer.serialize_i64(*n as i64),
            Value::Number(n) => serializer.serialize_f64(*n),
            Value::String(s) => serializer.serialize_str(s),
            Value::Array(items) => serializer.collect_seq(items),
            Value::Object(entries) => serializer.collect_map(entries.iter().map(|(key, value)| (key, value))),
        }
    }
}

/// Read from JSON keeping an object's key order (a map type would sort
/// them, and `toJSON(fromJSON(x))` should give `x`'s order back).
impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n as f64))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n as f64))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Value::Number(n))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries: Vec<(String, Value)> = Vec::new();
        // Keys are case-insensitive: a repeated one keeps its place and
        // takes the last value. Indexed, so a large object reads in
        // linear time.
        let mut places: HashMap<String, usize> = HashMap::new();
        while let Some((key, value)) = map.next_entry::<String, Value>()? {
            match places.entry(key.to_uppercase()) {
                Entry::Occupied(place) => entries[*place.get()].1 = value,
                Entry::Vacant(place) => {
                    place.insert(entries.len());
                    entries.push((key, value));
                }
            }
        }
        Ok(Value::Object(entries))
    }
}
