//! An expression's text as tokens, by GitHub Actions' rules: single-quoted
//! strings (`''` is a quote), numbers in any form GitHub reads (`711`,
//! `-9.2`, `0xff`, `-2.99e-2`, `NaN`, `Infinity`), names of letters,
//! digits, `_` and `-`, and the operators.

use super::value::parse_number;
use super::Comparison;

#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    /// A context, function or property name.
    Ident(String),
    Str(String),
    Number(f64),
    True,
    False,
    Null,
    Dot,
    Star,
    Comma,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Not,
    And,
    Or,
    Compare(Comparison),
}

impl Token {
    /// The token as the language writes it.
    pub fn text(&self) -> String {
        let symbol = match self {
            Token::Ident(name) => return name.clone(),
            Token::Str(text) => return super::value::quote(text),
            Token::Number(n) => return super::value::format_number(*n),
            Token::True => "true",
            Token::False => "false",
            Token::Null => "null",
            Token::Dot => ".",
            Token::Star => "*",
            Token::Comma => ",",
            Token::LParen => "(",
            Token::RParen => ")",
            Token::LBracket => "[",
            Token::RBracket => "]",
            Token::Not => "!",
            Token::And => "&&",
            Token::Or => "||",
            Token::Compare(op) => op.symbol(),
        };
        symbol.to_string()
    }

    /// The token as an error message names it.
    pub fn describe(&self) -> String {
        match self {
            Token::Ident(name) => format!("'{name}'"),
            Token::Str(text) => format!("the string '{text}'"),
            Token::Number(n) => format!("the number {}", super::value::format_number(*n)),
            other => format!("'{}'", other.text()),
        }
    }
}

/// Where a number or a name ends.
fn is_boundary(c: char) -> bool {
    c.is_whitespace() || matches!(c, '(' | '[' | ')' | ']' | ',' | '.' | '!' | '>' | '<' | '=' | '&' | '|')
}

fn is_name(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens: Vec<Token> = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let next = chars.get(i + 1).copied();
        let (token, width) = match c {
            c if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '(' => (Token::LParen, 1),
            ')' => (Token::RParen, 1),
            '[' => (Token::LBracket, 1),
            ']' => (Token::RBracket, 1),
            ',' => (Token::Comma, 1),
            '*' => (Token::Star, 1),
            '!' if next == Some('=') => (Token::Compare(Comparison::Ne), 2),
            '!' => (Token::Not, 1),
            '=' if next == Some('=') => (Token::Compare(Comparison::Eq), 2),
            '=' => return Err("'=' is no operator: compare with '=='".into()),
            '<' if next == Some('=') => (Token::Compare(Comparison::Le), 2),
            '<' => (Token::Compare(Comparison::Lt), 1),
            '>' if next == Some('=') => (Token::Compare(Comparison::Ge), 2),
            '>' => (Token::Compare(Comparison::Gt), 1),
            '&' if next == Some('&') => (Token::And, 2),
            '&' => return Err("'&' is no operator: use '&&'".into()),
            '|' if next == Some('|') => (Token::Or, 2),
            '|' => return Err("'|' is no operator: use '||'".into()),
            '"' => return Err("strings are written in single quotes ('text'), not double".into()),
            '\'' => {
                // '' inside a literal is a quote, as in GitHub Actions.
                let mut value = String::new();
                let mut at = i + 1;
                loop {
                    match chars.get(at) {
                        None => return Err("a string literal is not closed".into()),
                        Some('\'') if chars.get(at + 1) == Some(&'\'') => {
                            value.push('\'');
                            at += 2
                        }
                        Some('\'') => break,
                        Some(c) => {
                            value.push(*c);
                            at += 1
                        }
                    }
                }
                (Token::Str(value), at + 1 - i)
            }
            // A '.' after a name, ']', ')' or '*' reads a property; anywhere
            // else it starts a number (`.5`).
            '.' if matches!(tokens.last(), Some(Token::Ident(_) | Token::RBracket | Token::RParen | Token::Star)) => {
                (Token::Dot, 1)
            }
            c if c.is_ascii_digit() || matches!(c, '-' | '+' | '.') => {
                let width = 1 + chars[i + 1..].iter().take_while(|c| !is_boundary(**c) || **c == '.').count();
                let word: String = chars[i..i + width].iter().collect();
                let value = parse_number(&word);
                if value.is_nan() {
                    let hint =
                        if matches!(word.as_str(), "-" | "+") { " (expressions have no arithmetic)" } else { "" };
                    return Err(format!("'{word}' is not a number{hint}"));
                }
                (Token::Number(value), width)
            }
            _ => {
                let width = chars[i..].iter().take_while(|c| !is_boundary(**c)).count();
                let word: String = chars[i..i + width].iter().collect();
                let after_dot = tokens.last() == Some(&Token::Dot);
                let token = match word.as_str() {
                    "true" if !after_dot => Token::True,
                    "false" if !after_dot => Token::False,
                    "null" if !after_dot => Token::Null,
                    "NaN" if !after_dot => Token::Number(f64::NAN),
                    "Infinity" if !after_dot => Token::Number(f64::INFINITY),
                    _ if is_name(&word) => Token::Ident(word),
                    _ => return Err(format!("unexpected '{word}'")),
                };
                (token, width)
            }
        };
        tokens.push(token);
        i += width;
    }
    Ok(tokens)
}
