//! Tokens to an [`Expr`], with GitHub Actions' precedence (tightest
//! first): `.`/`[ ]`, `!`, `< <= > >=`, `== !=`, `&&`, `||`, each binary
//! operator from left to right. References are checked here, so a
//! definition naming something Baton does not know is refused when the run
//! is created.

use super::functions::{check_format, Function, KNOWN, RUNNER_ONLY};
use super::lex::{tokenize, Token};
use super::value::Value;
use super::{BatonField, Comparison, Dialect, Expr, Index, Reference};

/// How deep parentheses, function calls, indexes and `!` may nest (as
/// GitHub's limit): deeper text is refused rather than recursed into.
const MAX_DEPTH: usize = 50;

/// How many binary operators and indexes one expression may have: each
/// makes the tree one deeper (`a || b || c` is `(a || b) || c`), and
/// evaluating it recurses that deep.
const MAX_OPERATORS: usize = 500;

/// Parses one expression (the text between `${{` and `}}`).
pub fn parse_expression(text: &str, dialect: Dialect) -> Result<Expr, String> {
    let mut parser = Parser { tokens: tokenize(text)?, at: 0, depth: 0, operators: 0, dialect };
    if parser.tokens.is_empty() {
        return Err("the expression is empty".into());
    }
    let expr = parser.or()?;
    match parser.peek() {
        None => Ok(expr),
        Some(token) => Err(format!("unexpected {} after the expression", token.describe())),
    }
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    depth: usize,
    operators: usize,
    dialect: Dialect,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn peek_at(&self, ahead: usize) -> Option<&Token> {
        self.tokens.get(self.at + ahead)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn eat(&mut self, token: &Token) -> bool {
        let found = self.peek() == Some(token);
        if found {
            self.at += 1;
        }
        found
    }

    /// Runs `step` one level deeper.
    fn nested<T>(&mut self, step: impl FnOnce(&mut Self) -> Result<T, String>) -> Result<T, String> {
        if self.depth >= MAX_DEPTH {
            return Err(format!("the expression nests deeper than {MAX_DEPTH} levels"));
        }
        self.depth += 1;
        let out = step(self);
        self.depth -= 1;
        out
    }

    /// Counts one more binary operator or index.
    fn operator(&mut self) -> Result<(), String> {
        self.operators += 1;
        if self.operators > MAX_OPERATORS {
            return Err(format!("the expression has more than {MAX_OPERATORS} operators and indexes"));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.nested(|p| {
            let mut left = p.and()?;
            while p.eat(&Token::Or) {
                p.operator()?;
                left = Expr::Or(Box::new(left), Box::new(p.and()?));
            }
            Ok(left)
        })
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.equality()?;
        while self.eat(&Token::And) {
            self.operator()?;
            left = Expr::And(Box::new(left), Box::new(self.equality()?));
        }
        Ok(left)
    }

    fn equality(&mut self) -> Result<Expr, String> {
        let mut left = self.comparison()?;
        loop {
            let op = match self.peek() {
                Some(Token::Compare(op @ (Comparison::Eq | Comparison::Ne))) => *op,
                _ => return Ok(left),
            };
            self.at += 1;
            self.operator()?;
            left = Expr::Compare(op, Box::new(left), Box::new(self.comparison()?));
        }
    }

    fn comparison(&mut self) -> Result<Expr, String> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(Token::Compare(op @ (Comparison::Lt | Comparison::Le | Comparison::Gt | Comparison::Ge))) => *op,
                _ => return Ok(left),
            };
            self.at += 1;
            self.operator()?;
            left = Expr::Compare(op, Box::new(left), Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat(&Token::Not) {
            return self.nested(|p| Ok(Expr::Not(Box::new(p.unary()?))));
        }
        self.postfix()
    }

    /// A primary, then its `.name`, `.*`, `[index]` and `[*]`.
    fn postfix(&mut self) -> Result<Expr, String> {
        let mut expr = self.primary()?;
        loop {
            let index = match self.peek() {
                Some(Token::Dot) => match self.peek_at(1).cloned() {
                    Some(Token::Ident(name)) => {
                        self.at += 2;
                        Index::Key(Expr::Literal(Value::String(name)))
                    }
                    Some(Token::Star) => {
                        self.at += 2;
                        Index::Star
                    }
                    other => {
                        let found = other.map_or("nothing".into(), |t| t.describe());
                        return Err(format!("a '.' is followed by {found}, not a property name or '*'"));
                    }
                },
                Some(Token::LBracket) => {
                    self.at += 1;
                    let index = if self.peek() == Some(&Token::Star) && self.peek_at(1) == Some(&Token::RBracket) {
                        self.at += 1;
                        Index::Star
                    } else {
                        Index::Key(self.or()?)
                    };
                    if !self.eat(&Token::RBracket) {
                        return Err("a '[' is not closed by ']'".into());
                    }
                    index
                }
                _ => return Ok(expr),
            };
            match &expr {
                // `needs.*`, `github.event.labels.*.name`: values with a
                // structure, read into as values.
                Expr::Ref(Reference::Needs | Reference::Github(_) | Reference::Matrix(_)) => {}
                // `(needs.a.outputs.x).y`: a reference reads the whole path
                // it can, and its value is text.
                Expr::Ref(reference) => {
                    return Err(format!("{reference} is text: to read into it, use fromJSON({reference})"))
                }
                _ => {}
            }
            self.operator()?;
            expr = Expr::Index(Box::new(expr), Box::new(index));
        }
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Token::Str(value)) => Ok(Expr::Literal(Value::String(value))),
            Some(Token::Number(value)) => Ok(Expr::Literal(Value::Number(value))),
            Some(Token::True) => Ok(Expr::Literal(Value::Bool(true))),
            Some(Token::False) => Ok(Expr::Literal(Value::Bool(false))),
            Some(Token::Null) => Ok(Expr::Literal(Value::Null)),
            Some(Token::LParen) => {
                let inner = self.or()?;
                if !self.eat(&Token::RParen) {
                    return Err("a '(' is not closed by ')'".into());
                }
                Ok(inner)
            }
            Some(Token::Ident(name)) if self.peek() == Some(&Token::LParen) => self.call(name),
            Some(Token::Ident(name)) => self.reference(name).map(Expr::Ref),
            Some(other) => Err(format!("unexpected {}", other.describe())),
            None => Err("the expression ends too early".into()),
        }
    }

    /// `name(args…)`, its name checked before its arguments are read (a
    /// function Baton does not have is named as such, not as a stray ',').
    fn call(&mut self, name: String) -> Result<Expr, String> {
        let status = ["success", "failure", "always", "cancelled"].into_iter().find(|s| s.eq_ignore_ascii_case(&name));
        let function = Function::named(&name);
        // The job's files are the runner's: a step's fields and `if:` (the
        // step dialect) and an action's own expressions may hash them.
        if function == Some(Function::HashFiles) && self.dialect == Dialect::Workflow {
            return Err(RUNNER_ONLY.into());
        }
        if status.is_none() && function.is_none() {
            return Err(format!("unknown function {name}(); known: {KNOWN}"));
        }
        self.at += 1; // '('
        let mut args = Vec::new();
        if !self.eat(&Token::RParen) {
            loop {
                args.push(self.or()?);
                if self.eat(&Token::RParen) {
                    break;
                }
                if !self.eat(&Token::Comma) {
                    return Err(format!("{name}( is not closed by ')'"));
                }
            }
        }
        if let Some(status) = status {
            if !args.is_empty() {
                return Err(format!("{status}() takes no arguments"));
            }
            return Ok(Expr::Status(status.to_string()));
        }
        let Some(function) = function else { return Err(format!("unknown function {name}(); known: {KNOWN}")) };
        if let Some(error) = function.arity_error(args.len()) {
            return Err(error);
        }
        // Literal arguments are checked now, so their mistakes show when
        // the run is created rather than as a job quietly not running.
        match (function, args.first()) {
            (Function::Format, Some(Expr::Literal(Value::String(template)))) => check_format(template, args.len() - 1)?,
            (Function::FromJson, Some(Expr::Literal(Value::String(text)))) => {
                function.call(&[Value::String(text.clone())])?;
            }
            _ => {}
        }
        Ok(Expr::Call(function, args))
    }

    /// A context and the path into it (`needs.<job>.outputs.<name>`,
    /// `needs['my-job'].result`, `event.payload.items[0]`…), as one of the
    /// [`Reference`]s Baton resolves.
    fn reference(&mut self, context: String) -> Result<Reference, String> {
        let mut path = vec![context];
        loop {
            // `matrix.<name>` is the reference; what follows reads into its
            // value (a mapping or a list given in the matrix: `matrix.pair.otp`).
            if path.len() == 2 && path[0].eq_ignore_ascii_case("matrix") && self.dialect != Dialect::Action {
                break;
            }
            let shown = path.join(".");
            let part = match (self.peek(), self.peek_at(1), self.peek_at(2)) {
                (Some(Token::Dot), Some(Token::Ident(part)), _) => part.clone(),
                (Some(Token::Dot), Some(Token::Star), _) | (Some(Token::LBracket), Some(Token::Star), _) => {
                    // What has a structured value is filtered as a value
                    // (`needs.*.result`, `github.event.commits.*.id`);
                    // other contexts' values are text.
                    if path.len() == 1 && path[0].eq_ignore_ascii_case("needs") && self.dialect != Dialect::Action {
                        return Ok(Reference::Needs);
                    }
                    if path.len() > 1 && path[0].eq_ignore_ascii_case("github") {
                        break;
                    }
                    return Err(format!(
                        "{shown}.*: an object filter over this context is not supported: its values are text; \
                         filter needs.* or github.event"
                    ));
                }
                (Some(Token::Dot), other, _) => {
                    let found = other.map_or("nothing".into(), |t| t.describe());
                    return Err(format!("'{shown}.' is followed by {found}, not a name"));
                }
                (Some(Token::LBracket), Some(Token::Str(part)), Some(Token::RBracket)) => part.clone(),
                (Some(Token::LBracket), Some(Token::Number(n)), Some(Token::RBracket))
                    if n.fract() == 0.0 && *n >= 0.0 =>
                {
                    super::value::format_number(*n)
                }
                (Some(Token::LBracket), _, _) => {
                    return Err(format!("{shown}[…]: a context is indexed by a quoted name or a whole number"))
                }
                _ => break,
            };
            self.at += if self.peek() == Some(&Token::Dot) { 2 } else { 3 };
            path.push(part);
        }
        let parts: Vec<&str> = path.iter().map(String::as_str).collect();
        if parts.len() == 1 && parts[0].eq_ignore_ascii_case("needs") && self.dialect != Dialect::Action {
            return Ok(Reference::Needs);
        }
        // `github.token` is, as GitHub documents it, the `GITHUB_TOKEN`
        // secret: Baton mints no GitHub token, so it is the workspace's
        // secret of that name (a job whose workspace has none fails at its
        // claim saying so, as for any missing secret).
        if self.dialect != Dialect::Action
            && parts.len() == 2
            && parts[0].eq_ignore_ascii_case("github")
            && parts[1].eq_ignore_ascii_case("token")
        {
            return Ok(Reference::Secret(GITHUB_TOKEN_SECRET.into()));
        }
        let known = |parts: &[&str]| match self.dialect {
            Dialect::Workflow => known_reference(parts),
            // An action reads its own inputs, its steps and env, and what
            // the runner knows; the workflow's other contexts are not its.
            Dialect::Action => runner_reference(parts).or_else(|| {
                known_reference(parts)
                    .filter(|r| matches!(r, Reference::Input(_) | Reference::Env(_) | Reference::StepOutput { .. }))
            }),
            // A step's `if:` reads the workflow's contexts (the queue
            // resolves them) and, on the runner, the steps before it.
            // The `github` fields a trigger gives are the queue's too.
            Dialect::Step => known_reference(parts)
                .filter(|r| matches!(r, Reference::Github(_)))
                .or_else(|| runner_reference(parts))
                .or_else(|| known_reference(parts)),
        };
        if let Some(reference) = known(&parts) {
            return Ok(reference);
        }
        // A reference with more after it: its value is text, which has no
        // properties until fromJSON reads it.
        for end in (1..parts.len()).rev() {
            if known(&parts[..end]).is_some() {
                let (head, rest) = (parts[..end].join("."), parts[end..].join("."));
                return Err(format!("{head} is text: to read into it, write fromJSON({head}).{rest}"));
            }
        }
        if self.dialect == Dialect::Workflow && parts.len() == 2 && parts[0].eq_ignore_ascii_case("github") {
            return Err(crate::workflows::github::refusal(parts[1]));
        }
        if self.dialect == Dialect::Action {
            return Err(format!(
                "unknown reference {}: an action's expressions read inputs.<name>, steps.<id>.outputs.<name>, \
                 steps.<id>.outcome|conclusion, env.<name>, github.<name> and runner.<name>",
                parts.join(".")
            ));
        }
        let runner_side = if self.dialect == Dialect::Step {
            ", steps.<id>.outcome|conclusion, github.<name>, runner.<name>"
        } else {
            ""
        };
        Err(format!(
            "unknown reference {}: use needs.<job>.outputs.<name>, needs.<job>.result|outcome, matrix.<name>, \
             strategy.job-index|job-total|fail-fast|max-parallel, secrets.<NAME>, inputs.<name>, env.<name>, baton.run_id|attempt|workspace_id|job|trigger, \
             steps.<id>.outputs.<name>{runner_side} or (listening jobs) event.name|ref|payload.<path>",
            parts.join(".")
        ))
    }
}

/// The secret `github.token` reads.
pub const GITHUB_TOKEN_SECRET: &str = "GITHUB_TOKEN";

/// What only the runner knows, as an action's own expressions read it:
/// `github.<name>`, `runner.<name>`, `steps.<id>.outcome|conclusion`.
fn runner_reference(parts: &[&str]) -> Option<Reference> {
    let lower: Vec<String> = parts.iter().map(|p| p.to_ascii_lowercase()).collect();
    match lower.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["github" | "runner", _] => Some(Reference::Runner(lower)),
        ["steps", _, "outcome" | "conclusion"] => {
            Some(Reference::Runner(vec!["steps".into(), parts[1].to_string(), lower[2].clone()]))
        }
        _ => None,
    }
}

/// The reference `parts` spell, if it is one. Context names and the fixed
/// words of a path are read ignoring case, as GitHub reads them.
fn known_reference(parts: &[&str]) -> Option<Reference> {
    let lower: Vec<String> = parts.iter().map(|p| p.to_ascii_lowercase()).collect();
    let words: Vec<&str> = lower.iter().map(String::as_str).collect();
    let owned = |s: &str| s.to_string();
    Some(match (words.as_slice(), parts) {
        (["needs", _, "outputs", _], [_, job, _, name]) => {
            Reference::NeedsOutput { job: owned(job), name: owned(name) }
        }
        (["needs", _, "result"], [_, job, _]) => Reference::NeedsResult { job: owned(job) },
        (["needs", _, "outcome"], [_, job, _]) => Reference::NeedsOutcome { job: owned(job) },
        (["matrix", _], [_, name]) => Reference::Matrix(owned(name)),
        (["strategy", field], _) if crate::workflows::matrix::STRATEGY_FIELDS.contains(field) => {
            Reference::Strategy(owned(field))
        }
        (["secrets", _], [_, name]) => Reference::Secret(owned(name)),
        (["inputs", _], [_, name]) => Reference::Input(owned(name)),
        // GitHub's variable names are case-insensitive: kept upper-cased.
        (["vars", _], [_, name]) => Reference::Var(name.to_ascii_uppercase()),
        (["env", _], [_, name]) => Reference::Env(owned(name)),
        (["baton", field], _) => Reference::Baton(BatonField::parse(field)?),
        (["steps", _, "outputs", _], [_, step, _, name]) => {
            Reference::StepOutput { step: owned(step), name: owned(name) }
        }
        (["github", "event", ..], [_, _, rest @ ..]) => {
            Reference::Github(std::iter::once("event").chain(rest.iter().copied()).map(owned).collect())
        }
        (["github", field], _) if crate::workflows::github::is_server_field(field) => {
            Reference::Github(vec![owned(field)])
        }
        (["event", field @ ("name" | "ref")], _) => Reference::Event(vec![owned(field)]),
        (["event", "payload", ..], [_, _, rest @ ..]) => {
            Reference::Event(std::iter::once("payload").chain(rest.iter().copied()).map(owned).collect())
        }
        _ => return None,
    })
}
