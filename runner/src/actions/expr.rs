//! The `${{ … }}` expressions inside an action's own `action.yml` (input
//! defaults, a composite action's steps and outputs), evaluated on the
//! runner when the action runs: the workflow's own expressions were
//! resolved when the job was queued, but an action is only read here.
//!
//! The runner depends on the contract and the client only (the house
//! rules), so this is a small subset of the language, not the domain's
//! evaluator: references (`inputs.<name>`, `steps.<id>.outputs.<name>`,
//! `steps.<id>.outcome|conclusion`, `env.<NAME>`, `github.action_path`,
//! `github.workspace`, `runner.os|arch|temp`; any other `github.*` or
//! `runner.*` reads as empty), string, number and boolean literals, `!`,
//! `==`, `!=`, `&&`, `||`, parentheses, and the status functions
//! `success()`, `failure()`, `always()`, `cancelled()`. Anything else is
//! an error that fails the step, naming it, rather than a guess.

use std::collections::BTreeMap;

/// What an action's expressions can read.
#[derive(Debug, Default, Clone)]
pub struct Context {
    pub inputs: BTreeMap<String, String>,
    /// Each step id's outputs, and its outcome (`success`, `failure`).
    pub steps: BTreeMap<String, StepState>,
    pub env: BTreeMap<String, String>,
    /// `github.*` values the runner knows (`action_path`, `workspace`).
    pub github: BTreeMap<String, String>,
    /// `runner.*` values (`os`, `arch`, `temp`).
    pub runner: BTreeMap<String, String>,
    /// Whether an earlier step of the action failed (for `success()`).
    pub failed: bool,
}

/// A step of a composite action, as later expressions see it.
#[derive(Debug, Default, Clone)]
pub struct StepState {
    pub outputs: BTreeMap<String, String>,
    pub outcome: String,
}

/// A value: expressions of this subset deal in text and booleans.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Text(String),
    Number(f64),
    Bool(bool),
    Null,
}

impl Value {
    fn truthy(&self) -> bool {
        match self {
            Value::Text(text) => !text.is_empty(),
            Value::Number(n) => *n != 0.0 && !n.is_nan(),
            Value::Bool(b) => *b,
            Value::Null => false,
        }
    }

    fn text(&self) -> String {
        match self {
            Value::Text(text) => text.clone(),
            Value::Number(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{}", *n as i64),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => String::new(),
        }
    }

    /// GitHub's loose equality: text ignoring case, else as numbers.
    fn equals(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Text(a), Value::Text(b)) => a.eq_ignore_ascii_case(b),
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Null, Value::Null) => true,
            (a, b) => {
                let (x, y) = (a.number(), b.number());
                !x.is_nan() && x == y
            }
        }
    }

    fn number(&self) -> f64 {
        match self {
            Value::Text(text) if text.trim().is_empty() => 0.0,
            Value::Text(text) => text.trim().parse().unwrap_or(f64::NAN),
            Value::Number(n) => *n,
            Value::Bool(b) => f64::from(u8::from(*b)),
            Value::Null => 0.0,
        }
    }
}

/// `text` with each `${{ … }}` replaced by its value as text.
pub fn interpolate(text: &str, context: &Context) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 3..];
        let Some(end) = closing(after) else { return Err(format!("`{text}`: a `${{{{` is never closed")) };
        out.push_str(&evaluate(&after[..end], context)?.text());
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether an `if:` holds: GitHub's rule, a condition without a status
/// function means `success() && (it)`. `${{ }}` around it is optional.
pub fn condition(text: &str, context: &Context) -> Result<bool, String> {
    let trimmed = text.trim();
    let inner = trimmed
        .strip_prefix("${{")
        .and_then(|t| t.strip_suffix("}}"))
        .filter(|t| !t.contains("${{"))
        .unwrap_or(trimmed);
    let tokens = tokenize(inner)?;
    let names_status = tokens.iter().any(|t| {
        matches!(t, Token::Ident(name) if ["success", "failure", "always", "cancelled"].contains(&name.to_ascii_lowercase().as_str()))
    });
    let value = evaluate(inner, context)?;
    Ok(if names_status { value.truthy() } else { !context.failed && value.truthy() })
}

/// Where the `}}` closing an expression is, quotes minded.
fn closing(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut quoted = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' => quoted = !quoted,
            b'}' if !quoted && bytes.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

fn evaluate(expression: &str, context: &Context) -> Result<Value, String> {
    let tokens = tokenize(expression)?;
    let mut parser = Parser { tokens: &tokens, at: 0, context, expression };
    let value = parser.or()?;
    if parser.at != tokens.len() {
        return Err(parser.unsupported());
    }
    Ok(value)
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Text(String),
    Number(f64),
    Dot,
    Open,
    Close,
    OpenIndex,
    CloseIndex,
    Not,
    Eq,
    Ne,
    And,
    Or,
    Comma,
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            c if c.is_whitespace() => i += 1,
            '\'' => {
                let mut value = String::new();
                i += 1;
                loop {
                    match (chars.get(i), chars.get(i + 1)) {
                        (Some('\''), Some('\'')) => {
                            value.push('\'');
                            i += 2;
                        }
                        (Some('\''), _) => {
                            i += 1;
                            break;
                        }
                        (Some(c), _) => {
                            value.push(*c);
                            i += 1;
                        }
                        (None, _) => return Err(format!("`{text}`: a string is never closed")),
                    }
                }
                tokens.push(Token::Text(value));
            }
            '.' => {
                tokens.push(Token::Dot);
                i += 1;
            }
            '(' => {
                tokens.push(Token::Open);
                i += 1;
            }
            ')' => {
                tokens.push(Token::Close);
                i += 1;
            }
            '[' => {
                tokens.push(Token::OpenIndex);
                i += 1;
            }
            ']' => {
                tokens.push(Token::CloseIndex);
                i += 1;
            }
            ',' => {
                tokens.push(Token::Comma);
                i += 1;
            }
            '!' if next == Some('=') => {
                tokens.push(Token::Ne);
                i += 2;
            }
            '!' => {
                tokens.push(Token::Not);
                i += 1;
            }
            '=' if next == Some('=') => {
                tokens.push(Token::Eq);
                i += 2;
            }
            '&' if next == Some('&') => {
                tokens.push(Token::And);
                i += 2;
            }
            '|' if next == Some('|') => {
                tokens.push(Token::Or);
                i += 2;
            }
            c if c.is_ascii_digit() || (c == '-' && next.is_some_and(|n| n.is_ascii_digit())) => {
                let start = i;
                i += 1;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
                let literal: String = chars[start..i].iter().collect();
                let number = literal.parse().map_err(|_| format!("`{text}`: `{literal}` is not a number"))?;
                tokens.push(Token::Number(number));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '-') {
                    i += 1;
                }
                tokens.push(Token::Ident(chars[start..i].iter().collect()));
            }
            other => return Err(format!("`{text}`: `{other}` is not supported in an action's expressions")),
        }
    }
    Ok(tokens)
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    context: &'a Context,
    expression: &'a str,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, token: &Token) -> bool {
        if self.peek() == Some(token) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn unsupported(&self) -> String {
        format!(
            "`{}`: not supported in an action's expressions on a Baton runner (references, literals, \
             !, ==, !=, &&, || and the status functions are)",
            self.expression.trim()
        )
    }

    fn or(&mut self) -> Result<Value, String> {
        let mut left = self.and()?;
        while self.eat(&Token::Or) {
            let right = self.and()?;
            if !left.truthy() {
                left = right;
            }
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Value, String> {
        let mut left = self.comparison()?;
        while self.eat(&Token::And) {
            let right = self.comparison()?;
            if left.truthy() {
                left = right;
            }
        }
        Ok(left)
    }

    fn comparison(&mut self) -> Result<Value, String> {
        let left = self.unary()?;
        if self.eat(&Token::Eq) {
            let right = self.unary()?;
            return Ok(Value::Bool(left.equals(&right)));
        }
        if self.eat(&Token::Ne) {
            let right = self.unary()?;
            return Ok(Value::Bool(!left.equals(&right)));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Value, String> {
        if self.eat(&Token::Not) {
            return Ok(Value::Bool(!self.unary()?.truthy()));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Value, String> {
        let Some(token) = self.peek().cloned() else { return Err(self.unsupported()) };
        self.at += 1;
        match token {
            Token::Text(text) => Ok(Value::Text(text)),
            Token::Number(n) => Ok(Value::Number(n)),
            Token::Open => {
                let value = self.or()?;
                if !self.eat(&Token::Close) {
                    return Err(self.unsupported());
                }
                Ok(value)
            }
            Token::Ident(name) => {
                let lower = name.to_ascii_lowercase();
                match lower.as_str() {
                    "true" => return Ok(Value::Bool(true)),
                    "false" => return Ok(Value::Bool(false)),
                    "null" => return Ok(Value::Null),
                    _ => {}
                }
                if self.eat(&Token::Open) {
                    if !self.eat(&Token::Close) {
                        return Err(self.unsupported());
                    }
                    // Cancelling a job stops its steps: a step that runs is
                    // never in a cancelled job.
                    return match lower.as_str() {
                        "success" => Ok(Value::Bool(!self.context.failed)),
                        "failure" => Ok(Value::Bool(self.context.failed)),
                        "always" => Ok(Value::Bool(true)),
                        "cancelled" => Ok(Value::Bool(false)),
                        _ => Err(format!("`{}`: {name}() is not supported on a Baton runner", self.expression.trim())),
                    };
                }
                let mut path = vec![lower];
                loop {
                    if self.eat(&Token::Dot) {
                        match self.peek().cloned() {
                            Some(Token::Ident(part)) => {
                                self.at += 1;
                                path.push(part);
                            }
                            _ => return Err(self.unsupported()),
                        }
                    } else if self.eat(&Token::OpenIndex) {
                        match (self.peek().cloned(), self.tokens.get(self.at + 1)) {
                            (Some(Token::Text(part)), Some(Token::CloseIndex)) => {
                                self.at += 2;
                                path.push(part);
                            }
                            _ => return Err(self.unsupported()),
                        }
                    } else {
                        break;
                    }
                }
                self.reference(&path)
            }
            _ => Err(self.unsupported()),
        }
    }

    /// The value of a reference; what the runner does not know reads as
    /// empty (as GitHub's own missing values do), what cannot be one is an
    /// error.
    fn reference(&self, path: &[String]) -> Result<Value, String> {
        let context = self.context;
        let text = |value: Option<&String>| Ok(Value::Text(value.cloned().unwrap_or_default()));
        match path {
            [context_name, name] if context_name == "inputs" => {
                text(context.inputs.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
            }
            [context_name, name] if context_name == "env" => text(context.env.get(name)),
            [context_name, id, field, name] if context_name == "steps" && field == "outputs" => {
                text(context.steps.get(id).and_then(|s| s.outputs.get(name)))
            }
            [context_name, id, field] if context_name == "steps" && (field == "outcome" || field == "conclusion") => {
                text(context.steps.get(id).map(|s| &s.outcome))
            }
            [context_name, name] if context_name == "github" => text(context.github.get(name)),
            [context_name, ..] if context_name == "github" => Ok(Value::Text(String::new())),
            [context_name, name] if context_name == "runner" => text(context.runner.get(name)),
            _ => Err(format!(
                "`{}`: {} is not available to an action on a Baton runner",
                self.expression.trim(),
                path.join(".")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> Context {
        let mut context = Context::default();
        context.inputs.insert("Who".into(), "world".into());
        context.inputs.insert("empty".into(), String::new());
        context.steps.insert(
            "greet".into(),
            StepState { outputs: BTreeMap::from([("said".into(), "hello".into())]), outcome: "success".into() },
        );
        context.github.insert("action_path".into(), "/actions/x".into());
        context
    }

    #[test]
    fn references_literals_and_defaults_interpolate() {
        let c = context();
        assert_eq!(interpolate("hi ${{ inputs.who }}!", &c).unwrap(), "hi world!");
        assert_eq!(
            interpolate("${{ steps.greet.outputs.said }} ${{ github.action_path }}", &c).unwrap(),
            "hello /actions/x"
        );
        assert_eq!(interpolate("${{ inputs.empty || 'fallback' }}", &c).unwrap(), "fallback");
        assert_eq!(interpolate("${{ github.token }}|${{ steps.none.outputs.x }}", &c).unwrap(), "|");
        assert_eq!(interpolate("${{ inputs['who'] == 'WORLD' }} ${{ 3 }}", &c).unwrap(), "true 3");
        assert!(interpolate("${{ hashFiles('x') }}", &c).unwrap_err().contains("hashFiles"));
        assert!(interpolate("${{ matrix.os }}", &c).unwrap_err().contains("matrix.os"));
        assert!(interpolate("${{ inputs.who", &c).is_err());
    }

    #[test]
    fn conditions_mean_success_and_unless_they_name_a_status() {
        let mut c = context();
        assert!(condition("inputs.who == 'world'", &c).unwrap());
        assert!(condition("${{ inputs.who != 'x' && !cancelled() }}", &c).unwrap());
        c.failed = true;
        assert!(!condition("inputs.who == 'world'", &c).unwrap());
        assert!(condition("failure()", &c).unwrap());
        assert!(condition("always()", &c).unwrap());
        assert!(!condition("success()", &c).unwrap());
    }
}
