//! Workspace secrets (operators): `PUT` and `DELETE`
//! `/v1/workspaces/{ws}/secrets/{name}`, `GET /v1/workspaces/{ws}/secrets`.
//! Values go to SSM Parameter Store (SecureString, the stack's KMS key) and
//! are never answered, logged or written to the table: only the claim of a
//! job that names one reads it.

use baton_api::secrets::{valid_secret_name, PutSecretRequest, SecretList, MAX_SECRET_BYTES, MAX_SECRET_NAME_LEN};
use baton_domain::error::ApiError;
use baton_service::context::Context;
use baton_service::http::{
    empty_response, json_response, method_not_allowed, operator_workspace, parse_json, path_param, respond,
};
use http::{Method, StatusCode};
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    respond(route(context, req).await)
}

async fn route(context: &Context, req: Request) -> Result<Response<Body>, ApiError> {
    let workspace = operator_workspace(&context.store, &req).await?;
    match *req.method() {
        Method::PUT => {
            let name = secret_name(&req)?;
            let body: PutSecretRequest = parse_json(&req)?;
            if body.value.is_empty() || body.value.len() > MAX_SECRET_BYTES {
                return Err(ApiError::invalid_request(format!("value must be 1 to {MAX_SECRET_BYTES} bytes")));
            }
            context.secrets().put(&workspace, &name, &body.value).await?;
            // The name only: a value is never logged.
            tracing::info!(workspace_id = %workspace, secret = %name, "secret set");
            Ok(empty_response(StatusCode::NO_CONTENT))
        }
        Method::GET => {
            let items = context.secrets().list(&workspace).await?;
            Ok(json_response(StatusCode::OK, &SecretList { items }))
        }
        Method::DELETE => {
            let name = secret_name(&req)?;
            if !context.secrets().delete(&workspace, &name).await? {
                return Err(ApiError::not_found(format!("secret {name}")));
            }
            tracing::info!(workspace_id = %workspace, secret = %name, "secret deleted");
            Ok(empty_response(StatusCode::NO_CONTENT))
        }
        _ => Err(method_not_allowed()),
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
