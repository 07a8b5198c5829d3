//! `${{ … }}` expressions (behaviour.md §8): what a definition may refer to
//! in `env`, `run`, job `outputs` and `if:`, checked when the run is
//! created and resolved when a job is queued.
//!
//! A small language, the part of GitHub Actions' that CI files use:
//! references (`needs.<job>.outputs.<name>`, `needs.<job>.result|outcome`,
//! `inputs.<name>`, `env.<name>`, `baton.run_id|attempt|workspace_id|job`,
//! and `steps.<id>.outputs.<name>` in job `outputs`), string literals in
//! single quotes, numbers, `true`/`false`/`null`, `==`, `!=`, `!`, `&&`,
//! `||` and parentheses. Values are strings when compared (`true` is
//! `'true'`), and a string is true when it is not empty, as in GitHub
//! Actions. Anything else is refused at create time, naming the job and the
//! field, instead of resolving to nothing when the job runs.

use std::collections::BTreeMap;
use std::fmt;

/// Something an expression refers to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reference {
    NeedsOutput {
        job: String,
        name: String,
    },
    NeedsResult {
        job: String,
    },
    /// `failure` for a need that failed under `continue-on-error` (its
    /// result is `success`); otherwise its result.
    NeedsOutcome {
        job: String,
    },
    /// `matrix.<name>`: a matrix leg's value.
    Matrix(String),
    /// `secrets.<NAME>`: a workspace secret, put in when the job is claimed.
    Secret(String),
    Input(String),
    Env(String),
    Baton(BatonField),
    StepOutput {
        step: String,
        name: String,
    },
    /// `event.name`, `event.ref`, `event.payload.<path>`: the event a
    /// listening job's execution handles (behaviour.md §16).
    Event(Vec<String>),
}

/// The `baton` context: what a job knows of where it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BatonField {
    RunId,
    Attempt,
    WorkspaceId,
    Job,
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reference::NeedsOutput { job, name } => write!(f, "needs.{job}.outputs.{name}"),
            Reference::NeedsResult { job } => write!(f, "needs.{job}.result"),
            Reference::NeedsOutcome { job } => write!(f, "needs.{job}.outcome"),
            Reference::Matrix(name) => write!(f, "matrix.{name}"),
            Reference::Secret(name) => write!(f, "secrets.{name}"),
            Reference::Input(name) => write!(f, "inputs.{name}"),
            Reference::Env(name) => write!(f, "env.{name}"),
            Reference::Baton(field) => write!(f, "baton.{}", field.name()),
            Reference::StepOutput { step, name } => write!(f, "steps.{step}.outputs.{name}"),
            Reference::Event(path) => write!(f, "event.{}", path.join(".")),
        }
    }
}

impl BatonField {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "run_id" => BatonField::RunId,
            "attempt" => BatonField::Attempt,
            "workspace_id" => BatonField::WorkspaceId,
            "job" => BatonField::Job,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            BatonField::RunId => "run_id",
            BatonField::Attempt => "attempt",
            BatonField::WorkspaceId => "workspace_id",
            BatonField::Job => "job",
        }
    }
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Literal(String),
    Null,
    Ref(Reference),
    /// `success()`, `failure()`, `always()`, `cancelled()`: only as the
    /// first term of an `if:` (see [`split_condition`]).
    Status(String),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Eq(Box<Expr>, Box<Expr>),
    Ne(Box<Expr>, Box<Expr>),
}

/// A piece of a string with expressions in it.
#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    Text(String),
    Expr(Expr),
}

/// What references resolve to when a job is queued.
pub trait Scope {
    /// `None`: nothing by that name (resolves to the empty string).
    fn resolve(&self, reference: &Reference) -> Option<String>;
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Number(String),
    Dot,
    LParen,
    RParen,
    Not,
    And,
    Or,
    Eq,
    Ne,
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
            '.' => {
                tokens.push(Token::Dot);
                i += 1
            }
            '(' => {
                tokens.push(Token::LParen);
                i += 1
            }
            ')' => {
                tokens.push(Token::RParen);
                i += 1
            }
            '!' if next == Some('=') => {
                tokens.push(Token::Ne);
                i += 2
            }
            '!' => {
                tokens.push(Token::Not);
                i += 1
            }
            '=' if next == Some('=') => {
                tokens.push(Token::Eq);
                i += 2
            }
            '&' if next == Some('&') => {
                tokens.push(Token::And);
                i += 2
            }
            '|' if next == Some('|') => {
                tokens.push(Token::Or);
                i += 2
            }
            '\'' => {
                // '' inside a literal is a quote, as in GitHub Actions.
                let mut value = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err("a string literal is not closed".into()),
                        Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                            value.push('\'');
                            i += 2
                        }
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(c) => {
                            value.push(*c);
                            i += 1
                        }
                    }
                }
                tokens.push(Token::Str(value));
            }
            c if c.is_ascii_digit() || (c == '-' && next.is_some_and(|n| n.is_ascii_digit())) => {
                let start = i;
                i += 1;
                while chars.get(i).is_some_and(|c| c.is_ascii_digit() || *c == '.') {
                    i += 1;
                }
                tokens.push(Token::Number(chars[start..i].iter().collect()));
            }
            c if c.is_alphanumeric() || c == '_' => {
                let start = i;
                while chars.get(i).is_some_and(|c| c.is_alphanumeric() || *c == '_' || *c == '-') {
                    i += 1;
                }
                tokens.push(Token::Ident(chars[start..i].iter().collect()));
            }
            other => return Err(format!("unexpected '{other}'")),
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut left = self.and()?;
        while self.peek() == Some(&Token::Or) {
            self.at += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.equality()?;
        while self.peek() == Some(&Token::And) {
            self.at += 1;
            left = Expr::And(Box::new(left), Box::new(self.equality()?));
        }
        Ok(left)
    }

    fn equality(&mut self) -> Result<Expr, String> {
        let left = self.unary()?;
        match self.peek() {
            Some(Token::Eq) => {
                self.at += 1;
                Ok(Expr::Eq(Box::new(left), Box::new(self.unary()?)))
            }
            Some(Token::Ne) => {
                self.at += 1;
                Ok(Expr::Ne(Box::new(left), Box::new(self.unary()?)))
            }
            _ => Ok(left),
        }
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.peek() == Some(&Token::Not) {
            self.at += 1;
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Token::Str(value)) => Ok(Expr::Literal(value)),
            Some(Token::Number(value)) => Ok(Expr::Literal(value)),
            Some(Token::LParen) => {
                let inner = self.or()?;
                match self.next() {
                    Some(Token::RParen) => Ok(inner),
                    _ => Err("a '(' is not closed".into()),
                }
            }
            Some(Token::Ident(name)) => match name.as_str() {
                "true" | "false" => Ok(Expr::Literal(name)),
                "null" => Ok(Expr::Null),
                _ if self.peek() == Some(&Token::LParen) => {
                    self.at += 1;
                    if self.next() != Some(Token::RParen) {
                        return Err(format!("{name}() takes no arguments"));
                    }
                    match name.to_ascii_lowercase().as_str() {
                        status @ ("success" | "failure" | "always" | "cancelled") => Ok(Expr::Status(status.into())),
                        _ => Err(format!(
                            "unknown function {name}(); only success(), failure(), always() and cancelled()"
                        )),
                    }
                }
                _ => self.reference(name).map(Expr::Ref),
            },
            Some(other) => Err(format!("unexpected {other:?}")),
            None => Err("the expression ends too early".into()),
        }
    }

    fn reference(&mut self, context: String) -> Result<Reference, String> {
        let mut path = vec![context];
        while self.peek() == Some(&Token::Dot) {
            self.at += 1;
            match self.next() {
                Some(Token::Ident(part)) => path.push(part),
                _ => return Err(format!("'{}.' is followed by no name", path.join("."))),
            }
        }
        let parts: Vec<&str> = path.iter().map(String::as_str).collect();
        let unknown = || {
            format!(
                "unknown reference {}: use needs.<job>.outputs.<name>, needs.<job>.result|outcome, matrix.<name>, secrets.<NAME>, inputs.<name>, \
                 env.<name>, baton.run_id|attempt|workspace_id|job, steps.<id>.outputs.<name> or (listening jobs) \
                 event.name|ref|payload.<path>",
                parts.join(".")
            )
        };
        Ok(match parts.as_slice() {
            ["needs", job, "outputs", name] => Reference::NeedsOutput { job: job.to_string(), name: name.to_string() },
            ["needs", job, "result"] => Reference::NeedsResult { job: job.to_string() },
            ["needs", job, "outcome"] => Reference::NeedsOutcome { job: job.to_string() },
            ["matrix", name] => Reference::Matrix(name.to_string()),
            ["secrets", name] => Reference::Secret(name.to_string()),
            ["inputs", name] => Reference::Input(name.to_string()),
            ["env", name] => Reference::Env(name.to_string()),
            ["baton", field] => Reference::Baton(BatonField::parse(field).ok_or_else(unknown)?),
            ["steps", step, "outputs", name] => {
                Reference::StepOutput { step: step.to_string(), name: name.to_string() }
            }
            ["event", "name"] | ["event", "ref"] => Reference::Event(vec![parts[1].to_string()]),
            ["event", "payload", rest @ ..] => {
                Reference::Event(std::iter::once("payload").chain(rest.iter().copied()).map(str::to_string).collect())
            }
            _ => return Err(unknown()),
        })
    }
}

/// Parses one expression (the text between `${{` and `}}`).
pub fn parse(text: &str) -> Result<Expr, String> {
    let mut parser = Parser { tokens: tokenize(text)?, at: 0 };
    let expr = parser.or()?;
    match parser.peek() {
        None => Ok(expr),
        Some(token) => Err(format!("unexpected {token:?} after the expression")),
    }
}

/// Splits a string into text and `${{ … }}` expressions.
pub fn segments(text: &str) -> Result<Vec<Segment>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        if start > 0 {
            out.push(Segment::Text(rest[..start].to_string()));
        }
        let after = &rest[start + 3..];
        let end = after.find("}}").ok_or("a '${{' is not closed by '}}'")?;
        let expr = parse(&after[..end])?;
        if matches!(expr, Expr::Status(_)) {
            return Err("status functions belong in if:, not in text".into());
        }
        out.push(Segment::Expr(expr));
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
        out.push(Segment::Text(rest.to_string()));
    }
    Ok(out)
}

/// Every reference in `expr`.
pub fn references(expr: &Expr, into: &mut Vec<Reference>) {
    match expr {
        Expr::Ref(reference) => into.push(reference.clone()),
        Expr::Not(inner) => references(inner, into),
        Expr::And(a, b) | Expr::Or(a, b) | Expr::Eq(a, b) | Expr::Ne(a, b) => {
            references(a, into);
            references(b, into);
        }
        Expr::Literal(_) | Expr::Null | Expr::Status(_) => {}
    }
}

/// Every reference in a string with expressions.
pub fn text_references(text: &str) -> Result<Vec<Reference>, String> {
    let mut found = Vec::new();
    for segment in segments(text)? {
        if let Segment::Expr(expr) = segment {
            references(&expr, &mut found);
        }
    }
    Ok(found)
}

/// An `if:` split into its status function (`success()` when it names
/// none, as in GitHub Actions) and the rest, which must hold as well. A
/// status function may only be the whole condition or its first `&&` term,
/// so the status part is decided from the needs' statuses alone.
pub fn split_condition(raw: &str) -> Result<(Option<String>, Option<Expr>), String> {
    let mut text = raw.trim();
    if let Some(inner) = text.strip_prefix("${{").and_then(|rest| rest.strip_suffix("}}")) {
        text = inner.trim();
    }
    let expr = parse(text)?;
    let (status, rest) = match expr {
        Expr::Status(status) => (Some(status), None),
        Expr::And(left, right) if matches!(*left, Expr::Status(_)) => match *left {
            Expr::Status(status) => (Some(status), Some(*right)),
            _ => unreachable!("matched above"),
        },
        other => (None, Some(other)),
    };
    if let Some(rest) = &rest {
        if contains_status(rest) {
            return Err("a status function (success(), failure(), always(), cancelled()) may only come first, \
                        joined to the rest by &&"
                .into());
        }
    }
    Ok((status, rest))
}

fn contains_status(expr: &Expr) -> bool {
    match expr {
        Expr::Status(_) => true,
        Expr::Not(inner) => contains_status(inner),
        Expr::And(a, b) | Expr::Or(a, b) | Expr::Eq(a, b) | Expr::Ne(a, b) => contains_status(a) || contains_status(b),
        Expr::Literal(_) | Expr::Null | Expr::Ref(_) => false,
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Str(String),
    Bool(bool),
    Null,
}

impl Value {
    fn truthy(&self) -> bool {
        match self {
            Value::Str(s) => !s.is_empty(),
            Value::Bool(b) => *b,
            Value::Null => false,
        }
    }

    fn text(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            Value::Null => String::new(),
        }
    }
}

fn evaluate(expr: &Expr, scope: &dyn Scope) -> Value {
    match expr {
        Expr::Literal(text) => Value::Str(text.clone()),
        Expr::Null => Value::Null,
        Expr::Ref(reference) => scope.resolve(reference).map_or(Value::Null, Value::Str),
        // Decided apart, from the needs' statuses (split_condition).
        Expr::Status(_) => Value::Bool(true),
        Expr::Not(inner) => Value::Bool(!evaluate(inner, scope).truthy()),
        Expr::And(a, b) => Value::Bool(evaluate(a, scope).truthy() && evaluate(b, scope).truthy()),
        Expr::Or(a, b) => Value::Bool(evaluate(a, scope).truthy() || evaluate(b, scope).truthy()),
        Expr::Eq(a, b) => Value::Bool(evaluate(a, scope).text() == evaluate(b, scope).text()),
        Expr::Ne(a, b) => Value::Bool(evaluate(a, scope).text() != evaluate(b, scope).text()),
    }
}

/// Whether `expr` holds in `scope`.
pub fn holds(expr: &Expr, scope: &dyn Scope) -> bool {
    evaluate(expr, scope).truthy()
}

/// `text` with each `${{ … }}` replaced by its value. Text that does not
/// parse is left as it is (it was checked at create time).
pub fn interpolate(text: &str, scope: &dyn Scope) -> String {
    if !text.contains("${{") {
        return text.to_string();
    }
    match segments(text) {
        Ok(parts) => parts
            .into_iter()
            .map(|part| match part {
                Segment::Text(text) => text,
                Segment::Expr(expr) => evaluate(&expr, scope).text(),
            })
            .collect(),
        Err(_) => text.to_string(),
    }
}

/// A scope of plain maps, for tests and simple callers.
#[derive(Debug, Clone, Default)]
pub struct MapScope(pub BTreeMap<String, String>);

impl Scope for MapScope {
    fn resolve(&self, reference: &Reference) -> Option<String> {
        self.0.get(&reference.to_string()).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(pairs: &[(&str, &str)]) -> MapScope {
        MapScope(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    #[test]
    fn references_in_text_are_replaced_and_missing_ones_are_empty() {
        let s = scope(&[("needs.build.outputs.version", "1.2.3"), ("baton.run_id", "r1")]);
        assert_eq!(
            interpolate("v=${{ needs.build.outputs.version }} run=${{baton.run_id}} x=${{ inputs.x }}.", &s),
            "v=1.2.3 run=r1 x=."
        );
        assert_eq!(interpolate("no expressions", &s), "no expressions");
    }

    #[test]
    fn conditions_compare_strings_and_combine() {
        let s = scope(&[("needs.build.outputs.deploy", "true"), ("inputs.env", "prod")]);
        let holds_text = |text: &str| holds(&parse(text).unwrap(), &s);
        assert!(holds_text("needs.build.outputs.deploy == 'true'"));
        assert!(holds_text("needs.build.outputs.deploy == true"));
        assert!(!holds_text("needs.build.outputs.deploy != 'true'"));
        assert!(holds_text("inputs.env == 'prod' && !(inputs.missing)"));
        assert!(holds_text("inputs.env == 'dev' || inputs.env == 'prod'"));
        assert!(!holds_text("inputs.missing"));
        assert!(holds_text("'it''s' == 'it''s'"));
    }

    #[test]
    fn a_status_function_comes_first_or_alone() {
        assert_eq!(split_condition("always()").unwrap(), (Some("always".into()), None));
        let (status, rest) = split_condition("${{ success() && needs.a.outputs.x == '1' }}").unwrap();
        assert_eq!(status.as_deref(), Some("success"));
        assert!(rest.is_some());
        let (status, rest) = split_condition("needs.a.outputs.x == '1'").unwrap();
        assert_eq!((status, rest.is_some()), (None, true));
        assert!(split_condition("needs.a.result == 'success' || failure()").is_err());
    }

    #[test]
    fn unknown_references_and_malformed_text_are_refused() {
        for bad in [
            "${{ github.sha }}",
            "${{ needs.a.outputs }}",
            "${{ baton.secret }}",
            "${{ inputs.x ",
            "${{ 'open }}",
            "${{ toJSON(inputs) }}",
            "${{ success() }}",
        ] {
            assert!(segments(bad).is_err(), "{bad}");
        }
        let refs = text_references("${{ needs.build.outputs.v }}-${{ env.A }}").unwrap();
        assert_eq!(
            refs,
            vec![Reference::NeedsOutput { job: "build".into(), name: "v".into() }, Reference::Env("A".into())]
        );
    }
}
