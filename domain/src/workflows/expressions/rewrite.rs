//! Rewriting what an expression's text reads, token by token: how a called
//! workflow's jobs are made to read their caller's values
//! (`workflows::reusable`). A context's property (`inputs.name`,
//! `inputs['name']`, `needs.build.outputs.x`) is handed to a callback,
//! which may put other expression text in its place; the rest of the text
//! is kept as written (an expression nothing was replaced in comes back
//! unchanged, byte for byte).

use super::lex::{tokenize, Token};
use super::value::quote;

/// What a callback sees: a context (lower-cased, as GitHub reads context
/// names) and the property names read from it, in order (`needs.a.result`
/// is `needs` and `["a", "result"]`). It answers how many of those names
/// the replacement stands for and the replacement's text, or `None` to keep
/// the reference.
pub type Replace<'a> = dyn Fn(&str, &[String]) -> Result<Option<(usize, String)>, String> + 'a;

/// `text` (one expression, without `${{ }}`) with its references replaced;
/// `None` when nothing was.
pub fn replace_in_expression(text: &str, replace: &Replace) -> Result<Option<String>, String> {
    let tokens = tokenize(text)?;
    let mut out: Vec<String> = Vec::with_capacity(tokens.len());
    let mut changed = false;
    let mut i = 0;
    while i < tokens.len() {
        if let Some((consumed, replacement)) = reference_at(&tokens, i, replace)? {
            out.push(replacement);
            changed = true;
            i += consumed;
            continue;
        }
        out.push(Token::text(&tokens[i]));
        i += 1;
    }
    if !changed {
        return Ok(None);
    }
    // Names and their `.`, `[`, `]` printed tight; everything else spaced.
    let mut text = String::new();
    for (n, piece) in out.iter().enumerate() {
        let previous = if n == 0 { "" } else { out[n - 1].as_str() };
        let after_name = previous.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let tight = n == 0
            || matches!(piece.as_str(), "." | "[" | "]" | ")" | ",")
            || (piece == "(" && after_name)
            || matches!(previous, "." | "[" | "(" | "!");
        if !tight {
            text.push(' ');
        }
        text.push_str(piece);
    }
    Ok(Some(text))
}

/// A string of a workflow with every `${{ … }}` in it rewritten; `None`
/// when nothing was replaced.
pub fn replace_in_text(text: &str, replace: &Replace) -> Result<Option<String>, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(start) = rest.find("${{") {
        let after = &rest[start + 3..];
        let Some(end) = super::expression_end(after) else { break };
        out.push_str(&rest[..start + 3]);
        match replace_in_expression(&after[..end], replace)? {
            Some(new) => {
                changed = true;
                out.push(' ');
                out.push_str(&new);
                out.push(' ');
            }
            None => out.push_str(&after[..end]),
        }
        out.push_str("}}");
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(changed.then_some(out))
}

/// An `if:`, whose `${{ }}` is optional: rewritten as an expression when it
/// has none.
pub fn replace_in_condition(text: &str, replace: &Replace) -> Result<Option<String>, String> {
    if text.contains("${{") {
        replace_in_text(text, replace)
    } else {
        replace_in_expression(text, replace)
    }
}

/// One expression giving what `text`, a string of a workflow, gives: the
/// expression itself when `text` is one `${{ … }}` and nothing else (its
/// value keeps its type), a `format(…)` of its pieces when it mixes text and
/// expressions, a string literal when it has none.
pub fn as_expression(text: &str) -> Result<String, String> {
    let mut template = String::new();
    let mut arguments: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        let after = &rest[start + 3..];
        let end = super::expression_end(after).ok_or("a '${{' is not closed by '}}'")?;
        template.push_str(&escape_braces(&rest[..start]));
        template.push_str(&format!("{{{}}}", arguments.len()));
        arguments.push(after[..end].trim().to_string());
        rest = &after[end + 2..];
    }
    template.push_str(&escape_braces(rest));
    Ok(match arguments.as_slice() {
        [] => quote(text),
        [only] if template == "{0}" => format!("({only})"),
        _ => format!("format({}, {})", quote(&template), arguments.join(", ")),
    })
}

/// `format`'s template escapes its braces by doubling them.
fn escape_braces(text: &str) -> String {
    text.replace('{', "{{").replace('}', "}}")
}

/// The reference starting at `tokens[i]`, if one does and `replace` takes
/// it: how many tokens it covers and its replacement.
fn reference_at(tokens: &[Token], i: usize, replace: &Replace) -> Result<Option<(usize, String)>, String> {
    let Some(Token::Ident(context)) = tokens.get(i) else { return Ok(None) };
    // A property name (`x.inputs`) or a function (`contains(`) is no context.
    if i > 0 && tokens[i - 1] == Token::Dot || tokens.get(i + 1) == Some(&Token::LParen) {
        return Ok(None);
    }
    // The names read after it, and after each the index of the next token.
    let mut names = Vec::new();
    let mut ends = Vec::new();
    let mut at = i + 1;
    loop {
        match (tokens.get(at), tokens.get(at + 1), tokens.get(at + 2)) {
            (Some(Token::Dot), Some(Token::Ident(name)), _) => {
                names.push(name.clone());
                at += 2;
            }
            (Some(Token::LBracket), Some(Token::Str(name)), Some(Token::RBracket)) => {
                names.push(name.clone());
                at += 3;
            }
            _ => break,
        }
        ends.push(at);
    }
    let Some((taken, replacement)) = replace(&context.to_ascii_lowercase(), &names)? else { return Ok(None) };
    let end = if taken == 0 { i + 1 } else { ends.get(taken - 1).copied().unwrap_or(at) };
    Ok(Some((end - i, replacement)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(context: &str, names: &[String]) -> Result<Option<(usize, String)>, String> {
        Ok(match (context, names.first().map(String::as_str)) {
            ("inputs", Some("os")) => Some((1, "(matrix.os)".into())),
            ("needs", Some("build")) => Some((1, "needs.call--build".into())),
            _ => None,
        })
    }

    #[test]
    fn a_property_is_replaced_in_either_form_and_the_rest_kept() {
        let rewritten = replace_in_expression("inputs.os == 'linux' && Inputs['os'] != 'it''s'", &inputs).unwrap();
        assert_eq!(rewritten.as_deref(), Some("(matrix.os) == 'linux' && (matrix.os) != 'it''s'"));
        let rewritten = replace_in_expression("contains(needs.build.outputs.list, 'x')", &inputs).unwrap();
        assert_eq!(rewritten.as_deref(), Some("contains(needs.call--build.outputs.list, 'x')"));
    }

    #[test]
    fn names_that_are_no_context_are_left_alone() {
        // `github.inputs` is a property, `inputs(` would be a call.
        assert_eq!(replace_in_expression("github.inputs.os", &inputs).unwrap(), None);
        assert_eq!(replace_in_expression("toJSON(needs.*.result)", &inputs).unwrap(), None);
    }

    #[test]
    fn text_is_rewritten_only_inside_its_expressions() {
        let text = "echo inputs.os ${{ inputs.os }} ${{ format('{{0}}', 1) }}";
        let rewritten = replace_in_text(text, &inputs).unwrap().unwrap();
        assert_eq!(rewritten, "echo inputs.os ${{ (matrix.os) }} ${{ format('{{0}}', 1) }}");
        assert_eq!(replace_in_text("nothing ${{ vars.X }}", &inputs).unwrap(), None);
        assert_eq!(replace_in_condition("inputs.os == 'a'", &inputs).unwrap().as_deref(), Some("(matrix.os) == 'a'"));
    }

    #[test]
    fn a_string_of_a_workflow_becomes_one_expression_with_its_value() {
        assert_eq!(as_expression("plain 'text'").unwrap(), "'plain ''text'''");
        assert_eq!(as_expression("${{ inputs.n }}").unwrap(), "(inputs.n)");
        assert_eq!(
            as_expression("v{1}-${{ matrix.os }}/${{ github.ref }}").unwrap(),
            "format('v{{1}}-{0}/{1}', matrix.os, github.ref)"
        );
        let scope = super::super::MapScope(
            [("matrix.os".to_string(), "linux".to_string()), ("github.ref".to_string(), "main".to_string())].into(),
        );
        let expr = super::super::parse(&as_expression("v{1}-${{ matrix.os }}/${{ github.ref }}").unwrap()).unwrap();
        assert_eq!(super::super::evaluate(&expr, &scope).unwrap().render(), "v{1}-linux/main");
    }

    #[test]
    fn a_rewritten_expression_parses_as_the_same_shape() {
        let rewritten =
            replace_in_expression("!(inputs.os) && fromJSON(inputs['os'])[0] >= -1.5", &inputs).unwrap().unwrap();
        assert!(super::super::parse(&rewritten).is_ok(), "{rewritten}");
    }
}
