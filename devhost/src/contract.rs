//! The API's contract, checked on every answer: each response a function
//! gives through the dev host's gateway must be one the OpenAPI document
//! (`baton_api::openapi`) declares for its route, with that status, and a
//! body its schema accepts (formats such as uuid and date-time asserted).
//! Every test that drives the API, the runner agents' traffic included, is
//! thereby a contract test. An answer that breaks it is replaced by a 500
//! naming the breach, so the test that received it fails where it stands.

use std::collections::HashMap;

use serde_json::{json, Value};

/// One validator per (method, route template, status) the document declares;
/// `None` for an answer declared without a body (204).
pub struct Contract {
    answers: HashMap<(String, String, u16), Option<jsonschema::Validator>>,
}

impl Contract {
    /// Compiles the served document's schemas once, at start-up.
    pub fn from_document() -> Result<Self, String> {
        let document = serde_json::to_value(baton_api::openapi::document()).map_err(|e| e.to_string())?;
        let components = document.get("components").cloned().unwrap_or_else(|| json!({}));
        let mut answers = HashMap::new();
        let paths = document["paths"].as_object().ok_or("the document has no paths")?;
        for (path, item) in paths {
            for (method, operation) in item.as_object().into_iter().flatten() {
                let Some(responses) = operation["responses"].as_object() else { continue };
                for (status, response) in responses {
                    let status: u16 = status.parse().map_err(|_| format!("{method} {path}: status {status}"))?;
                    let validator = match response.pointer("/content/application~1json/schema") {
                        Some(schema) => {
                            // The schema with the document's components beside it, so
                            // `#/components/schemas/...` resolves in the same root.
                            let mut root = schema.as_object().cloned().unwrap_or_default();
                            root.insert("components".into(), components.clone());
                            let validator = jsonschema::draft202012::options()
                                .should_validate_formats(true)
                                .build(&Value::Object(root))
                                .map_err(|e| format!("{method} {path} {status}: {e}"))?;
                            Some(validator)
                        }
                        None => None,
                    };
                    answers.insert((method.to_uppercase(), path.clone(), status), validator);
                }
            }
        }
        Ok(Self { answers })
    }

    /// `Ok` when the document declares this answer for the route; otherwise
    /// what is wrong with it.
    pub fn check(
        &self,
        method: &str,
        route: &str,
        status: u16,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<(), String> {
        let Some(declared) = self.answers.get(&(method.to_uppercase(), route.to_string(), status)) else {
            return Err(format!("{method} {route} answered {status}, which the document does not declare"));
        };
        match declared {
            None if body.is_empty() => Ok(()),
            None => Err(format!("{method} {route} {status} is declared without a body but has one")),
            Some(validator) => {
                if !content_type.is_some_and(|c| c.starts_with("application/json")) {
                    return Err(format!("{method} {route} {status}: content-type {content_type:?}, not JSON"));
                }
                let value: Value = serde_json::from_slice(body)
                    .map_err(|e| format!("{method} {route} {status}: the body is not JSON: {e}"))?;
                let errors: Vec<String> =
                    validator.iter_errors(&value).map(|e| format!("{e} at '{}'", e.instance_path.as_str())).collect();
                if errors.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{method} {route} {status}: {}", errors.join("; ")))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract() -> Contract {
        Contract::from_document().unwrap()
    }

    #[test]
    fn an_undeclared_status_or_a_body_off_its_schema_is_a_breach() {
        let c = contract();
        let error = br#"{"error":{"code":"lease-lost","message":"gone"}}"#;
        let heartbeat = "/v1/runners/leases/{execution_id}/heartbeat";
        assert!(c.check("POST", heartbeat, 409, Some("application/json"), error).is_ok());
        // An error code the contract does not know.
        let unknown = br#"{"error":{"code":"lease-gone","message":"gone"}}"#;
        assert!(c.check("POST", heartbeat, 409, Some("application/json"), unknown).is_err());
        // A status the route never answers.
        assert!(c.check("POST", heartbeat, 418, Some("application/json"), error).is_err());
        // A heartbeat answer missing a field, and one with a malformed date.
        let partial = br#"{"cancel":false,"heartbeat_interval_s":10}"#;
        assert!(c.check("POST", heartbeat, 200, Some("application/json"), partial).is_err());
        let bad_date = br#"{"cancel":false,"expires_at":"tomorrow","heartbeat_interval_s":10}"#;
        assert!(c.check("POST", heartbeat, 200, Some("application/json"), bad_date).is_err());
        let good = br#"{"cancel":false,"expires_at":"2026-12-03T04:00:00Z","heartbeat_interval_s":10}"#;
        assert!(c.check("POST", heartbeat, 200, Some("application/json"), good).is_ok());
        // 204 carries nothing.
        assert!(c.check("POST", "/v1/runners/claim", 204, None, b"").is_ok());
        assert!(c.check("POST", "/v1/runners/claim", 204, None, b"{}").is_err());
        // The health check's 503 is its own document, not an error.
        let health = br#"{"status":"degraded","version":"0.1.0","checks":{"dynamodb":"error: x","sqs":"ok","eventbridge":"ok","stepfunctions":"ok"}}"#;
        assert!(c.check("GET", "/v1/health", 503, Some("application/json"), health).is_ok());
    }
}
