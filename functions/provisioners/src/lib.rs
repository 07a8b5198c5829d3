//! Provisioners (operators): `POST`, `GET` and `DELETE` under
//! `/v1/workspaces/{ws}/provisioners` (behaviour.md §15). The `bpt_` token
//! is shown once, in the 201; only its hash is stored (a create repeated
//! with its `idempotency_key` answers the same provisioner with a new
//! token: `repeated_create`). Removing one stops
//! its token at once and asks its instances to go (`provisioner-removed`).
//! `GET …/provisioners/{id}` shows one fleet to people (the console's fleet
//! page): a read of the fleet that decides and writes nothing, so an
//! operator watching it never races the provisioner's own passes.

use baton_api::provisioners::{CreateProvisioner, CreatedProvisioner, ProvisionerFleet, ProvisionerList};
use baton_domain::error::{ApiError, ErrorCode};
use baton_domain::runners::provisioners::settings::{self, ProvisionerSettings};
use baton_service::context::Context;
use baton_service::http::{empty_response, json_response, parse_json, path_id, serve_operator, Answer, OperatorRoute};
use baton_service::usecases::run_creation::MAX_IDEMPOTENCY_KEY_LEN;
use baton_store::provisioners::{Provisioner, ProvisionerCreated};
use http::StatusCode;
use lambda_http::{Body, Request, Response};

pub async fn handle(context: &Context, req: Request) -> Response<Body> {
    serve_operator::<Provisioners>(context, req).await
}

struct Provisioners;

impl OperatorRoute for Provisioners {
    async fn post(context: &Context, req: &Request, workspace: &str) -> Answer {
        let body: CreateProvisioner = parse_json(req)?;
        let settings = settings::validate(&body)?;
        let key = body.idempotency_key.as_deref();
        if key.is_some_and(|key| key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_LEN) {
            let message = format!("idempotency_key must hold 1 to {MAX_IDEMPOTENCY_KEY_LEN} characters");
            return Err(ApiError::invalid_request(message));
        }
        let now = chrono::Utc::now();
        match context.store.create_provisioner(workspace, settings.clone(), key, now).await? {
            ProvisionerCreated::New(provisioner, token) => {
                tracing::info!(workspace_id = %workspace, provisioner_id = %provisioner.id, "provisioner created");
                let created = CreatedProvisioner { provisioner: provisioner.summary(), token };
                Ok(json_response(StatusCode::CREATED, &created))
            }
            ProvisionerCreated::Existing(provisioner) => repeated_create(context, provisioner, &settings).await,
        }
    }

    async fn get(context: &Context, req: &Request, workspace: &str) -> Answer {
        if has_id(req) {
            return fleet(context, req, workspace).await;
        }
        let items = context.store.list_provisioners(workspace).await?.iter().map(|p| p.summary()).collect();
        Ok(json_response(StatusCode::OK, &ProvisionerList { items }))
    }

    async fn delete(context: &Context, req: &Request, workspace: &str) -> Answer {
        let id = path_id(req, "id")?;
        if context.store.remove_provisioner(workspace, id, chrono::Utc::now()).await? {
            tracing::info!(workspace_id = %workspace, provisioner_id = %id, "provisioner removed");
            Ok(empty_response(StatusCode::NO_CONTENT))
        } else {
            Err(ApiError::not_found("provisioner"))
        }
    }
}

/// `GET …/provisioners/{id}`: one fleet as people see it.
async fn fleet(context: &Context, req: &Request, workspace: &str) -> Answer {
    let id = path_id(req, "id")?;
    let fleet = context
        .store
        .fleet(id)
        .await?
        // Another workspace's provisioner is no more visible than a
        // missing one; a removed one is gone for its operators too.
        .filter(|f| f.provisioner.workspace_id == workspace && f.provisioner.removed_at.is_none())
        .ok_or_else(|| ApiError::not_found("provisioner"))?;
    let label_sets = baton_service::usecases::fleet::label_set_demand(&context.store, &fleet).await?;
    let (ended, live): (Vec<_>, Vec<_>) = fleet.instance_views().into_iter().partition(|i| i.state.is_terminal());
    let moved = context.store.ended_instances(id).await?;
    Ok(json_response(
        StatusCode::OK,
        &ProvisionerFleet {
            provisioner: fleet.provisioner.summary(),
            label_sets,
            instances: live,
            ended_instances: ended.len() as u64 + moved,
        },
    ))
}

/// A create repeated with its idempotency key (its answer was lost): the
/// same provisioner. Its token was shown once and is stored hashed, so the
/// repeat answers a new one and the old one stops working: the caller that
/// lost the first answer never held it.
async fn repeated_create(context: &Context, provisioner: Provisioner, asked: &ProvisionerSettings) -> Answer {
    let conflict = |why: String| ApiError::new(ErrorCode::IdempotencyConflict, why);
    if provisioner.removed_at.is_some() {
        return Err(conflict(format!("this idempotency_key created provisioner {}, removed since", provisioner.id)));
    }
    if provisioner.settings != *asked {
        return Err(conflict(format!(
            "this idempotency_key created provisioner {} with other settings",
            provisioner.id
        )));
    }
    let token = context.store.rotate_provisioner_token(provisioner.id).await?.ok_or_else(|| {
        conflict(format!("this idempotency_key created provisioner {}, removed since", provisioner.id))
    })?;
    tracing::info!(workspace_id = %provisioner.workspace_id, provisioner_id = %provisioner.id, "provisioner create repeated: token replaced");
    Ok(json_response(StatusCode::OK, &CreatedProvisioner { provisioner: provisioner.summary(), token }))
}

fn has_id(req: &Request) -> bool {
    use lambda_http::RequestExt;
    req.path_parameters().first("id").is_some()
}
