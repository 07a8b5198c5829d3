//! Table tests against GitHub Actions' documented examples (the
//! expressions reference: literals, operators and coercion, each function,
//! object filters) and the runner's behaviour, then Baton's own rules:
//! references, `if:` conditions, interpolation and the errors.

use super::*;

fn scope(pairs: &[(&str, &str)]) -> MapScope {
    MapScope(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

/// The references the tables read.
fn table_scope() -> MapScope {
    scope(&[
        ("inputs.x", "a"),
        ("inputs.y", "b"),
        ("inputs.flag", "true"),
        ("needs.a.outputs.flag", "true"),
        ("needs.a.outputs.bad", "not json"),
        ("needs.a.outputs.empty", ""),
        ("needs.a.outputs.number", "10"),
        ("needs.a.outputs.template", "{1}"),
        ("needs.a.outputs.cfg", r#"{"targets": ["x86", "arm"], "Mode": "fast"}"#),
        ("needs.a.outputs.matrix", r#"{"include":[{"project":"foo","config":"Debug"}]}"#),
        (
            "needs.a.outputs.fruits",
            r#"[{"name":"apple","quantity":1},{"name":"orange","quantity":2},{"name":"pear","quantity":1}]"#,
        ),
        (
            "needs.a.outputs.vegetables",
            r#"{"scallions":{"colors":["green","white","red"],"ediblePortions":["roots","stems"]},
                "beets":{"colors":["purple","red","gold","white","pink"],"ediblePortions":["roots","stems","leaves"]},
                "artichokes":{"colors":["green","purple","red","black"],"ediblePortions":["hearts","stems","leaves"]}}"#,
        ),
        ("needs.a.outputs.labels", r#"[{"name":"bug"},{"name":"help wanted"}]"#),
        ("needs.a.result", "success"),
        ("needs", r#"{"a": {"result": "success", "outputs": {"v": "1"}}, "b": {"result": "failure", "outputs": {}}}"#),
        ("matrix.pair", r#"{"elixir": "1.17", "otp": "27"}"#),
        ("matrix.os", "linux"),
    ])
}

/// What a row expects of its expression.
enum Want {
    /// Its value rendered into text.
    Is(&'static str),
    /// Whether it holds (its value is truthy).
    Holds(bool),
    /// It is refused or fails, with a message holding this.
    Fails(&'static str),
}
use Want::{Fails, Holds, Is};

fn check(rows: &[(&str, Want)]) {
    let s = table_scope();
    for (text, want) in rows {
        let got = parse(text).and_then(|expr| evaluate(&expr, &s));
        match (want, &got) {
            (Is(expected), Ok(value)) => assert_eq!(value.render(), *expected, "{text}"),
            (Holds(expected), Ok(value)) => assert_eq!(value.truthy(), *expected, "{text}"),
            (Fails(part), Err(message)) => assert!(message.contains(part), "{text}: {message:?} lacks {part:?}"),
            (_, got) => panic!("{text}: got {got:?}"),
        }
    }
}

#[test]
fn literals_read_as_github_reads_them() {
    check(&[
        // The documented examples.
        ("null", Is("")),
        ("false", Is("false")),
        ("711", Is("711")),
        ("-9.2", Is("-9.2")),
        ("0xff", Is("255")),
        ("-2.99e-2", Is("-0.0299")),
        ("'It''s open source!'", Is("It's open source!")),
        // The runner's number forms and how it prints them.
        (".5", Is("0.5")),
        ("-.5", Is("-0.5")),
        ("+123456.789", Is("123456.789")),
        ("-2.0", Is("-2")),
        ("-0", Is("0")),
        ("1.2E+2", Is("120")),
        ("1.2e-2", Is("0.012")),
        ("0o10", Is("8")),
        ("0.84551240822557006", Is("0.84551240822557")),
        ("100000000000000", Is("100000000000000")),
        ("1e15", Is("1E+15")),
        ("0.0001", Is("0.0001")),
        ("0.00001", Is("1E-05")),
        ("-123456789012345678", Is("-1.23456789012346E+17")),
        ("NaN", Is("NaN")),
        ("-Infinity", Is("-Infinity")),
        ("''", Is("")),
    ]);
}

#[test]
fn truthiness_follows_github() {
    check(&[
        ("false", Holds(false)),
        ("0", Holds(false)),
        ("-0", Holds(false)),
        ("NaN", Holds(false)),
        ("''", Holds(false)),
        ("null", Holds(false)),
        ("inputs.missing", Holds(false)),
        ("true", Holds(true)),
        ("-1", Holds(true)),
        ("'0'", Holds(true)),
        ("'false'", Holds(true)),
        ("fromJSON('[]')", Holds(true)),
        ("fromJSON('{}')", Holds(true)),
        ("!0", Is("true")),
        ("!'x'", Is("false")),
        ("!fromJSON('[]')", Is("false")),
    ]);
}

#[test]
fn and_and_or_give_an_operand() {
    check(&[
        // The documented ternary idiom.
        ("inputs.x == 'a' && 'yes' || 'no'", Is("yes")),
        ("inputs.y == 'a' && 'yes' || 'no'", Is("no")),
        ("inputs.missing || 'default'", Is("default")),
        ("inputs.x || 'default'", Is("a")),
        ("needs.a.outputs.empty && 'yes'", Is("")),
        // The runner's precedence cases.
        ("1 == 1 && 2", Is("2")),
        ("1 == (1 && 2)", Is("false")),
        ("'a' == 'a' && 'b'", Is("b")),
        ("false && 0 || null", Is("")),
        ("false && (0 || null)", Is("false")),
        ("1 || 2 && 3", Is("1")),
        ("(1 || 2) && 3", Is("3")),
        // Short-circuit: the right side is not evaluated, so it cannot fail.
        ("false && fromJSON(needs.a.outputs.bad)", Is("false")),
        ("true || fromJSON(needs.a.outputs.bad)", Is("true")),
        ("fromJSON(needs.a.outputs.bad) || true", Fails("not JSON")),
    ]);
}

#[test]
fn comparisons_coerce_as_github_does() {
    check(&[
        // Same kinds compare directly, strings ignoring case.
        ("'ABC' == 'abc'", Holds(true)),
        ("'abc' != 'ABC'", Holds(false)),
        ("'abc' < 'DEF'", Holds(true)),
        ("'def' > 'ABC'", Holds(true)),
        ("'a' >= 'A'", Holds(true)),
        ("1.002 > 1.001", Holds(true)),
        ("false < true", Holds(true)),
        ("true > false", Holds(true)),
        ("null == null", Holds(true)),
        ("null < null", Holds(false)),
        ("null <= null", Holds(true)),
        // Different kinds become numbers: null 0, true 1, false 0, a
        // string its number ('' is 0, anything else NaN).
        ("null == 0", Holds(true)),
        ("null == ''", Holds(true)),
        ("null == 'abc'", Holds(false)),
        ("true == 1", Holds(true)),
        ("false == 0", Holds(true)),
        ("false == ''", Holds(true)),
        ("'1' == 1", Holds(true)),
        ("' 12 ' == 12", Holds(true)),
        ("'0x10' == 16", Holds(true)),
        ("'1e3' == 1000", Holds(true)),
        ("'' == 0", Holds(true)),
        ("'abc' == 0", Holds(false)),
        ("'abc' != 0", Holds(true)),
        ("'abc' < 1", Holds(false)),
        ("'abc' >= 1", Holds(false)),
        // `true` is 1 and 'true' is NaN: a job output compared with
        // `true` must be compared with 'true'.
        ("'true' == true", Holds(false)),
        ("needs.a.outputs.flag == true", Holds(false)),
        ("needs.a.outputs.flag == 'true'", Holds(true)),
        ("needs.a.outputs.flag == 'TRUE'", Holds(true)),
        ("fromJSON(needs.a.outputs.flag) == true", Holds(true)),
        // NaN compares false (and != true).
        ("NaN == NaN", Holds(false)),
        ("NaN != NaN", Holds(true)),
        ("NaN < 1", Holds(false)),
        ("NaN >= NaN", Holds(false)),
        // Arrays and objects equal only themselves, and each is new.
        ("fromJSON('[]') == fromJSON('[]')", Holds(false)),
        ("fromJSON('{}') != fromJSON('{}')", Holds(true)),
        ("fromJSON('[]') == 0", Holds(false)),
        ("fromJSON('[]') < 1", Holds(false)),
        // Precedence and left-to-right, as the runner has them.
        ("!2 < 3", Holds(true)),
        ("!(2 < 3)", Holds(false)),
        ("3 < 2 < 1", Holds(true)),
        ("3 < (2 < 1)", Holds(false)),
        ("0 > 0 < 1", Holds(true)),
        ("2 > 2 > 0", Holds(false)),
        ("2 <= 3 == true", Holds(true)),
        ("2 <= (3 == true)", Holds(false)),
        ("2 == 2 == 1", Holds(true)),
        ("2 == 2 != 0", Holds(true)),
        // The documented way to compare an output as a number.
        ("fromJSON(needs.a.outputs.number) > 5", Holds(true)),
        ("needs.a.outputs.number > 5", Holds(true)),
        ("needs.a.outputs.number > '5'", Holds(false)),
    ]);
}

#[test]
fn functions_follow_the_documented_examples() {
    check(&[
        ("contains('Hello world', 'llo')", Holds(true)),
        ("contains('Hello world', 'LLO')", Holds(true)),
        ("contains('Hello world', 'xyz')", Holds(false)),
        ("contains(fromJSON('[\"push\", \"pull_request\"]'), 'PUSH')", Holds(true)),
        ("contains(fromJSON('[\"push\", \"pull_request\"]'), 'pull')", Holds(false)),
        ("contains(fromJSON('[1, 2]'), '2')", Holds(true)),
        ("contains(fromJSON(needs.a.outputs.labels).*.name, 'bug')", Holds(true)),
        ("contains(fromJSON('{\"a\": 1}'), 'a')", Holds(false)),
        ("contains('Array', fromJSON('[]'))", Holds(false)),
        ("contains(12345, 23)", Holds(true)),
        ("contains(null, '')", Holds(true)),
        ("CONTAINS('abc', 'B')", Holds(true)),
        ("startsWith('Hello world', 'He')", Holds(true)),
        ("startsWith('Hello world', 'he')", Holds(true)),
        ("startsWith('Hello world', 'world')", Holds(false)),
        ("endsWith('Hello world', 'ld')", Holds(true)),
        ("endsWith('Hello world', 'LD')", Holds(true)),
        ("endsWith(fromJSON('[\"ld\"]'), 'ld')", Holds(false)),
        ("format('Hello {0} {1} {2}', 'Mona', 'the', 'Octocat')", Is("Hello Mona the Octocat")),
        ("format('{{Hello {0} {1} {2}!}}', 'Mona', 'the', 'Octocat')", Is("{Hello Mona the Octocat!}")),
        ("format('123{0}456{0}789', 'abc')", Is("123abc456abc789")),
        ("format('{{{{0}}}}', 'abc')", Is("{{0}}")),
        ("format('}}{{}}', 'abc')", Is("}{}")),
        ("format('{0}|{1}|{2}|{3}', null, true, 1.0, 0.5)", Is("|true|1|0.5")),
        ("format('{0} {1}', fromJSON('[1]'), fromJSON('{}'))", Is("Array Object")),
        ("format(null)", Is("")),
        ("format('{1}', 'a')", Fails("reads {1} but is given 1 value(s)")),
        ("format('{0}')", Fails("reads {0} but is given 0 value(s)")),
        ("format('{0', 'a')", Fails("a '{' opens no {N}")),
        ("format('{x}', 'a')", Fails("a '{' opens no {N}")),
        ("format('{0}}', 'a')", Fails("a '}' closes no {N}")),
        ("format('0}')", Fails("a '}' closes no {N}")),
        ("format(needs.a.outputs.template, 'x')", Fails("reads {1} but is given 1 value(s)")),
        ("join(fromJSON(needs.a.outputs.labels).*.name, ', ')", Is("bug, help wanted")),
        ("join(fromJSON('[1, true, null, \"x\"]'))", Is("1,true,,x")),
        ("join(fromJSON('[[1], {}]'), ' ')", Is("Array Object")),
        ("join('abc', '-')", Is("abc")),
        ("join(null)", Is("")),
        ("join(fromJSON('{\"a\": 1}'))", Is("")),
        ("toJSON(null)", Is("null")),
        ("toJSON(-0)", Is("0")),
        ("toJSON(1234.5)", Is("1234.5")),
        ("toJSON('abc''def')", Is("\"abc'def\"")),
        ("toJSON('a\"b\\c')", Is(r#""a\"b\\c""#)),
        ("toJSON(fromJSON('[1, 2, 3]'))", Is("[\n  1,\n  2,\n  3\n]")),
        ("toJSON(fromJSON('[[], {}, [true, null]]'))", Is("[\n  [],\n  {},\n  [\n    true,\n    null\n  ]\n]")),
        (
            "toJSON(fromJSON('{\"one\": \"value one\", \"two\": {\"a\": 2}}'))",
            Is("{\n  \"one\": \"value one\",\n  \"two\": {\n    \"a\": 2\n  }\n}"),
        ),
        // Keys keep their order.
        ("toJSON(fromJSON('{\"b\": 1, \"a\": 2}'))", Is("{\n  \"b\": 1,\n  \"a\": 2\n}")),
        ("fromJSON('true') == true", Holds(true)),
        ("fromJSON('null') == null", Holds(true)),
        ("fromJSON('\"abc\"')", Is("abc")),
        ("fromJSON('-1234.5')", Is("-1234.5")),
        ("fromJSON('1e3') == 1000", Holds(true)),
        ("fromJSON(needs.a.outputs.matrix).include[0].project", Is("foo")),
        ("fromJSON(needs.a.outputs.bad)", Fails("fromJSON('not json'): not JSON")),
        ("fromJSON(needs.a.outputs.empty)", Fails("not JSON")),
        ("FromJson(needs.a.outputs.number)", Is("10")),
    ]);
}

#[test]
fn round_trips_through_json() {
    let s = table_scope();
    let text = "${{ toJSON(fromJSON(needs.a.outputs.matrix)) }}";
    let pretty = try_interpolate(text, &s).unwrap();
    assert_eq!(
        pretty,
        "{\n  \"include\": [\n    {\n      \"project\": \"foo\",\n      \"config\": \"Debug\"\n    }\n  ]\n}"
    );
    let again = scope(&[("needs.a.outputs.matrix", &pretty)]);
    assert_eq!(try_interpolate(text, &again).unwrap(), pretty);
}

#[test]
fn indexes_and_object_filters_read_into_values() {
    check(&[
        ("fromJSON('{\"a\": {\"b\": \"c\"}}').a.b", Is("c")),
        ("fromJSON('{\"a\": {\"b\": \"c\"}}').A.B", Is("c")),
        ("(fromJSON('{\"one\": \"one val\"}')).one", Is("one val")),
        ("fromJSON('{\"key\": 1}')['KEY']", Is("1")),
        ("fromJSON('{\"true\": 1}').true", Is("1")),
        ("fromJSON('[10, 20]')[1]", Is("20")),
        ("fromJSON('[10, 20]')['1']", Is("20")),
        ("fromJSON('[10, 20]')[1.7]", Is("20")),
        ("fromJSON('[10, 20]')[2]", Is("")),
        ("fromJSON('[10, 20]')[-1]", Is("")),
        ("fromJSON('[10, 20]').a", Is("")),
        ("fromJSON('\"text\"').a", Is("")),
        ("fromJSON('{\"a\": 1}').missing.deeper", Is("")),
        ("fromJSON(needs.a.outputs.cfg).targets[0]", Is("x86")),
        ("fromJSON(needs.a.outputs.cfg).mode", Is("fast")),
        ("fromJSON(needs.a.outputs.cfg)['targets'][1]", Is("arm")),
        ("fromJSON(needs.a.outputs.cfg).targets[inputs.missing]", Is("x86")),
        // Object filters.
        ("join(fromJSON('[{\"a\": 1}, {\"a\": 2}]').*.a)", Is("1,2")),
        ("toJSON(fromJSON('[{\"a\": 1}, {\"a\": 2}]').*.a)", Is("[\n  1,\n  2\n]")),
        ("join(fromJSON(needs.a.outputs.fruits).*.name, ', ')", Is("apple, orange, pear")),
        (
            "toJSON(fromJSON(needs.a.outputs.vegetables).*.ediblePortions)",
            Is("[\n  [\n    \"roots\",\n    \"stems\"\n  ],\n  [\n    \"roots\",\n    \"stems\",\n    \"leaves\"\n  ],\n  [\n    \"hearts\",\n    \"stems\",\n    \"leaves\"\n  ]\n]"),
        ),
        ("join(fromJSON('{\"a\": 1, \"b\": 2}').*)", Is("1,2")),
        ("join(fromJSON('{\"a\": 1, \"b\": 2}')[*])", Is("1,2")),
        ("join(fromJSON('[[1, 2], [3]]').*.*)", Is("1,2,3")),
        ("join(fromJSON('[[1, 2], [3]]').*[0])", Is("1,3")),
        ("join(fromJSON('[{\"a\": 1}, {\"b\": 2}, 3]').*.a)", Is("1")),
        ("toJSON(fromJSON('1').*)", Is("[]")),
        ("contains(fromJSON(needs.a.outputs.vegetables).*.colors.*, 'PINK')", Holds(true)),
        // The `needs` context itself (GitHub's all-green gate).
        ("contains(needs.*.result, 'failure')", Holds(true)),
        ("!contains(needs.*.result, 'cancelled')", Holds(true)),
        ("join(needs[*].result)", Is("success,failure")),
        ("join(needs.*.outputs.v)", Is("1")),
        ("fromJSON(toJSON(needs)).b.result", Is("failure")),
        // A matrix value given as a mapping (as the queue hands it on).
        ("matrix.pair.otp", Is("27")),
        ("matrix.pair['elixir'] == '1.17'", Holds(true)),
        ("matrix.os.name", Is("")),
    ]);
}

#[test]
fn errors_name_the_construct() {
    let deep_parens = format!("{}1{}", "(".repeat(60), ")".repeat(60));
    let deep_nots = format!("{}1", "!".repeat(60));
    let long_chain = ["inputs.x"; 600].join(" || ");
    let long_index = format!("fromJSON('[]'){}", "[0]".repeat(600));
    check(&[
        ("hashFiles('**/package-lock.json')", Fails("hashFiles() reads the job's files")),
        ("HASHFILES('a', 'b')", Fails("hashFiles() reads the job's files")),
        ("foo(1, 2)", Fails("unknown function foo(); known: contains, startsWith, endsWith, format, join")),
        ("github.workspace == 'x' && toYaml(x)", Fails("unknown reference github.workspace")),
        ("contains('a')", Fails("contains() takes 2 arguments, not 1")),
        ("startsWith('a', 'b', 'c')", Fails("startsWith() takes 2 arguments, not 3")),
        ("join()", Fails("join() takes 1 or 2 arguments, not 0")),
        ("toJSON(1, 2)", Fails("toJSON() takes 1 argument, not 2")),
        ("format()", Fails("format() takes a format string")),
        ("success(1)", Fails("success() takes no arguments")),
        ("fromJSON('{')", Fails("fromJSON('{'): not JSON")),
        ("fromJSON('')", Fails("not JSON")),
        ("matrix.*", Fails("matrix.*: an object filter over this context is not supported: its values are text")),
        ("inputs[*]", Fails("an object filter over this context is not supported")),
        (
            "needs.a.outputs.cfg.targets",
            Fails("needs.a.outputs.cfg is text: to read into it, write fromJSON(needs.a.outputs.cfg).targets"),
        ),
        ("needs.a.outputs.cfg[0]", Fails("needs.a.outputs.cfg is text")),
        ("(needs.a.outputs.cfg).targets", Fails("needs.a.outputs.cfg is text: to read into it, use fromJSON")),
        ("matrix[inputs.x]", Fails("matrix[…]: a context is indexed by a quoted name")),
        ("inputs", Fails("unknown reference inputs")),
        ("inputs.1", Fails("'inputs.' is followed by the number 1, not a name")),
        ("\"double\"", Fails("single quotes")),
        ("inputs.a = 'b'", Fails("'=' is no operator")),
        ("inputs.a & inputs.b", Fails("use '&&'")),
        ("1 - 2", Fails("'-' is not a number (expressions have no arithmetic)")),
        ("1.2.3", Fails("'1.2.3' is not a number")),
        ("inputs.a@b", Fails("unexpected 'a@b'")),
        ("(1", Fails("a '(' is not closed")),
        ("fromJSON('[1]')[0", Fails("a '[' is not closed")),
        ("fromJSON('[1]').", Fails("a '.' is followed by nothing")),
        ("contains('a' 'b')", Fails("contains( is not closed by ')'")),
        ("'open", Fails("a string literal is not closed")),
        ("1 2", Fails("unexpected the number 2 after the expression")),
        ("", Fails("the expression is empty")),
        ("&&", Fails("unexpected '&&'")),
        (deep_parens.as_str(), Fails("nests deeper than 50")),
        (deep_nots.as_str(), Fails("nests deeper than 50")),
        (long_chain.as_str(), Fails("more than 500 operators and indexes")),
        (long_index.as_str(), Fails("more than 500 operators and indexes")),
    ]);
}

#[test]
fn references_read_their_path_ignoring_the_contexts_case() {
    let one = |text: &str| match parse(text) {
        Ok(Expr::Ref(reference)) => reference,
        other => panic!("{text}: {other:?}"),
    };
    assert_eq!(
        one("needs['build-x'].outputs['v']"),
        Reference::NeedsOutput { job: "build-x".into(), name: "v".into() }
    );
    assert_eq!(one("NEEDS.a.OUTPUTS.v"), Reference::NeedsOutput { job: "a".into(), name: "v".into() });
    assert_eq!(one("needs.build-x.Result"), Reference::NeedsResult { job: "build-x".into() });
    assert_eq!(one("baton.RUN_ID"), Reference::Baton(BatonField::RunId));
    assert_eq!(one("event.payload"), Reference::Event(vec!["payload".into()]));
    assert_eq!(
        one("event.payload.items[0]['the id']"),
        Reference::Event(vec!["payload".into(), "items".into(), "0".into(), "the id".into()])
    );
    // References inside calls and indexes are found.
    assert_eq!(
        text_references("${{ fromJSON(needs.a.outputs.cfg)[inputs.i] }}").unwrap(),
        vec![Reference::NeedsOutput { job: "a".into(), name: "cfg".into() }, Reference::Input("i".into())]
    );
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
fn values_render_into_text() {
    let s = table_scope();
    assert_eq!(interpolate("n=${{ 1.50 }} b=${{ true }} x=${{ null }}.", &s), "n=1.5 b=true x=.");
    assert_eq!(interpolate("${{ fromJSON(needs.a.outputs.cfg).targets }}", &s), "[\n  \"x86\",\n  \"arm\"\n]");
    // A `}}` inside a string literal does not close the expression.
    assert_eq!(interpolate("${{ format('{{{0}}}', 'x') }}!", &s), "{x}!");
    assert_eq!(interpolate("${{ inputs.x == 'a' && 'yes' || 'no' }}", &s), "yes");
}

#[test]
fn an_expression_that_fails_leaves_the_text_and_does_not_hold() {
    let s = table_scope();
    let text = "a ${{ fromJSON(needs.a.outputs.bad).x }} b ${{ 1 }}";
    assert!(try_interpolate(text, &s).unwrap_err().contains("not JSON"));
    assert_eq!(interpolate(text, &s), text);
    assert!(!holds(&parse("fromJSON(needs.a.outputs.bad) || true").unwrap(), &s));
    assert!(!holds(&parse("!fromJSON(needs.a.outputs.bad)").unwrap(), &s));
}

#[test]
fn conditions_compare_strings_and_combine() {
    let s = scope(&[("needs.build.outputs.deploy", "true"), ("inputs.env", "prod")]);
    let holds_text = |text: &str| holds(&parse(text).unwrap(), &s);
    assert!(holds_text("needs.build.outputs.deploy == 'true'"));
    // An output is text: compared with `true` (the number 1) it is NaN,
    // as on GitHub.
    assert!(!holds_text("needs.build.outputs.deploy == true"));
    assert!(!holds_text("needs.build.outputs.deploy != 'true'"));
    assert!(holds_text("inputs.env == 'prod' && !(inputs.missing)"));
    assert!(holds_text("inputs.env == 'dev' || inputs.env == 'prod'"));
    assert!(!holds_text("inputs.missing"));
    assert!(holds_text("'it''s' == 'it''s'"));
}

#[test]
fn a_status_function_comes_first_or_alone() {
    assert_eq!(split_condition("always()").unwrap(), (Some("always".into()), None));
    assert_eq!(split_condition("${{ Failure() }}").unwrap(), (Some("failure".into()), None));
    let (status, rest) = split_condition("${{ success() && needs.a.outputs.x == '1' }}").unwrap();
    assert_eq!(status.as_deref(), Some("success"));
    assert!(rest.is_some());
    let (status, rest) = split_condition("needs.a.outputs.x == '1'").unwrap();
    assert_eq!((status, rest.is_some()), (None, true));
    assert!(split_condition("needs.a.result == 'success' || failure()").is_err());
    assert!(split_condition("inputs.a && success()").is_err());
    assert!(split_condition("!always()").is_err());
    // GitHub's two guards around a matrix's result, parentheses and all.
    assert_eq!(split_condition("(!cancelled() && !failure())").unwrap(), (Some("!cancelled && !failure".into()), None));
    assert_eq!(split_condition("${{ !cancelled() && failure() }}").unwrap(), (Some("failure".into()), None));
    let (status, rest) = split_condition("!cancelled() && !failure() && inputs.a == '1'").unwrap();
    assert_eq!((status.as_deref(), rest.is_some()), (Some("!cancelled && !failure"), true));
    assert!(split_condition("!failure()").is_err(), "alone it would run after a cancel: said, not guessed");
    // First of a longer `&&` chain: the rest keeps its meaning.
    let (status, rest) = split_condition("always() && inputs.a == '1' && inputs.b == '2'").unwrap();
    assert_eq!(status.as_deref(), Some("always"));
    let rest = rest.unwrap();
    assert!(holds(&rest, &scope(&[("inputs.a", "1"), ("inputs.b", "2")])));
    assert!(!holds(&rest, &scope(&[("inputs.a", "1"), ("inputs.b", "3")])));
    let (status, rest) = split_condition("${{ contains(needs.a.result, 'succ') }}").unwrap();
    assert_eq!((status, rest.is_some()), (None, true));
}

#[test]
fn unknown_references_and_malformed_text_are_refused() {
    for bad in [
        "${{ github.workspace }}",
        "${{ needs.a.outputs }}",
        "${{ baton.secret }}",
        "${{ inputs.x ",
        "${{ 'open }}",
        "${{ toJSON(inputs) }}",
        "${{ success() }}",
        "${{ format('{0}', always()) }}",
        "${{ hashFiles('x') }}",
    ] {
        assert!(segments(bad).is_err(), "{bad}");
    }
    assert_eq!(text_references("${{ github.token }}").unwrap(), vec![Reference::Secret("GITHUB_TOKEN".into())]);
    let refs = text_references("${{ needs.build.outputs.v }}-${{ env.A }}").unwrap();
    assert_eq!(
        refs,
        vec![Reference::NeedsOutput { job: "build".into(), name: "v".into() }, Reference::Env("A".into())]
    );
}

#[test]
fn an_actions_dialect_reads_what_the_runner_knows_and_a_workflow_cannot() {
    for runner_only in ["github.action_path", "runner.os", "steps.build.outcome", "steps.build.conclusion"] {
        let read = parse_in(runner_only, Dialect::Action);
        assert!(matches!(read, Ok(Expr::Ref(Reference::Runner(_)))), "{runner_only}: {read:?}");
        assert!(parse(runner_only).unwrap_err().contains("unknown reference"), "a workflow cannot read {runner_only}");
    }
    for workflow_only in ["needs.a.result", "matrix.os", "secrets.TOKEN", "baton.run_id"] {
        let refused = parse_in(workflow_only, Dialect::Action).unwrap_err();
        assert!(refused.contains("an action's expressions read"), "{workflow_only}: {refused}");
    }
    assert_eq!(parse_in("inputs.x", Dialect::Action), Ok(Expr::Ref(Reference::Input("x".into()))));
}

/// A scope that knows the status functions' values, as a runner does.
struct Failed;

impl Scope for Failed {
    fn resolve(&self, _: &Reference) -> Option<String> {
        Some("yes".into())
    }

    fn status(&self, function: &str) -> Option<bool> {
        Some(function == "failure" || function == "always")
    }
}

#[test]
fn a_condition_with_no_status_function_means_success_and_it() {
    assert!(!condition_holds("inputs.x == 'yes'", Dialect::Action, &Failed).unwrap(), "an earlier step failed");
    assert!(condition_holds("${{ failure() && inputs.x == 'yes' }}", Dialect::Action, &Failed).unwrap());
    assert!(condition_holds("!cancelled()", Dialect::Action, &Failed).unwrap());
    assert!(condition_holds("always()", Dialect::Action, &MapScope::default()).unwrap(), "unknown status: true");
}

#[test]
fn a_steps_dialect_reads_the_workflows_contexts_and_what_the_runner_knows() {
    for (text, reference) in [
        ("steps.build.outcome", Reference::Runner(vec!["steps".into(), "build".into(), "outcome".into()])),
        ("Steps.build.Conclusion", Reference::Runner(vec!["steps".into(), "build".into(), "conclusion".into()])),
        ("github.ref", Reference::Github(vec!["ref".into()])),
        (
            "github.event.pull_request.draft",
            Reference::Github(vec!["event".into(), "pull_request".into(), "draft".into()]),
        ),
        ("github.workspace", Reference::Runner(vec!["github".into(), "workspace".into()])),
        ("runner.os", Reference::Runner(vec!["runner".into(), "os".into()])),
        ("steps.a.outputs.x", Reference::StepOutput { step: "a".into(), name: "x".into() }),
        ("needs.a.result", Reference::NeedsResult { job: "a".into() }),
        ("matrix.os", Reference::Matrix("os".into())),
        ("inputs.x", Reference::Input("x".into())),
        ("vars.deploy_Target", Reference::Var("DEPLOY_TARGET".into())),
        ("baton.run_id", Reference::Baton(BatonField::RunId)),
    ] {
        assert_eq!(parse_in(text, Dialect::Step), Ok(Expr::Ref(reference)), "{text}");
    }
    let unknown = parse_in("sponge.x", Dialect::Step).unwrap_err();
    assert!(unknown.contains("unknown reference sponge.x") && unknown.contains("github.<name>"), "{unknown}");
    assert_eq!(
        condition_references("${{ !cancelled() && steps.a.outcome == 'failure' || matrix.os }}", Dialect::Step),
        Ok(vec![Reference::Runner(vec!["steps".into(), "a".into(), "outcome".into()]), Reference::Matrix("os".into())])
    );
    // A status function anywhere, negated too: the runner knows them all.
    assert!(condition_holds("inputs.x == 'yes' && (failure() || !cancelled())", Dialect::Step, &Failed).unwrap());
    assert!(!condition_holds("inputs.x == 'yes'", Dialect::Step, &Failed).unwrap(), "success() && it");
}
