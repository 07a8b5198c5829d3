//! Where the JSON Schemas of the facts live: `events/schemas/<detail-type>.json`
//! at the workspace root, with the pieces they share in `common.json`. They
//! are the contract with outside consumers; `tests/tests/integration/fact_schemas.rs`
//! proves every fact Baton builds conforms to its schema.
//!
//! The paths are the source tree's (compile-time), for tests and tooling; a
//! deployed function does not read them.

use std::path::PathBuf;

/// `events/schemas/` at the workspace root.
pub fn schemas_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("events").join("schemas")
}

/// The JSON Schema of the `detail` of facts of type `detail_type`.
pub fn schema_path(detail_type: &str) -> PathBuf {
    schemas_dir().join(format!("{detail_type}.json"))
}

/// The definitions every fact schema refers to (`common.json#/$defs/...`).
pub fn common_schema_path() -> PathBuf {
    schemas_dir().join("common.json")
}

/// Validates `detail` against the schema of `detail_type` (formats such as
/// uuid and date-time asserted, `common.json` resolved locally); the error
/// lists every violation with its location. For tests and tooling: it reads
/// the schemas from the source tree.
pub fn validate(detail_type: &str, detail: &serde_json::Value) -> Result<(), String> {
    let read = |path: PathBuf| -> Result<serde_json::Value, String> {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))
    };
    let common = read(common_schema_path())?;
    let common_id = common["$id"].as_str().ok_or("common.json has no $id")?.to_owned();
    let resource = jsonschema::Resource::from_contents(common).map_err(|e| e.to_string())?;
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .should_ignore_unknown_formats(false)
        .with_resource(common_id, resource)
        .build(&read(schema_path(detail_type))?)
        .map_err(|e| format!("schema of {detail_type} does not compile: {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(detail)
        .map(|e| match e.instance_path.as_str() {
            "" => e.to_string(),
            path => format!("{e} at {path}"),
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}
