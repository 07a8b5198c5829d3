//! Computing an expression's value in a scope: `&&` and `||` give one of
//! their operands (GitHub's `a && 'yes' || 'no'`), comparisons coerce as
//! GitHub's do, and indexes read into arrays and objects, `*` filtering.

use super::functions::{Function, RUNNER_ONLY};
use super::value::{greater, less, loose_eq, Value};
use super::{Expr, Index, Scope};

/// `expr`'s value in `scope`. An error (a function's, as `fromJSON` of text
/// that is not JSON) fails the whole expression.
pub fn evaluate(expr: &Expr, scope: &dyn Scope) -> Result<Value, String> {
    Ok(match expr {
        Expr::Literal(value) => value.clone(),
        // Nothing by that name: null, as an absent context property is.
        Expr::Ref(reference) => scope.resolve_value(reference).unwrap_or(Value::Null),
        // Where the scope does not know it, decided apart, from the needs'
        // statuses (split_condition).
        Expr::Status(function) => Value::Bool(scope.status(function).unwrap_or(true)),
        Expr::Not(inner) => Value::Bool(!evaluate(inner, scope)?.truthy()),
        Expr::And(a, b) => {
            let left = evaluate(a, scope)?;
            if left.truthy() {
                evaluate(b, scope)?
            } else {
                left
            }
        }
        Expr::Or(a, b) => {
            let left = evaluate(a, scope)?;
            if left.truthy() {
                left
            } else {
                evaluate(b, scope)?
            }
        }
        Expr::Compare(op, a, b) => {
            let (a, b) = (evaluate(a, scope)?, evaluate(b, scope)?);
            Value::Bool(op.holds(loose_eq(&a, &b), less(&a, &b), greater(&a, &b)))
        }
        Expr::Call(function, args) => {
            let values = args.iter().map(|arg| evaluate(arg, scope)).collect::<Result<Vec<_>, _>>()?;
            if *function == Function::HashFiles {
                let patterns: Vec<String> = values.iter().map(Value::coerce_string).collect();
                Value::String(scope.hash_files(&patterns).unwrap_or_else(|| Err(RUNNER_ONLY.into()))?)
            } else {
                function.call(&values)?
            }
        }
        Expr::Index(..) => indexed(expr, scope)?.value,
    })
}

/// A value read through indexes, and whether it is the result of a `*`
/// filter: the next index then applies to each of its elements.
struct Read {
    value: Value,
    filtered: bool,
}

/// How an index reads: a primitive key reads an object's property by its
/// text, and an array's element when it is a whole number (from 0).
enum Key {
    Star,
    Key { name: Option<String>, position: Option<usize> },
}

fn indexed(expr: &Expr, scope: &dyn Scope) -> Result<Read, String> {
    let Expr::Index(base, index) = expr else {
        return Ok(Read { value: evaluate(expr, scope)?, filtered: false });
    };
    let base = indexed(base, scope)?;
    let key = match index.as_ref() {
        Index::Star => Key::Star,
        Index::Key(key) => {
            let key = evaluate(key, scope)?;
            let n = key.number();
            Key::Key {
                name: key.is_primitive().then(|| key.coerce_string()),
                position: (n.is_finite() && n >= 0.0).then(|| n.floor() as usize),
            }
        }
    };
    Ok(read(base, &key))
}

fn read(base: Read, key: &Key) -> Read {
    let filter = |value| Read { value, filtered: true };
    let plain = |value| Read { value, filtered: false };
    match (base.value, key) {
        // A filter's elements are each read, and what they give is
        // gathered (a `*` gathers their elements).
        (Value::Array(items), _) if base.filtered => {
            let mut out = Vec::new();
            for item in items {
                match (item, key) {
                    (Value::Object(entries), Key::Star) => out.extend(entries.into_iter().map(|(_, v)| v)),
                    (Value::Array(elements), Key::Star) => out.extend(elements),
                    (object @ Value::Object(_), Key::Key { name: Some(name), .. }) => {
                        out.extend(object.property(name).cloned())
                    }
                    (Value::Array(mut elements), Key::Key { position: Some(at), .. }) if *at < elements.len() => {
                        out.push(elements.swap_remove(*at))
                    }
                    _ => {}
                }
            }
            filter(Value::Array(out))
        }
        (Value::Array(items), Key::Star) => filter(Value::Array(items)),
        (Value::Array(mut items), Key::Key { position: Some(at), .. }) if *at < items.len() => {
            plain(items.swap_remove(*at))
        }
        (Value::Object(entries), Key::Star) => filter(Value::Array(entries.into_iter().map(|(_, v)| v).collect())),
        (object @ Value::Object(_), Key::Key { name: Some(name), .. }) => {
            plain(object.property(name).cloned().unwrap_or(Value::Null))
        }
        (_, Key::Star) => filter(Value::Array(Vec::new())),
        _ => plain(Value::Null),
    }
}
