//! The functions an expression may call (GitHub Actions' own, less those
//! that run on the runner): what they are called, how many arguments they
//! take, and what they compute. The status functions (`success()`…) are
//! not here: an `if:` decides them apart (`split_condition`).

use super::value::{loose_eq, Value};

/// A function an expression calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    Contains,
    StartsWith,
    EndsWith,
    Format,
    Join,
    ToJson,
    FromJson,
    /// `hashFiles(pattern…)`: the SHA-256 of the files the patterns match
    /// in the job's directory. It needs the runner's files: evaluated only
    /// where the scope has them (`Scope::hash_files`, a step on the runner).
    HashFiles,
}

const ALL: [Function; 8] = [
    Function::Contains,
    Function::StartsWith,
    Function::EndsWith,
    Function::Format,
    Function::Join,
    Function::ToJson,
    Function::FromJson,
    Function::HashFiles,
];

/// Every function an expression may call, for error messages.
pub const KNOWN: &str =
    "contains, startsWith, endsWith, format, join, toJSON, fromJSON, hashFiles, success, failure, always, cancelled";

impl Function {
    /// The function called `name` (ignoring case, as GitHub does).
    pub fn named(name: &str) -> Option<Self> {
        ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(name))
    }

    pub fn name(self) -> &'static str {
        match self {
            Function::Contains => "contains",
            Function::StartsWith => "startsWith",
            Function::EndsWith => "endsWith",
            Function::Format => "format",
            Function::Join => "join",
            Function::ToJson => "toJSON",
            Function::FromJson => "fromJSON",
            Function::HashFiles => "hashFiles",
        }
    }

    /// `None` when `count` arguments are right, else what is expected.
    pub fn arity_error(self, count: usize) -> Option<String> {
        let expected = match self {
            Function::Contains | Function::StartsWith | Function::EndsWith => (count != 2).then_some("2 arguments"),
            Function::Join => (!(1..=2).contains(&count)).then_some("1 or 2 arguments"),
            Function::ToJson | Function::FromJson => (count != 1).then_some("1 argument"),
            Function::Format => (count == 0).then_some("a format string and the values it puts in"),
            Function::HashFiles => (count == 0).then_some("at least one pattern"),
        }?;
        Some(format!("{}() takes {expected}, not {count}", self.name()))
    }

    /// The function's value for `args` (as many as [`Self::arity_error`]
    /// accepts; the parser checked).
    pub fn call(self, args: &[Value]) -> Result<Value, String> {
        let arg = |i: usize| args.get(i).unwrap_or(&Value::Null);
        Ok(match self {
            Function::Contains => Value::Bool(contains(arg(0), arg(1))),
            Function::StartsWith => Value::Bool(both_text(arg(0), arg(1), |a, b| a.starts_with(b))),
            Function::EndsWith => Value::Bool(both_text(arg(0), arg(1), |a, b| a.ends_with(b))),
            Function::Format => {
                let template = arg(0).coerce_string();
                let values = args.get(1..).unwrap_or_default();
                Value::String(format_with(&template, values.len(), |i, out| out.push_str(&values[i].coerce_string()))?)
            }
            Function::Join => Value::String(join(arg(0), args.get(1))),
            Function::ToJson => Value::String(arg(0).to_json()),
            Function::FromJson => from_json(&arg(0).coerce_string())?,
            // Evaluated with the scope's files (`eval`), never from values alone.
            Function::HashFiles => return Err(RUNNER_ONLY.into()),
        })
    }
}

/// Why `hashFiles()` has no value where the files are not.
pub const RUNNER_ONLY: &str = "hashFiles() reads the job's files: only a step's fields and `if:` may call it";

/// `contains(search, item)`: a substring of a string, or an element of an
/// array (compared as `==` does), ignoring case.
fn contains(search: &Value, item: &Value) -> bool {
    match search {
        Value::Array(items) => items.iter().any(|element| loose_eq(item, element)),
        _ => both_text(search, item, |a, b| a.contains(b)),
    }
}

/// `test` on both values cast to text and upper-cased (GitHub compares
/// text ignoring case); false when either is an array or an object.
fn both_text(a: &Value, b: &Value, test: impl Fn(&str, &str) -> bool) -> bool {
    a.is_primitive() && b.is_primitive() && test(&a.coerce_string().to_uppercase(), &b.coerce_string().to_uppercase())
}

/// `join(array, separator = ',')`: a primitive is its own text; an object
/// joins to nothing.
fn join(value: &Value, separator: Option<&Value>) -> String {
    match value {
        Value::Array(items) => {
            let separator = separator.filter(|s| s.is_primitive()).map_or(",".to_string(), Value::coerce_string);
            items.iter().map(Value::coerce_string).collect::<Vec<_>>().join(&separator)
        }
        Value::Object(_) => String::new(),
        primitive => primitive.coerce_string(),
    }
}

/// `fromJSON(text)`; text that is not JSON fails the expression (an empty
/// output read as JSON is a mistake to see, not a null to go on with).
fn from_json(text: &str) -> Result<Value, String> {
    Value::from_json(text).map_err(|err| {
        let shown: String = text.chars().take(40).collect();
        let more = if shown.len() < text.len() { "…" } else { "" };
        format!("fromJSON('{shown}{more}'): not JSON ({err})")
    })
}

/// Checks a literal format string against the number of values given, so
/// a bad one is refused when the run is created.
pub fn check_format(template: &str, supplied: usize) -> Result<(), String> {
    format_with(template, supplied, |_, _| {}).map(drop)
}

/// `format`: `{N}` is the N-th value (from 0), `{{` and `}}` are braces;
/// any other brace, or an N past the values given, is an error.
fn format_with(template: &str, supplied: usize, mut put: impl FnMut(usize, &mut String)) -> Result<String, String> {
    let invalid = |why: &str| format!("format('{template}'): {why}");
    let chars: Vec<char> = template.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let next = chars.get(i + 1).copied();
        match c {
            '{' if next == Some('{') => {
                out.push('{');
                i += 2;
            }
            '{' => {
                let digits = chars[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                let close = i + 1 + digits;
                if digits == 0 || chars.get(close) != Some(&'}') {
                    return Err(invalid("a '{' opens no {N} (a brace itself is written '{{')"));
                }
                let index: usize = chars[i + 1..close]
                    .iter()
                    .collect::<String>()
                    .parse()
                    .map_err(|_| invalid("an index is too large"))?;
                if index >= supplied {
                    return Err(invalid(&format!("reads {{{index}}} but is given {supplied} value(s)")));
                }
                put(index, &mut out);
                i = close + 1;
            }
            '}' if next == Some('}') => {
                out.push('}');
                i += 2;
            }
            '}' => return Err(invalid("a '}' closes no {N} (a brace itself is written '}}')")),
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}
