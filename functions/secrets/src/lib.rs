//! Workspace secrets (operators): `PUT` and `DELETE`
//! `/v1/workspaces/{ws}/secrets/{name}`, `GET /v1/workspaces/{ws}/secrets`.
//! Values go to SSM Parameter Store (SecureString, the stack's KMS key) and
//! are never answered, logged or written to the table: only the claim of a
//! job that names one reads it.

use baton_api::secrets::{valid_secret_name, PutSecretRequest, SecretList, MAX_SECRET_BYTES, MAX_SECRET_NAME_LEN};
use baton_domain::error::ApiError;
use baton_service::context::Context;
use baton_service::http::{
    empty_response, json_response, parse_json, path_param, serve_operator, Answer, OperatorRoute,
};
use http::StatusCode;
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    serve_operator::<Secrets>(context, req).await
}

struct Secrets;

impl OperatorRoute for Secrets {
    async fn put(context: &Context, req: &Request, workspace: &str) -> Answer {
        let name = secret_name(req)?;
        let body: PutSecretRequest = parse_json(req)?;
        if body.value.is_empty() || body.value.len() > MAX_SECRET_BYTES {
            return Err(ApiError::invalid_request(format!("value must be 1 to {MAX_SECRET_BYTES} bytes")));
        }
        context.secrets().put(workspace, &name, &body.value).await?;
        // The name only: a value is never logged.
        tracing::info!(workspace_id = %workspace, secret = %name, "secret set");
        Ok(empty_response(StatusCode::NO_CONTENT))
    }

    async fn get(context: &Context, _: &Request, workspace: &str) -> Answer {
        let items = context.secrets().list(workspace).await?;
        Ok(json_response(StatusCode::OK, &SecretList { items }))
    }

    async fn delete(context: &Context, req: &Request, workspace: &str) -> Answer {
        let name = secret_name(req)?;
        if !context.secrets().delete(workspace, &name).await? {
            return Err(ApiError::not_found(format!("secret {name}")));
        }
        tracing::info!(workspace_id = %workspace, secret = %name, "secret deleted");
        Ok(empty_response(StatusCode::NO_CONTENT))
    }
}

/// The `{name}` of the path, checked: what `${{ secrets.NAME }}` can spell.
fn secret_name(req: &Request) -> Result<String, ApiError> {
    let name = path_param(req, "name")?;
    if !valid_secret_name(&name) {
        return Err(ApiError::invalid_request(format!(
            "invalid secret name: a letter or '_', then letters, digits and '_', at most {MAX_SECRET_NAME_LEN}"
        )));
    }
    Ok(name)
}
