//! `${{ … }}` expressions (behaviour.md §8): what a definition may refer to
//! in `env`, `run`, job `outputs` and `if:`, checked when the run is
//! created and resolved when a job is queued.
//!
//! The language is GitHub Actions' (its documented expressions, its
//! runner's behaviour the reference): literals (`null`, `true`, `false`,
//! numbers as `711`, `-9.2`, `0xff`, `-2.99e-2`, strings in single quotes),
//! references (`needs.<job>.outputs.<name>`, `needs.<job>.result|outcome`,
//! `matrix.<name>`, `secrets.<NAME>`, `inputs.<name>`, `env.<name>`,
//! `baton.run_id|attempt|workspace_id|job|trigger`, `steps.<id>.outputs.<name>` in
//! job `outputs`, `event.name|ref|payload.<path>` in listening jobs),
//! `( )`, `[ ]`, `.`, `!`, `< <= > >= == !=`, `&&` and `||` (which give one
//! of their operands), and the functions `contains`, `startsWith`,
//! `endsWith`, `format`, `join`, `toJSON`, `fromJSON` and the status
//! functions. Values are null, booleans, numbers, strings, arrays and
//! objects (`value.rs`); a reference's value is a string. Anything else is
//! refused at create time, naming the job and the field, instead of
//! resolving to nothing when the job runs.
//!
//! The files: `lex` (text to tokens), `parse` (tokens to [`Expr`], the
//! references checked), `value` (values, coercion, truthiness, rendering),
//! `functions`, `eval` (an [`Expr`]'s value in a [`Scope`]).

mod eval;
mod functions;
mod lex;
mod parse;
mod rewrite;
mod value;

use std::collections::BTreeMap;
use std::fmt;

pub use functions::Function;
pub use rewrite::{as_expression, replace_in_condition, replace_in_expression, replace_in_text, Replace};
pub use value::{quote, Value};

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
    /// `needs` itself, an object of each need's `result` and `outputs`
    /// (`needs.*.result`, `toJSON(needs)`).
    Needs,
    /// `matrix.<name>`: a matrix leg's value.
    Matrix(String),
    /// `strategy.fail-fast|job-index|job-total|max-parallel` (lower-cased).
    Strategy(String),
    /// `secrets.<NAME>`: a workspace secret, put in when the job is claimed.
    Secret(String),
    Input(String),
    /// `vars.<NAME>`: a workspace variable (`variables`), as the run was
    /// created with it; an unset one is empty, as on GitHub.
    Var(String),
    Env(String),
    Baton(BatonField),
    StepOutput {
        step: String,
        name: String,
    },
    /// `event.name`, `event.ref`, `event.payload.<path>`: the event a
    /// listening job's execution handles (behaviour.md §16).
    Event(Vec<String>),
    /// `github.<field>` (and a path into `github.event`) that the server
    /// resolves from what started the run (`workflows::github`); the
    /// field's name lower-cased, the path into the event as written.
    Github(Vec<String>),
    /// `github.<name>`, `runner.<name>`, `steps.<id>.outcome|conclusion`:
    /// what only the runner knows, read by an action's own `action.yml`
    /// ([`Dialect::Action`]) and a step's `if:` ([`Dialect::Step`]); a
    /// workflow's other expressions cannot name them.
    /// The context's words are lower-cased (GitHub reads them so).
    Runner(Vec<String>),
}

/// Which contexts an expression may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// A workflow's: checked when the run is created, resolved when a job
    /// is queued.
    Workflow,
    /// An action's own `action.yml` (its input defaults, a composite
    /// action's steps and outputs), read by the runner only when the action
    /// runs: the workflow's references and [`Reference::Runner`]'s.
    Action,
    /// A step's `if:`: the workflow's references, resolved when the job is
    /// queued, and what only the runner knows when the step is about to
    /// run ([`Reference::Runner`]'s, `steps.<id>.outputs.<name>`), with the
    /// status functions anywhere (the runner knows every status).
    Step,
}

/// The `baton` context: what a job knows of where it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BatonField {
    RunId,
    Attempt,
    WorkspaceId,
    Job,
    /// What started the run: `push`, `pull_request`, `schedule`,
    /// `dispatch` or `api`.
    Trigger,
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reference::NeedsOutput { job, name } => write!(f, "needs.{job}.outputs.{name}"),
            Reference::NeedsResult { job } => write!(f, "needs.{job}.result"),
            Reference::NeedsOutcome { job } => write!(f, "needs.{job}.outcome"),
            Reference::Needs => write!(f, "needs"),
            Reference::Matrix(name) => write!(f, "matrix.{name}"),
            Reference::Strategy(field) => write!(f, "strategy.{field}"),
            Reference::Secret(name) => write!(f, "secrets.{name}"),
            Reference::Input(name) => write!(f, "inputs.{name}"),
            Reference::Var(name) => write!(f, "vars.{name}"),
            Reference::Env(name) => write!(f, "env.{name}"),
            Reference::Baton(field) => write!(f, "baton.{}", field.name()),
            Reference::StepOutput { step, name } => write!(f, "steps.{step}.outputs.{name}"),
            Reference::Event(path) => write!(f, "event.{}", path.join(".")),
            Reference::Github(path) => write!(f, "github.{}", path.join(".")),
            Reference::Runner(path) => write!(f, "{}", path.join(".")),
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
            "trigger" => BatonField::Trigger,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            BatonField::RunId => "run_id",
            BatonField::Attempt => "attempt",
            BatonField::WorkspaceId => "workspace_id",
            BatonField::Job => "job",
            BatonField::Trigger => "trigger",
        }
    }
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `null`, a boolean, a number or a string.
    Literal(Value),
    Ref(Reference),
    /// `success()`, `failure()`, `always()`, `cancelled()`: only as the
    /// first term of a job's `if:` (see [`split_condition`]); anywhere in
    /// a step's ([`Dialect::Step`]) or an action's.
    Status(String),
    Not(Box<Expr>),
    /// Its left operand when that is falsy, else its right one.
    And(Box<Expr>, Box<Expr>),
    /// Its left operand when that is truthy, else its right one.
    Or(Box<Expr>, Box<Expr>),
    Compare(Comparison, Box<Expr>, Box<Expr>),
    Call(Function, Vec<Expr>),
    /// `value.name`, `value['name']`, `value[0]`, `value.*`: reading into
    /// a value (a reference reads its own path, see [`Reference`]).
    Index(Box<Expr>, Box<Index>),
}

/// A comparison operator: the expression language's, and the local
/// stack's reading of DynamoDB's condition expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Comparison {
    /// The operator as the language writes it.
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::Eq => "==",
            Comparison::Ne => "!=",
            Comparison::Lt => "<",
            Comparison::Le => "<=",
            Comparison::Gt => ">",
            Comparison::Ge => ">=",
        }
    }

    /// Whether it holds between two values, given how they compare: equal,
    /// the first less, the first greater (none of the three for values that
    /// do not compare, where only `!=` holds).
    pub fn holds(self, equal: bool, less: bool, greater: bool) -> bool {
        match self {
            Comparison::Eq => equal,
            Comparison::Ne => !equal,
            Comparison::Lt => less,
            Comparison::Le => equal || less,
            Comparison::Gt => greater,
            Comparison::Ge => equal || greater,
        }
    }
}

/// What `[ ]` or `.` reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Index {
    /// `.*` or `[*]`: an object filter, every element or property value.
    Star,
    /// A property name (`.name` is `['name']`) or an array position.
    Key(Expr),
}

/// A piece of a string with expressions in it.
#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    Text(String),
    Expr(Expr),
}

/// What references resolve to when a job is queued.
pub trait Scope {
    /// `None`: nothing by that name (resolves to null, rendered empty).
    fn resolve(&self, reference: &Reference) -> Option<String>;

    /// The value of `reference` with its type, where the scope keeps one
    /// (the `github` context's booleans and numbers compare as such:
    /// `github.event.pull_request.draft == false`); text otherwise.
    fn resolve_value(&self, reference: &Reference) -> Option<Value> {
        let text = self.resolve(reference)?;
        // `needs` is an object, carried as JSON text where values are text
        // (the queue's values for a step's `if:` on the runner).
        // A matrix's mapping or list value travels the same way; read back
        // as one only if it is one (other matrix values are text).
        let structured = match reference {
            Reference::Needs => true,
            Reference::Matrix(_) => text.starts_with('{') || text.starts_with('['),
            _ => false,
        };
        if structured {
            if let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) {
                if json.is_object() || json.is_array() {
                    return Some(Value::from_serde(&json));
                }
            }
        }
        Some(Value::String(text))
    }

    /// A status function's value (`success`, `failure`, `always`,
    /// `cancelled`) where the scope knows it (a runner running an action's
    /// steps); `None`: decided apart, from the needs' statuses
    /// (`split_condition`), and true here.
    fn status(&self, _function: &str) -> Option<bool> {
        None
    }

    /// `hashFiles(patterns…)` where the scope has the job's files (a step
    /// on the runner): the hex SHA-256 of the matched files, empty when
    /// none matches. `None`: the files are not here.
    fn hash_files(&self, _patterns: &[String]) -> Option<Result<String, String>> {
        None
    }
}

/// Parses one expression (the text between `${{` and `}}`) of a workflow.
pub fn parse(text: &str) -> Result<Expr, String> {
    parse_in(text, Dialect::Workflow)
}

/// Parses one expression of `dialect`.
pub fn parse_in(text: &str, dialect: Dialect) -> Result<Expr, String> {
    parse::parse_expression(text, dialect)
}

/// Splits a string of a workflow into text and `${{ … }}` expressions.
pub fn segments(text: &str) -> Result<Vec<Segment>, String> {
    segments_in(text, Dialect::Workflow)
}

/// Splits a string of `dialect` into text and `${{ … }}` expressions.
pub fn segments_in(text: &str, dialect: Dialect) -> Result<Vec<Segment>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        if start > 0 {
            out.push(Segment::Text(rest[..start].to_string()));
        }
        let after = &rest[start + 3..];
        let end = expression_end(after).ok_or("a '${{' is not closed by '}}'")?;
        let expr = parse_in(&after[..end], dialect)?;
        if contains_status(&expr) {
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

/// Where the `}}` closing an expression starts: the first outside a
/// string literal (`format('{{0}}', x)` holds braces of its own).
fn expression_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut quoted = false;
    for (i, byte) in bytes.iter().enumerate() {
        match byte {
            // `''` inside a literal closes and reopens it: the same.
            b'\'' => quoted = !quoted,
            b'}' if !quoted && bytes.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
    }
    None
}

/// Every sub-expression of `expr`, `expr` first.
fn walk<'a>(expr: &'a Expr, visit: &mut impl FnMut(&'a Expr)) {
    visit(expr);
    match expr {
        Expr::Not(inner) => walk(inner, visit),
        Expr::And(a, b) | Expr::Or(a, b) | Expr::Compare(_, a, b) => {
            walk(a, visit);
            walk(b, visit);
        }
        Expr::Call(_, args) => args.iter().for_each(|arg| walk(arg, visit)),
        Expr::Index(base, index) => {
            walk(base, visit);
            if let Index::Key(key) = index.as_ref() {
                walk(key, visit);
            }
        }
        Expr::Literal(_) | Expr::Ref(_) | Expr::Status(_) => {}
    }
}

/// Every reference in `expr`.
pub fn references(expr: &Expr, into: &mut Vec<Reference>) {
    walk(expr, &mut |e| {
        if let Expr::Ref(reference) = e {
            into.push(reference.clone());
        }
    });
}

/// Every reference in a string with expressions.
pub fn text_references(text: &str) -> Result<Vec<Reference>, String> {
    text_references_in(text, Dialect::Workflow)
}

/// Every reference in a string with expressions of `dialect`.
pub fn text_references_in(text: &str, dialect: Dialect) -> Result<Vec<Reference>, String> {
    let mut found = Vec::new();
    for segment in segments_in(text, dialect)? {
        if let Segment::Expr(expr) = segment {
            references(&expr, &mut found);
        }
    }
    Ok(found)
}

impl Reference {
    /// What only the runner knows when a step is about to run: an earlier
    /// step's outputs and outcome, `runner.*`, the machine's `github.*`.
    pub fn is_runner_side(&self) -> bool {
        matches!(self, Reference::Runner(_) | Reference::StepOutput { .. })
    }
}

/// Whether a step's field (its `run`, an `env` or `with` value, its
/// `working-directory`) reads something only the runner knows (a
/// reference, the files `hashFiles()` hashes, or what the caller says is
/// the runner's: `also`), so the runner resolves it (`StepSpec::deferred`).
/// The text is parsed once for all of them: this runs for every step field
/// of every job queued.
pub fn reads_runner_side(text: &str, also: impl Fn(&Reference) -> bool) -> bool {
    if !text.contains("${{") {
        return false;
    }
    let Ok(segments) = segments_in(text, Dialect::Step) else { return false };
    segments.iter().any(|segment| match segment {
        Segment::Expr(expr) => {
            let mut runner_side = false;
            walk(expr, &mut |e| match e {
                Expr::Ref(reference) => runner_side |= reference.is_runner_side() || also(reference),
                Expr::Call(Function::HashFiles, _) => runner_side = true,
                _ => {}
            });
            runner_side
        }
        Segment::Text(_) => false,
    })
}

/// A condition's text without the `${{ }}` around it, which is optional
/// in an `if:`.
fn condition_text(text: &str) -> &str {
    let text = text.trim();
    text.strip_prefix("${{").and_then(|rest| rest.strip_suffix("}}")).map_or(text, str::trim)
}

/// Every reference a condition (an `if:`, `${{ }}` optional) of `dialect`
/// reads.
pub fn condition_references(text: &str, dialect: Dialect) -> Result<Vec<Reference>, String> {
    let mut found = Vec::new();
    references(&parse_in(condition_text(text), dialect)?, &mut found);
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
    let (status, rest) = leading_status(parse(text)?);
    if let Some(rest) = &rest {
        // A negated status other than a leading `!cancelled()` has no
        // status of Baton's: said as such, not as a misplaced call.
        let mut negated = None;
        walk(rest, &mut |e| {
            if let Expr::Not(inner) = e {
                if let Expr::Status(status) = inner.as_ref() {
                    negated.get_or_insert_with(|| status.clone());
                }
            }
        });
        if let Some(status) = negated {
            return Err(format!(
                "!{status}() is not supported: an if: starts with one of success(), failure(), always(), \
                 cancelled() or !cancelled(), and only !cancelled() is negated (always() runs whatever happened)"
            ));
        }
        if contains_status(rest) {
            return Err("a status function (success(), failure(), always(), cancelled(), !cancelled()) may only \
                        come first, joined to the rest by &&"
                .into());
        }
    }
    Ok((status, rest))
}

/// The status function that is `expr` or the first term of its `&&`
/// chain (`always() && a && b` reads as `(always() && a) && b`), and the
/// rest. Taking it out keeps the rest's value: the status evaluates as
/// true, and `true && x` is `x`.
fn leading_status(expr: Expr) -> (Option<String>, Option<Expr>) {
    match expr {
        Expr::Status(status) => (Some(status), None),
        // GitHub's "unless cancelled": the one negated status with a
        // meaning of its own (`JobCondition::NotCancelled`).
        Expr::Not(inner) if matches!(inner.as_ref(), Expr::Status(s) if s == "cancelled") => {
            (Some("!cancelled".to_string()), None)
        }
        // `!cancelled() && failure()` is `failure()` (which never runs
        // after a cancel); `!cancelled() && !failure()` is GitHub's "every
        // need passed or was skipped, and no cancel"
        // (`JobCondition::NoFailure`).
        Expr::And(left, right)
            if is_not_cancelled(&left) && matches!(right.as_ref(), Expr::Status(s) if s == "failure") =>
        {
            (Some("failure".to_string()), None)
        }
        Expr::And(left, right)
            if is_not_cancelled(&left)
                && matches!(right.as_ref(), Expr::Not(inner) if matches!(inner.as_ref(), Expr::Status(s) if s == "failure")) =>
        {
            (Some("!cancelled && !failure".to_string()), None)
        }
        Expr::And(left, right) => match leading_status(*left) {
            (Some(status), None) => (Some(status), Some(*right)),
            (Some(status), Some(left)) => (Some(status), Some(Expr::And(Box::new(left), right))),
            (None, left) => (None, left.map(|left| Expr::And(Box::new(left), right))),
        },
        other => (None, Some(other)),
    }
}

fn is_not_cancelled(expr: &Expr) -> bool {
    matches!(expr, Expr::Not(inner) if matches!(inner.as_ref(), Expr::Status(s) if s == "cancelled"))
}

/// Whether an `if:` of `dialect` holds where `scope` knows the status
/// functions' values (a runner running an action's steps): GitHub's rule,
/// an `if:` naming no status function means `success() && (it)`. The
/// `${{ }}` around it is optional.
pub fn condition_holds(text: &str, dialect: Dialect, scope: &dyn Scope) -> Result<bool, String> {
    let expr = parse_in(condition_text(text), dialect)?;
    let holds = evaluate(&expr, scope)?.truthy();
    Ok(if contains_status(&expr) { holds } else { scope.status("success").unwrap_or(true) && holds })
}

fn contains_status(expr: &Expr) -> bool {
    let mut found = false;
    walk(expr, &mut |e| found |= matches!(e, Expr::Status(_)));
    found
}

/// `expr`'s value in `scope`, or why it has none (a function failed, as
/// `fromJSON` of text that is not JSON).
pub fn evaluate(expr: &Expr, scope: &dyn Scope) -> Result<Value, String> {
    eval::evaluate(expr, scope)
}

/// Whether `expr` holds in `scope`: its value is truthy. An expression that
/// fails to evaluate does not hold (the job is skipped rather than run on a
/// value that is not there).
pub fn holds(expr: &Expr, scope: &dyn Scope) -> bool {
    evaluate(expr, scope).is_ok_and(|value| value.truthy())
}

/// `text` with each `${{ … }}` replaced by its value; see
/// [`Value::render`].
pub fn try_interpolate(text: &str, scope: &dyn Scope) -> Result<String, String> {
    try_interpolate_in(text, Dialect::Workflow, scope)
}

/// [`try_interpolate`] for text of `dialect`.
pub fn try_interpolate_in(text: &str, dialect: Dialect, scope: &dyn Scope) -> Result<String, String> {
    if !text.contains("${{") {
        return Ok(text.to_string());
    }
    let mut out = String::new();
    for part in segments_in(text, dialect)? {
        match part {
            Segment::Text(text) => out.push_str(&text),
            Segment::Expr(expr) => out.push_str(&evaluate(&expr, scope)?.render()),
        }
    }
    Ok(out)
}

/// `text` with each `${{ … }}` replaced by its value. Text that does not
/// parse (it was checked at create time) or has an expression that fails
/// to evaluate is left as it is, whole: the job sees the expression it
/// could not have, rather than a value silently empty.
pub fn interpolate(text: &str, scope: &dyn Scope) -> String {
    try_interpolate(text, scope).unwrap_or_else(|_| text.to_string())
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
mod tests;
