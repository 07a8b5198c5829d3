//! Workspace variables (operators): `PUT` and `DELETE`
//! `/v1/workspaces/{ws}/variables/{name}`, `GET /v1/workspaces/{ws}/variables`.
//! GitHub's configuration variables: workflows read them as
//! `${{ vars.NAME }}`, and a run is created with a copy of the ones it
//! reads (`usecases::run_creation`). Not secrets: values are answered.

use baton_api::variables::{
    variable_name, PutVariableRequest, VariableList, MAX_VARIABLES, MAX_VARIABLE_BYTES, MAX_VARIABLE_NAME_LEN,
};
use baton_domain::error::ApiError;
use baton_service::context::Context;
use baton_service::http::{
    empty_response, json_response, parse_json, path_param, serve_operator, Answer, OperatorRoute,
};
use baton_store::variables::VariablePut;
use http::StatusCode;
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    serve_operator::<Variables>(context, req).await
}

struct Variables;

impl OperatorRoute for Variables {
    async fn put(context: &Context, req: &Request, workspace: &str) -> Answer {
        let name = name_of(req)?;
        let body: PutVariableRequest = parse_json(req)?;
        if body.value.len() > MAX_VARIABLE_BYTES {
            return Err(ApiError::invalid_request(format!("value: at most {MAX_VARIABLE_BYTES} bytes")));
        }
        let now = chrono::Utc::now();
        match context.store.put_variable(workspace, &name, &body.value, MAX_VARIABLES, now).await? {
            VariablePut::Set(item) => {
                tracing::info!(workspace_id = %workspace, variable = %name, "variable set");
                Ok(json_response(StatusCode::OK, &item.view()))
            }
            VariablePut::TooMany => Err(ApiError::invalid_request(format!(
                "the workspace holds {MAX_VARIABLES} variables, the most it may: delete one first"
            ))),
        }
    }

    async fn get(context: &Context, _: &Request, workspace: &str) -> Answer {
        let items = context.store.variables(workspace).await?.iter().map(|v| v.view()).collect();
        Ok(json_response(StatusCode::OK, &VariableList { items }))
    }

    async fn delete(context: &Context, req: &Request, workspace: &str) -> Answer {
        let name = name_of(req)?;
        if !context.store.delete_variable(workspace, &name).await? {
            return Err(ApiError::not_found(format!("variable {name}")));
        }
        tracing::info!(workspace_id = %workspace, variable = %name, "variable deleted");
        Ok(empty_response(StatusCode::NO_CONTENT))
    }
}

/// The `{name}` of the path, checked and upper-cased: what `vars.NAME` reads.
fn name_of(req: &Request) -> Result<String, ApiError> {
    let name = path_param(req, "name")?;
    variable_name(&name).ok_or_else(|| {
        ApiError::invalid_request(format!(
            "invalid variable name: a letter or '_', then letters, digits and '_', at most \
             {MAX_VARIABLE_NAME_LEN}, not starting with GITHUB_"
        ))
    })
}
