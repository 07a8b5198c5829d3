//! Registration tokens (operators): `POST`, `GET` and `DELETE` under
//! `/v1/workspaces/{ws}/registration-tokens`. The secret is shown once, in
//! the 201; only its hash is stored.

use baton_api::runners::{
    CreateRegistrationToken, CreatedRegistrationToken, RegistrationTokenList, RegistrationTokenSummary,
};
use baton_domain::error::ApiError;
use baton_domain::limits;
use baton_service::context::Context;
use baton_service::http::{empty_response, json_response, parse_json, path_id, serve_operator, Answer, OperatorRoute};
use http::StatusCode;
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    serve_operator::<RegistrationTokens>(context, req).await
}

struct RegistrationTokens;

impl OperatorRoute for RegistrationTokens {
    async fn post(context: &Context, req: &Request, workspace: &str) -> Answer {
        let body: CreateRegistrationToken = parse_json(req)?;
        if body.max_claims == Some(0) {
            return Err(ApiError::invalid_request("max_claims must be at least 1"));
        }
        let expires_in_s = limits::token_expiry(body.expires_in_s)?;
        if let Some(name) = &body.name {
            limits::bounded_text("name", name, limits::MAX_TOKEN_NAME_LEN)?;
        }
        let now = chrono::Utc::now();
        let (record, token) = context
            .store
            .create_registration_token(workspace, body.name, expires_in_s, body.single_use, body.max_claims, now)
            .await?;
        tracing::info!(workspace_id = %workspace, token_id = %record.id, "registration token created");
        Ok(json_response(
            StatusCode::CREATED,
            &CreatedRegistrationToken { id: record.id, token, expires_at: record.expires_at },
        ))
    }

    async fn get(context: &Context, _: &Request, workspace: &str) -> Answer {
        let items = context
            .store
            .list_registration_tokens(workspace)
            .await?
            .into_iter()
            .map(|t| RegistrationTokenSummary {
                id: t.id,
                name: t.name,
                expires_at: t.expires_at,
                single_use: t.single_use,
                max_claims: t.max_claims,
                revoked_at: t.revoked_at,
                created_at: t.created_at,
            })
            .collect();
        Ok(json_response(StatusCode::OK, &RegistrationTokenList { items }))
    }

    async fn delete(context: &Context, req: &Request, workspace: &str) -> Answer {
        let id = path_id(req, "id")?;
        if context.store.revoke_registration_token(workspace, id, chrono::Utc::now()).await? {
            tracing::info!(workspace_id = %workspace, token_id = %id, "registration token revoked");
            Ok(empty_response(StatusCode::NO_CONTENT))
        } else {
            Err(ApiError::not_found("registration token"))
        }
    }
}
