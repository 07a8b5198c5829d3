//! Job outputs: each step may write `KEY=value` lines to the file named by
//! `$BATON_OUTPUT` (a multi-line value as `KEY<<DELIMITER`, its lines, then
//! `DELIMITER`, as GitHub Actions' `$GITHUB_OUTPUT`); the job's declared
//! outputs take their values from there and travel with the complete.

use std::collections::BTreeMap;

use baton_api::facts::OutputFrom;
use baton_api::runners::MAX_OUTPUTS_BYTES;
use uuid::Uuid;

/// What one step wrote to its output file: the last value of each key.
///
/// An error names the line and, where there is one, the output; it never
/// quotes what the step wrote, which may be a secret (a value written
/// without its `KEY=`, the lines of an unclosed multi-line value), and the
/// message reaches the run view.
pub fn parse(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut values = BTreeMap::new();
    let mut lines = text.lines().enumerate().map(|(index, line)| (index + 1, line));
    while let Some((number, line)) = lines.next() {
        if line.trim().is_empty() {
            continue;
        }
        if let Some((key, delimiter)) = line.split_once("<<") {
            if !key.contains('=') {
                let key = key.trim();
                let delimiter = delimiter.trim();
                let mut value = Vec::new();
                loop {
                    match lines.next() {
                        Some((_, l)) if l == delimiter => break,
                        Some((_, l)) => value.push(l),
                        None => {
                            return Err(format!(
                                "output `{key}` (line {number}): its multi-line value has no closing delimiter"
                            ))
                        }
                    }
                }
                values.insert(key.to_string(), value.join("\n"));
                continue;
            }
        }
        match line.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                values.insert(key.trim().to_string(), value.to_string());
            }
            Some(_) => return Err(format!("line {number}: `=` without an output name before it")),
            None => return Err(format!("line {number} is neither KEY=value nor KEY<<DELIMITER")),
        }
    }
    Ok(values)
}

/// The job's declared outputs from what its steps wrote (in step order):
/// each from its named step, or from the last step that wrote its key.
/// Over [`MAX_OUTPUTS_BYTES`] is an error the job fails with.
pub fn select(
    declared: &BTreeMap<String, OutputFrom>,
    written: &[(Uuid, BTreeMap<String, String>)],
) -> Result<BTreeMap<String, serde_json::Value>, String> {
    let mut outputs = BTreeMap::new();
    for (name, from) in declared {
        let value = written
            .iter()
            .rev()
            .filter(|(step, _)| from.step.is_none_or(|wanted| wanted == *step))
            .find_map(|(_, values)| values.get(&from.key));
        if let Some(value) = value {
            outputs.insert(name.clone(), serde_json::Value::String(value.clone()));
        }
    }
    let size = serde_json::to_string(&outputs).map_or(usize::MAX, |text| text.len());
    if size > MAX_OUTPUTS_BYTES {
        return Err(format!("the job's outputs are {size} bytes, at most {MAX_OUTPUTS_BYTES} are accepted"));
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_delimited_values_parse_and_later_ones_win() {
        let text = "version=1.0\nnotes<<EOF\nline one\nline=two\nEOF\n\nversion=1.1\nempty=\n";
        let values = parse(text).unwrap();
        assert_eq!(values["version"], "1.1");
        assert_eq!(values["notes"], "line one\nline=two");
        assert_eq!(values["empty"], "");
        assert!(parse("notes<<EOF\nnever closed").is_err());
        assert!(parse("no equals sign").is_err());
    }

    #[test]
    fn a_parse_error_names_the_line_and_output_but_never_quotes_what_was_written() {
        let secret = "hunter2-s3cret";
        for (text, names) in [
            (format!("ok=1\n{secret}\n"), "line 2"),
            (format!("ok=1\n\n={secret}\n"), "line 3"),
            (format!("ok=1\nnotes<<EOF\n{secret}\n"), "output `notes` (line 2)"),
        ] {
            let err = parse(&text).unwrap_err();
            assert!(!err.contains(secret), "{err}");
            assert!(err.contains(names), "{err} should name {names}");
        }
    }

    #[test]
    fn declared_outputs_come_from_their_step_or_the_last_writer() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let written = vec![
            (a, BTreeMap::from([("v".to_string(), "from-a".to_string())])),
            (b, BTreeMap::from([("v".to_string(), "from-b".to_string())])),
        ];
        let declared = BTreeMap::from([
            ("last".to_string(), OutputFrom { step: None, key: "v".into() }),
            ("first".to_string(), OutputFrom { step: Some(a), key: "v".into() }),
            ("missing".to_string(), OutputFrom { step: None, key: "nope".into() }),
        ]);
        let outputs = select(&declared, &written).unwrap();
        assert_eq!(outputs["last"], "from-b");
        assert_eq!(outputs["first"], "from-a");
        assert!(!outputs.contains_key("missing"));
        let huge = vec![(a, BTreeMap::from([("v".to_string(), "x".repeat(MAX_OUTPUTS_BYTES))]))];
        assert!(select(&declared, &huge).unwrap_err().contains("at most"));
    }
}
