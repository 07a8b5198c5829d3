//! The OpenAPI 3.1 document of the HTTP API, generated from the very types
//! the server and its clients (de)serialise, so it cannot drift from them.
//! Each route is one annotated item below, named by what it does; its
//! method and path must be a route of `infra/resources.json` and every route
//! there must be here (a test in `baton-service` holds the two together).
//!
//! The document is served at `GET /v1/openapi.json` and committed as
//! `api/openapi.json`; `cargo test -p baton-api` fails when the committed
//! copy is stale, and `BATON_BLESS_OPENAPI=1 cargo test -p baton-api
//! openapi` rewrites it. The dev host checks every answer its functions give
//! against this document (status and body), so the whole test suite is a
//! contract test.

// The items below exist only to carry each route's description: nothing
// calls them.
#![allow(dead_code)]

use utoipa::openapi::path::Operation;
use utoipa::openapi::response::{ResponseBuilder, Responses};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, HeaderBuilder, ObjectBuilder, OpenApi as Document, Ref, RefOr, Type};
use utoipa::{Modify, OpenApi};

use crate::error::{ErrorBody, ErrorCode, ErrorDetail};
use crate::facts::{JobOutcome, StepResult, StepSpec};
use crate::health::{Checks, Health};
use crate::logs::{LogChunkRequest, LogLine, LogPage, LogStream, LogUpload, LogUploadRequest, LogUploadResponse};
use crate::provisioners::*;
use crate::runners::*;
use crate::runs::*;
use crate::status::{ExecutionStatus, JobStatus, RunStatus, StatusReason, StepStatus};

/// Security scheme names (the routes below spell them out, as the `path`
/// attribute takes literals): the token kinds of api.md, each a bearer
/// token whose prefix tells its kind.
pub const OPERATOR: &str = "operator";
pub const REGISTRATION: &str = "registration";
pub const SESSION: &str = "session";
pub const LEASE: &str = "lease";
pub const PROVISIONER: &str = "provisioner";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Baton HTTP API",
        version = "1",
        description = "Runners pull jobs under leases kept alive by heartbeats; operators create, follow, cancel and rerun runs. JSON bodies with snake_case fields, RFC 3339 UTC timestamps, UUID ids. Every error is `{\"error\": {\"code\", \"message\"}}` with a stable kebab-case code; unknown fields are ignored; a body over 1 MiB or anything but a JSON object is 400 `invalid-request` and writes nothing. Limits: docs/limits.md."
    ),
    paths(
        get_health,
        get_openapi,
        create_registration_token,
        list_registration_tokens,
        revoke_registration_token,
        put_secret,
        list_secrets,
        delete_secret,
        put_variable,
        list_variables,
        delete_variable,
        register_runner,
        claim_job,
        heartbeat_lease,
        report_step,
        complete_job,
        log_upload_urls,
        begin_artifact_upload,
        complete_artifact_upload,
        runner_artifact_download,
        runner_artifact_list,
        restore_cache,
        save_cache,
        complete_cache,
        create_run,
        put_pipeline,
        list_pipelines,
        get_pipeline,
        delete_pipeline,
        dispatch_pipeline,
        create_hook,
        list_hooks,
        rotate_hook_secret,
        delete_hook,
        deliver_to_hook,
        list_runs,
        get_run,
        read_job_logs,
        list_run_artifacts,
        operator_artifact_download,
        cancel_run,
        decide_approval,
        deliver_event,
        rerun_run,
        create_provisioner,
        list_provisioners,
        read_provisioner_fleet,
        remove_provisioner,
        read_demand,
        reserve_instances,
        report_instances,
        list_instances,
    ),
    components(schemas(
        ErrorBody, ErrorDetail, ErrorCode, Health, Checks, RunStatus, JobStatus, ExecutionStatus, StepStatus,
        StatusReason, JobOutcome, StepSpec, StepResult, LogLine, LogStream, LogChunkRequest, LogUpload
    )),
    modifiers(&CommonAnswers),
    tags(
        (name = "meta", description = "Health and this document"),
        (name = "operators", description = "Registration tokens and runs, with an operator API token (`bat_`)"),
        (name = "runners", description = "Registration, claims and leases, as a runner agent uses them"),
        (name = "hooks", description = "Forges' webhook deliveries, verified by their signatures"),
        (name = "provisioners", description = "Elastic fleets: demand, reservations and instances, with a provisioner token (`bpt_`)"),
    )
)]
pub struct BatonApi;

/// The document, as served and committed.
pub fn document() -> Document {
    BatonApi::openapi()
}

/// The document as pretty JSON with a final newline (the committed file).
pub fn document_json() -> String {
    let mut json = document().to_pretty_json().unwrap_or_default();
    json.push('\n');
    json
}

/// The answers every route can give besides its own, added once here rather
/// than on each route: a route that takes a token can answer 400
/// `invalid-request` (a malformed body, path or query) and 401
/// `unauthenticated`; any route that reads the store can answer 503
/// `unavailable` (contention or throttling that outlasted the retries; it
/// carries `Retry-After`) and 500 `internal`. Also declares the token kinds.
struct CommonAnswers;

impl Modify for CommonAnswers {
    fn modify(&self, openapi: &mut Document) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for (name, prefix, what) in [
            (OPERATOR, "bat_", "An operator API token, scoped to one workspace or admin."),
            (REGISTRATION, "brt_", "A registration token, created by an operator for runners to register with."),
            (SESSION, "bst_", "A runner's session token, answered by register; short-lived."),
            (LEASE, "blt_", "A lease token, answered by a claim; valid for that one job execution."),
            (PROVISIONER, "bpt_", "A provisioner token, answered once when an operator creates the provisioner."),
        ] {
            let scheme = HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(format!("{what} Its prefix is `{prefix}`.")))
                .build();
            components.add_security_scheme(name, SecurityScheme::Http(scheme));
        }
        for item in openapi.paths.paths.values_mut() {
            // Every method a route of this API uses (a PUT, the secrets', once went without).
            let methods = [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete];
            for operation in methods.into_iter().flatten() {
                add_common_answers(operation);
            }
        }
    }
}

fn add_common_answers(operation: &mut Operation) {
    let authenticated = operation.security.as_ref().is_some_and(|s| !s.is_empty());
    let responses: &mut Responses = &mut operation.responses;
    let mut add = |status: &str, description: &str, retry_after: bool| {
        if responses.responses.contains_key(status) {
            return;
        }
        let content = ContentBuilder::new().schema(Some(RefOr::Ref(Ref::from_schema_name("ErrorBody")))).build();
        let mut response = ResponseBuilder::new().description(description).content("application/json", content);
        if retry_after {
            let header = HeaderBuilder::new()
                .schema(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(0)))
                .description(Some("Seconds to wait before retrying".to_string()))
                .build();
            response = response.header("Retry-After", header);
        }
        responses.responses.insert(status.to_string(), RefOr::T(response.build()));
    };
    if authenticated {
        add("400", "`invalid-request`: a malformed body, path or query parameter", false);
        add("401", "`unauthenticated`: a missing, unknown, expired or wrong-kind token", false);
    }
    add("500", "`internal`: a bug; nothing the client sent", false);
    add("503", "`unavailable`: the store is busy; retry after `Retry-After` seconds", true);
}

/// Every backend reachable: 200; otherwise 503 with the same document, the
/// failing check naming its error.
#[utoipa::path(get, path = "/v1/health", tag = "meta", responses(
    (status = 200, description = "Every backend is reachable", body = Health),
    (status = 503, description = "A backend is not reachable; its check names the error", body = Health),
))]
fn get_health() {}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "meta", responses(
    (status = 200, description = "The OpenAPI 3.1 document of this API", content_type = "application/json", body = Object),
))]
fn get_openapi() {}

/// Creates a registration token; the token is shown only in this answer.
#[utoipa::path(post, path = "/v1/workspaces/{ws}/registration-tokens", tag = "operators",
    params(WorkspaceParam),
    request_body = CreateRegistrationToken,
    responses(
        (status = 201, description = "Created; `token` is shown once", body = CreatedRegistrationToken),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn create_registration_token() {}

/// The workspace's registration tokens, without their secrets.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/registration-tokens", tag = "operators",
    params(WorkspaceParam),
    responses(
        (status = 200, description = "The tokens", body = RegistrationTokenList),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn list_registration_tokens() {}

/// Revokes a registration token: it registers no runner from now on.
#[utoipa::path(delete, path = "/v1/workspaces/{ws}/registration-tokens/{id}", tag = "operators",
    params(WorkspaceParam, ("id" = uuid::Uuid, Path, description = "The registration token's id")),
    responses(
        (status = 204, description = "Revoked (again, if it already was)"),
        (status = 404, description = "`not-found`: no such token in the workspace", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn revoke_registration_token() {}

/// Sets (or replaces) a workspace secret, read by jobs as
/// `${{ secrets.NAME }}` when they are claimed. No route answers a value.
#[utoipa::path(put, path = "/v1/workspaces/{ws}/secrets/{name}", tag = "operators",
    params(WorkspaceParam, ("name" = String, Path, description = "A letter or `_`, then letters, digits and `_` (at most 128)")),
    request_body = crate::secrets::PutSecretRequest,
    responses(
        (status = 204, description = "Set"),
        (status = 400, description = "`invalid-request`: a bad name, or a value empty or over 4,096 bytes", body = ErrorBody),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn put_secret() {}

/// The workspace's secrets: names and when each was set, never values.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/secrets", tag = "operators",
    params(WorkspaceParam),
    responses(
        (status = 200, description = "The secrets, by name", body = crate::secrets::SecretList),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn list_secrets() {}

/// Deletes a workspace secret; jobs that name it fail when claimed, saying so.
#[utoipa::path(delete, path = "/v1/workspaces/{ws}/secrets/{name}", tag = "operators",
    params(WorkspaceParam, ("name" = String, Path, description = "The secret's name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not-found`: no such secret in the workspace", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn delete_secret() {}

/// Sets (or replaces) a workspace variable, read by workflows as
/// `${{ vars.NAME }}`; a run reads the value it had when it was created.
#[utoipa::path(put, path = "/v1/workspaces/{ws}/variables/{name}", tag = "operators",
    params(WorkspaceParam, ("name" = String, Path, description = "A letter or `_`, then letters, digits and `_` (at most 100), not `GITHUB_…`; case-insensitive")),
    request_body = crate::variables::PutVariableRequest,
    responses(
        (status = 200, description = "Set: the variable as stored (its name upper-cased)", body = crate::variables::Variable),
        (status = 400, description = "`invalid-request`: a bad name, a value over 48 KiB, or a 501st variable", body = ErrorBody),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn put_variable() {}

/// The workspace's variables, with their values, by name.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/variables", tag = "operators",
    params(WorkspaceParam),
    responses(
        (status = 200, description = "The variables, by name", body = crate::variables::VariableList),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn list_variables() {}

/// Deletes a workspace variable; runs created after read it as empty.
#[utoipa::path(delete, path = "/v1/workspaces/{ws}/variables/{name}", tag = "operators",
    params(WorkspaceParam, ("name" = String, Path, description = "The variable's name (any case)")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not-found`: no such variable in the workspace", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn delete_variable() {}

/// Registers a provisioner; its token is shown only in this answer.
#[utoipa::path(post, path = "/v1/workspaces/{ws}/provisioners", tag = "operators",
    params(WorkspaceParam),
    request_body = CreateProvisioner,
    responses(
        (status = 201, description = "Created; `token` is shown once", body = CreatedProvisioner),
        (status = 200, description = "The provisioner an earlier create with the same `idempotency_key` made, with a new token (the earlier one stops working)", body = CreatedProvisioner),
        (status = 400, description = "`invalid-request` naming the field, or `invalid-labels`", body = ErrorBody),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
        (status = 409, description = "`idempotency-conflict`: the key made a provisioner with other settings, or one removed since", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn create_provisioner() {}

/// The workspace's provisioners (removed ones are not listed), without tokens.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/provisioners", tag = "operators",
    params(WorkspaceParam),
    responses(
        (status = 200, description = "The provisioners", body = ProvisionerList),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn list_provisioners() {}

/// A provisioner's fleet for people: each served label set's queued,
/// reserved and running jobs, idle runners and oldest queued job, and its
/// live instances with their terminate intents. Read only: it decides and
/// writes nothing.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/provisioners/{id}", tag = "operators",
    params(WorkspaceParam, ("id" = uuid::Uuid, Path, description = "The provisioner's id")),
    responses(
        (status = 200, description = "The fleet", body = ProvisionerFleet),
        (status = 404, description = "`not-found`: no such provisioner in the workspace", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn read_provisioner_fleet() {}

/// Removes a provisioner: its token stops working at once, its live
/// instances get `provisioner-removed` intents, its reservations are released.
#[utoipa::path(delete, path = "/v1/workspaces/{ws}/provisioners/{id}", tag = "operators",
    params(WorkspaceParam, ("id" = uuid::Uuid, Path, description = "The provisioner's id")),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "`not-found`: no such provisioner in the workspace", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn remove_provisioner() {}

/// The demand of each label set the provisioner serves; a long poll that
/// answers as soon as `version` differs from `since`, or at `wait_s`.
#[utoipa::path(get, path = "/v1/provisioners/demand", tag = "provisioners",
    params(
        ("wait_s" = Option<u32>, Query, description = "How long to wait for a change, 0 to 20 (default 0)"),
        ("since" = Option<String>, Query, description = "The `version` of the last answer"),
    ),
    responses((status = 200, description = "The demand", body = Demand)),
    security(("provisioner" = [])))]
fn read_demand() {}

/// Reserves instances for one of the provisioner's label sets, each with an
/// ephemeral registration token; fewer than asked (possibly none) when
/// demand or `max_instances` does not allow more.
#[utoipa::path(post, path = "/v1/provisioners/reservations", tag = "provisioners",
    request_body = ReserveRequest,
    responses(
        (status = 201, description = "The reservations made; each token is shown once", body = Reserved),
        (status = 400, description = "`invalid-request` (`count`, `expires_in_s`) or `invalid-labels` (not a served set)", body = ErrorBody),
    ),
    security(("provisioner" = [])))]
fn reserve_instances() {}

/// Reports instances' states (at most 100 events); states only move forward.
#[utoipa::path(post, path = "/v1/provisioners/instances", tag = "provisioners",
    request_body = InstanceReport,
    responses((status = 200, description = "What the report changed", body = InstanceReportAnswer)),
    security(("provisioner" = [])))]
fn report_instances() {}

/// The provisioner's instances with Baton's terminate intents, by
/// `provider_runner_id`, a page at a time.
#[utoipa::path(get, path = "/v1/provisioners/instances", tag = "provisioners",
    params(
        ("intent" = Option<String>, Query, description = "`terminate`: only live instances Baton asks to go"),
        ("limit" = Option<u32>, Query, description = "Instances a page: 1 to 1,000 (the default)"),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of the instances; `next_cursor` unless it is the last", body = InstanceList),
        (status = 400, description = "`invalid-request`: a limit out of range, a cursor this route did not give", body = ErrorBody),
    ),
    security(("provisioner" = [])))]
fn list_instances() {}

/// Opens a runner session with its labels.
#[utoipa::path(post, path = "/v1/runners/register", tag = "runners",
    request_body = RegisterRequest,
    responses(
        (status = 201, description = "A session", body = RegisterResponse),
        (status = 400, description = "`invalid-labels` or `invalid-request`", body = ErrorBody),
        (status = 409, description = "`registration-token-consumed`: a single-use token already registered a runner", body = ErrorBody),
    ),
    security(("registration" = [])))]
fn register_runner() {}

/// Claims the oldest job the session's labels fit, waiting up to `wait_s`
/// for one. A retry with the same `request_id` answers the same job.
#[utoipa::path(post, path = "/v1/runners/claim", tag = "runners",
    request_body = ClaimRequest,
    responses(
        (status = 200, description = "A job under a fresh lease", body = ClaimResponse),
        (status = 204, description = "No job within `wait_s`"),
        (status = 409, description = "`session-exhausted`: the session used every claim its registration token allows", body = ErrorBody),
    ),
    security(("session" = [])))]
fn claim_job() {}

/// Keeps a lease alive; `cancel: true` asks the runner to stop the job.
#[utoipa::path(post, path = "/v1/runners/leases/{execution_id}/heartbeat", tag = "runners",
    params(ExecutionParam),
    responses(
        (status = 200, description = "The lease, extended", body = HeartbeatResponse),
        (status = 404, description = "`not-found`: no such lease for this token", body = ErrorBody),
        (status = 409, description = "`lease-lost`: stop the job, do not report, claim again", body = ErrorBody),
    ),
    security(("lease" = [])))]
fn heartbeat_lease() {}

/// Reports one step's progress while the job runs. The report that makes
/// the last step terminal settles the job (`settled` in the answer; its
/// `outputs` are the job's): the lease ends, no complete is needed.
#[utoipa::path(post, path = "/v1/runners/leases/{execution_id}/steps/{step_id}", tag = "runners",
    params(ExecutionParam, ("step_id" = uuid::Uuid, Path, description = "The step's id, from the claim")),
    request_body = StepReport,
    responses(
        (status = 200, description = "Recorded", body = StepAnswer),
        (status = 404, description = "`not-found`: no such lease or step", body = ErrorBody),
        (status = 409, description = "`lease-lost`", body = ErrorBody),
    ),
    security(("lease" = [])))]
fn report_step() {}

/// Reports the job's outcome; a repeat answers the recorded outcome again.
#[utoipa::path(post, path = "/v1/runners/leases/{execution_id}/complete", tag = "runners",
    params(ExecutionParam),
    request_body = CompleteRequest,
    responses(
        (status = 200, description = "The recorded outcome", body = CompleteResponse),
        (status = 404, description = "`not-found`: no such lease for this token", body = ErrorBody),
        (status = 409, description = "`lease-lost`", body = ErrorBody),
    ),
    security(("lease" = [])))]
fn complete_job() {}

/// Presigned `PUT` URLs for numbered chunks of the job's log (JSON lines),
/// each bound to its exact size and to an object not stored yet (a stored
/// chunk is never replaced), valid no longer than the lease; the bytes
/// count against the job's log cap, once per chunk number.
#[utoipa::path(post, path = "/v1/runners/leases/{execution_id}/logs", tag = "runners",
    params(ExecutionParam),
    request_body = LogUploadRequest,
    responses(
        (status = 200, description = "One upload per chunk", body = LogUploadResponse),
        (status = 400, description = "`invalid-request`: a chunk's number or size out of range, a number twice, the log's cap reached; nothing is charged", body = ErrorBody),
        (status = 404, description = "`not-found`: no such lease for this token", body = ErrorBody),
        (status = 409, description = "`lease-lost`", body = ErrorBody),
    ),
    security(("lease" = [])))]
fn log_upload_urls() {}

/// Begins (or resumes) the upload of an artifact: the archive's bytes are
/// charged to the job's and the run's caps, and the answer holds one
/// presigned `PUT` per part (16 MiB each but the last), each bound to its
/// exact size and valid no longer than the lease. Asking again with the
/// same name, size and digest gives fresh URLs and charges nothing twice.
#[utoipa::path(post, path = "/v1/runners/leases/{execution_id}/artifacts", tag = "runners",
    params(ExecutionParam),
    request_body = crate::artifacts::ArtifactUploadRequest,
    responses(
        (status = 200, description = "The parts' URLs (or `stored: true`)", body = crate::artifacts::ArtifactUploadResponse),
        (status = 400, description = "`invalid-request`: a bad name, an empty archive, a digest that is not SHA-256 hex", body = ErrorBody),
        (status = 404, description = "`not-found`: no such lease for this token", body = ErrorBody),
        (status = 409, description = "`lease-lost`; `artifact-exists`: another job of the run stored that name, or this job is storing another archive under it", body = ErrorBody),
        (status = 413, description = "`artifact-cap`: the job's (bytes or 20 artifacts) or the run's cap would be passed; nothing is charged", body = ErrorBody),
    ),
    security(("lease" = [])))]
fn begin_artifact_upload() {}

/// Every part is sent: S3 assembles the archive and the artifact is stored,
/// only while the lease is held (parts sent after it ended never become an
/// artifact). A repeat answers the stored artifact.
#[utoipa::path(post, path = "/v1/runners/leases/{execution_id}/artifacts/{name}/complete", tag = "runners",
    params(ExecutionParam, ("name" = String, Path, description = "The artifact's name")),
    request_body = crate::artifacts::ArtifactCompleteRequest,
    responses(
        (status = 200, description = "Stored", body = crate::artifacts::Artifact),
        (status = 400, description = "`invalid-request`: a part missing, twice or out of order, or S3 refused the parts", body = ErrorBody),
        (status = 404, description = "`not-found`: no upload of that name by this job, or no such lease", body = ErrorBody),
        (status = 409, description = "`lease-lost`", body = ErrorBody),
    ),
    security(("lease" = [])))]
fn complete_artifact_upload() {}

/// A presigned `GET` (15 minutes) of one of the run's stored artifacts, a
/// gzipped tar, for a later job (`download:`).
#[utoipa::path(get, path = "/v1/runners/leases/{execution_id}/artifacts/{name}", tag = "runners",
    params(ExecutionParam, ("name" = String, Path, description = "The artifact's name")),
    responses(
        (status = 200, description = "The artifact and its URL", body = crate::artifacts::ArtifactDownload),
        (status = 404, description = "`not-found`: no stored artifact of that name in the run, or no such lease", body = ErrorBody),
        (status = 409, description = "`lease-lost`", body = ErrorBody),
    ),
    security(("lease" = [])))]
fn runner_artifact_download() {}

/// The run's stored artifacts, for a job holding its lease (a download of
/// several, as GitHub's `actions/download-artifact` without a name or by
/// `pattern`).
#[utoipa::path(get, path = "/v1/runners/leases/{execution_id}/artifacts", tag = "runners",
    params(ExecutionParam),
    responses(
        (status = 200, description = "The run's stored artifacts", body = crate::artifacts::ArtifactList),
        (status = 404, description = "`not-found`: no such lease", body = ErrorBody),
        (status = 409, description = "`lease-lost`", body = ErrorBody),
    ),
    security(("lease" = [])))]
fn runner_artifact_list() {}

/// Restores a cache entry of the lease's workspace: the exact key, else the
/// newest entry under each restore prefix in turn, in `scope` then the
/// workspace-wide scope; a presigned `GET` (15 minutes) of its archive.
#[utoipa::path(post, path = "/v1/runners/leases/{execution_id}/caches/restore", tag = "runners",
    params(ExecutionParam),
    request_body = crate::caches::CacheRestoreRequest,
    responses(
        (status = 200, description = "`exact`, `prefix` (with the entry and its URL) or `miss`", body = crate::caches::CacheRestoreResponse),
        (status = 400, description = "`invalid-request`: a key, prefix or scope that is not 1 to 256 printable characters without spaces or commas; more than 10 prefixes", body = ErrorBody),
        (status = 404, description = "`not-found`: no such lease for this token", body = ErrorBody),
        (status = 409, description = "`lease-lost`", body = ErrorBody),
    ),
    security(("lease" = [])))]
fn restore_cache() {}

/// Saves a cache entry: parts' URLs as for an artifact, or `stored: true`
/// when the key is saved already (an entry is never replaced before it is
/// evicted, 7 days after it was saved).
#[utoipa::path(post, path = "/v1/runners/leases/{execution_id}/caches", tag = "runners",
    params(ExecutionParam),
    request_body = crate::caches::CacheSaveRequest,
    responses(
        (status = 200, description = "The parts' URLs (or `stored: true`)", body = crate::artifacts::ArtifactUploadResponse),
        (status = 400, description = "`invalid-request`: a bad key or scope, a digest that is not SHA-256 hex", body = ErrorBody),
        (status = 404, description = "`not-found`: no such lease for this token", body = ErrorBody),
        (status = 409, description = "`lease-lost`; `artifact-exists`: another job is saving that key now", body = ErrorBody),
        (status = 413, description = "`artifact-cap`: an entry over 2 GiB (`BATON_CACHE_ENTRY_CAP_BYTES`), or empty", body = ErrorBody),
    ),
    security(("lease" = [])))]
fn save_cache() {}

/// Every part of a save is sent: the entry is stored, only while the lease
/// is held. A repeat answers the stored entry.
#[utoipa::path(post, path = "/v1/runners/leases/{execution_id}/caches/complete", tag = "runners",
    params(ExecutionParam),
    request_body = crate::caches::CacheCompleteRequest,
    responses(
        (status = 200, description = "Stored", body = crate::caches::CacheEntry),
        (status = 400, description = "`invalid-request`: a part missing, twice or out of order, or S3 refused the parts", body = ErrorBody),
        (status = 404, description = "`not-found`: no save of that key by this job, or no such lease", body = ErrorBody),
        (status = 409, description = "`lease-lost`", body = ErrorBody),
    ),
    security(("lease" = [])))]
fn complete_cache() {}

/// A run's artifacts, by name (also in the run view), `uploading` ones too.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/runs/{run_id}/artifacts", tag = "operators",
    params(WorkspaceParam, RunParam),
    responses(
        (status = 200, description = "The artifacts", body = crate::artifacts::ArtifactList),
        (status = 404, description = "`not-found`: no such run in the workspace", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn list_run_artifacts() {}

/// A presigned `GET` (15 minutes) of a stored artifact of the run.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/runs/{run_id}/artifacts/{name}", tag = "operators",
    params(WorkspaceParam, RunParam, ("name" = String, Path, description = "The artifact's name")),
    responses(
        (status = 200, description = "The artifact and its URL", body = crate::artifacts::ArtifactDownload),
        (status = 404, description = "`not-found`: no stored artifact of that name in the run", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn operator_artifact_download() {}

/// A job's log lines from `cursor` on, in order; `wait_s` waits for new
/// lines of a job still running (follow). A read answers at most 1000
/// lines and 1 MiB of them (a longer line comes alone, cut, with a note),
/// and after a few seconds of reading answers what it has: read on from
/// `next_cursor` until `complete`.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/logs", tag = "operators",
    params(
        WorkspaceParam,
        RunParam,
        ("job_id" = uuid::Uuid, Path, description = "The job's id (run view `jobs[].id`)"),
        ("attempt" = Option<u32>, Query, description = "The attempt (default: the current one)"),
        ("execution" = Option<uuid::Uuid>, Query, description = "One execution of the job (a try under `retry:`; default: its latest)"),
        ("step" = Option<uuid::Uuid>, Query, description = "Only this step's lines"),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous read"),
        ("wait_s" = Option<u32>, Query, description = "Wait up to this long (0 to 20 s) for lines of a running job"),
    ),
    responses(
        (status = 200, description = "Lines, and where to read on", body = LogPage),
        (status = 404, description = "`not-found`: no such run, attempt or job", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn read_job_logs() {}

/// Creates a run of a workflow definition (YAML).
#[utoipa::path(post, path = "/v1/workspaces/{ws}/runs", tag = "operators",
    params(WorkspaceParam),
    request_body = CreateRunRequest,
    responses(
        (status = 201, description = "The new run", body = RunView),
        (status = 200, description = "The run an earlier request with the same `idempotency_key` created", body = RunView),
        (status = 400, description = "`invalid-definition` (naming the job and field) or `invalid-request`", body = ErrorBody),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
        (status = 409, description = "`too-many-label-sets`: the workspace has queued work for too many label sets already", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn create_run() {}

/// Stores a workflow definition as the named pipeline (a new one, or a new
/// version); its `on:` says when it runs by itself. The same text again
/// changes nothing.
#[utoipa::path(put, path = "/v1/workspaces/{ws}/pipelines/{name}", tag = "operators",
    params(WorkspaceParam, ("name" = String, Path, description = "The pipeline's name (the workspace id's pattern)")),
    request_body = crate::pipelines::PutPipelineRequest,
    responses(
        (status = 201, description = "A new pipeline", body = crate::pipelines::PipelineSummary),
        (status = 200, description = "A new version, or the same text again (nothing written)", body = crate::pipelines::PipelineSummary),
        (status = 400, description = "`invalid-definition`, naming the job and field (`on.…` included), or `invalid-request`", body = ErrorBody),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn put_pipeline() {}

/// The workspace's pipelines, by name, with their triggers.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/pipelines", tag = "operators",
    params(WorkspaceParam),
    responses(
        (status = 200, description = "The pipelines", body = crate::pipelines::PipelineList),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn list_pipelines() {}

/// One pipeline, with its definition's text.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/pipelines/{name}", tag = "operators",
    params(WorkspaceParam, ("name" = String, Path, description = "The pipeline's name")),
    responses(
        (status = 200, description = "The pipeline", body = crate::pipelines::Pipeline),
        (status = 404, description = "`not-found`: no such pipeline in the workspace", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn get_pipeline() {}

/// Deletes a pipeline; the runs it started keep their own copy of it.
#[utoipa::path(delete, path = "/v1/workspaces/{ws}/pipelines/{name}", tag = "operators",
    params(WorkspaceParam, ("name" = String, Path, description = "The pipeline's name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not-found`: no such pipeline in the workspace", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn delete_pipeline() {}

/// Runs a pipeline now (a dispatch), its inputs typed by the pipeline's
/// `on.workflow_dispatch.inputs` where it declares them.
#[utoipa::path(post, path = "/v1/workspaces/{ws}/pipelines/{name}/runs", tag = "operators",
    params(WorkspaceParam, ("name" = String, Path, description = "The pipeline's name")),
    request_body = crate::pipelines::DispatchRequest,
    responses(
        (status = 201, description = "The new run, its `trigger` a dispatch and its `pipeline` the version it runs", body = RunView),
        (status = 400, description = "`invalid-inputs` naming the input, `invalid-definition` or `invalid-request`", body = ErrorBody),
        (status = 404, description = "`not-found`: no such pipeline in the workspace", body = ErrorBody),
        (status = 409, description = "`too-many-label-sets`: the workspace has queued work for too many label sets already", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn dispatch_pipeline() {}

/// Creates a webhook for one forge: the URL to give it and its secret,
/// shown this once (kept in the secret store, never answered again).
#[utoipa::path(post, path = "/v1/workspaces/{ws}/hooks", tag = "operators",
    params(WorkspaceParam),
    request_body = crate::hooks::CreateHookRequest,
    responses(
        (status = 201, description = "The new hook, its URL and secret", body = crate::hooks::HookCreated),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn create_hook() {}

/// The workspace's hooks, oldest first, never their secrets.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/hooks", tag = "operators",
    params(WorkspaceParam),
    responses(
        (status = 200, description = "The hooks", body = crate::hooks::HookList),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn list_hooks() {}

/// A new secret for a hook, shown this once; the old one keeps verifying
/// deliveries for 24 hours, while the forge's settings are changed.
#[utoipa::path(post, path = "/v1/workspaces/{ws}/hooks/{id}/rotate", tag = "operators",
    params(WorkspaceParam, ("id" = uuid::Uuid, Path, description = "The hook's id")),
    responses(
        (status = 200, description = "The new secret", body = crate::hooks::HookSecretRotated),
        (status = 404, description = "`not-found`: no such hook in the workspace", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn rotate_hook_secret() {}

/// Deletes a hook and its secret; its deliveries are refused from then on.
#[utoipa::path(delete, path = "/v1/workspaces/{ws}/hooks/{id}", tag = "operators",
    params(WorkspaceParam, ("id" = uuid::Uuid, Path, description = "The hook's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not-found`: no such hook in the workspace", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn delete_hook() {}

/// A forge's delivery, verified by the hook's provider's signature before
/// anything of it is read or stored: GitHub `X-Hub-Signature-256`, GitLab
/// `X-Gitlab-Token`, generic `X-Baton-Signature: t=<unix s>,v1=<hex
/// HMAC-SHA256 of "t.body">` (within 300 s of now). Each of the hook's
/// pipelines the event starts gets one run; a redelivery (same
/// `X-GitHub-Delivery`, `X-Gitlab-Event-UUID` or `X-Baton-Delivery`)
/// answers the first delivery's runs and starts nothing.
#[utoipa::path(post, path = "/v1/hooks/{id}", tag = "hooks",
    params(("id" = uuid::Uuid, Path, description = "The hook's id")),
    request_body(content = Object, description = "The forge's payload, as it sends it (JSON)", content_type = "application/json"),
    responses(
        (status = 202, description = "What the delivery started, and why the other pipelines did not", body = crate::hooks::DeliveryAnswer),
        (status = 400, description = "`invalid-request`: a verified body that is not the provider's JSON", body = ErrorBody),
        (status = 401, description = "`bad-signature`: a missing or wrong signature (nothing stored)", body = ErrorBody),
        (status = 404, description = "`not-found`: no such hook", body = ErrorBody),
        (status = 413, description = "`payload-too-large`: a body over 1 MiB", body = ErrorBody),
    ))]
fn deliver_to_hook() {}

/// The workspace's runs, newest first.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/runs", tag = "operators",
    params(
        WorkspaceParam,
        ("status" = Option<RunStatus>, Query, description = "Only runs with this status"),
        ("workflow" = Option<String>, Query, description = "Only runs of workflows whose name holds this text (case as written)"),
        ("limit" = Option<u32>, Query, description = "Runs per page (1 to 100, default 20)"),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of runs", body = RunList),
        (status = 404, description = "`not-found`: a workspace the token cannot see", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn list_runs() {}

/// One run with every attempt, job, execution and step.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/runs/{run_id}", tag = "operators",
    params(WorkspaceParam, RunParam),
    responses(
        (status = 200, description = "The run view", body = RunView),
        (status = 404, description = "`not-found`", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn get_run() {}

/// Cancels a run: queued jobs are cancelled, running ones are asked to stop.
#[utoipa::path(post, path = "/v1/workspaces/{ws}/runs/{run_id}/cancel", tag = "operators",
    params(WorkspaceParam, RunParam),
    responses(
        (status = 202, description = "Cancellation recorded; the run view", body = RunView),
        (status = 404, description = "`not-found`", body = ErrorBody),
        (status = 409, description = "`run-already-finished`", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn cancel_run() {}

/// Approves or rejects an approval job (behaviour.md §16). Each approver
/// (token name) counts once; a repeat records nothing and answers the job.
#[utoipa::path(post, path = "/v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/approval", tag = "operators",
    params(WorkspaceParam, RunParam, JobParam),
    request_body = ApprovalRequest,
    responses(
        (status = 200, description = "The decision is recorded (or was already); the job's view", body = JobView),
        (status = 400, description = "`invalid-request`: an input unknown, of the wrong type, not an option, or required and missing", body = ErrorBody),
        (status = 403, description = "`self-approval` (the run's creator) or `forbidden` (not in `from` by name or group)", body = ErrorBody),
        (status = 404, description = "`not-found`", body = ErrorBody),
        (status = 409, description = "`not-waiting`: not an approval, or not waiting (not started yet, or ended)", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn decide_approval() {}

/// Delivers an event to a listening job (behaviour.md §16): `fire` runs
/// its steps once with the event, `resolve` ends the listening. Idempotent
/// by `ref`.
#[utoipa::path(post, path = "/v1/workspaces/{ws}/runs/{run_id}/jobs/{job_id}/events", tag = "operators",
    params(WorkspaceParam, RunParam, JobParam),
    request_body = EventDelivery,
    responses(
        (status = 202, description = "Delivered: it waits its turn", body = EventDelivered),
        (status = 200, description = "Not delivered: its `ref` was delivered before, or the job ended", body = EventDelivered),
        (status = 400, description = "`invalid-request`: an event the job does not listen for, a bad `ref`, a payload over 8 KiB or not an object", body = ErrorBody),
        (status = 404, description = "`not-found`", body = ErrorBody),
        (status = 409, description = "`not-listening` (not a listening job, or its needs are not met yet) or `too-many-events`", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn deliver_event() {}

/// Starts a new attempt of a finished run: every job, or the failed ones
/// and their dependants (the others carried over).
#[utoipa::path(post, path = "/v1/workspaces/{ws}/runs/{run_id}/rerun", tag = "operators",
    params(WorkspaceParam, RunParam),
    request_body = RerunRequest,
    responses(
        (status = 201, description = "The run view with the new current attempt", body = RunView),
        (status = 404, description = "`not-found`", body = ErrorBody),
        (status = 409, description = "`run-not-terminal` or `no-failed-jobs`", body = ErrorBody),
    ),
    security(("operator" = [])))]
fn rerun_run() {}

/// `{ws}`: a workspace id.
#[derive(utoipa::IntoParams)]
#[into_params(names("ws"), parameter_in = Path)]
struct WorkspaceParam(
    /// 1 to 64 of `A-Z a-z 0-9 . _ -`, starting with a letter or digit
    #[param(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    String,
);

/// `{execution_id}`: the claimed job execution.
#[derive(utoipa::IntoParams)]
#[into_params(names("execution_id"), parameter_in = Path)]
struct ExecutionParam(
    /// The `job_execution_id` of the claim
    uuid::Uuid,
);

/// `{run_id}`: a run.
#[derive(utoipa::IntoParams)]
#[into_params(names("run_id"), parameter_in = Path)]
struct RunParam(
    /// The run's id
    uuid::Uuid,
);

/// `{job_id}`: a job of the run's current attempt.
#[derive(utoipa::IntoParams)]
#[into_params(names("job_id"), parameter_in = Path)]
struct JobParam(
    /// The job's id (`jobs[].id` in the run view)
    uuid::Uuid,
);

#[cfg(test)]
mod tests {
    use super::*;

    const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");

    /// The committed document is the generated one: a change to a type or a
    /// route shows in review as a change to `api/openapi.json`.
    #[test]
    fn the_committed_openapi_document_is_the_generated_one() {
        let generated = document_json();
        if std::env::var_os("BATON_BLESS_OPENAPI").is_some() {
            std::fs::write(COMMITTED, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(COMMITTED).unwrap_or_default();
        assert!(
            committed == generated,
            "api/openapi.json is stale: run `BATON_BLESS_OPENAPI=1 cargo test -p baton-api openapi` and commit it"
        );
    }

    #[test]
    fn the_document_is_openapi_3_1_and_every_reference_resolves() {
        let doc: serde_json::Value = serde_json::from_str(&document_json()).unwrap();
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        let text = doc.to_string();
        let mut unresolved = Vec::new();
        for piece in text.split("\"$ref\":\"").skip(1) {
            let target = &piece[..piece.find('"').unwrap()];
            let pointer = target.trim_start_matches('#');
            if doc.pointer(pointer).is_none() {
                unresolved.push(target.to_string());
            }
        }
        assert!(unresolved.is_empty(), "references to nothing: {unresolved:?}");
    }

    #[test]
    fn every_error_answer_is_the_error_document_and_authenticated_routes_declare_401() {
        let doc = document();
        for (path, item) in &doc.paths.paths {
            let methods = [
                ("get", &item.get),
                ("post", &item.post),
                ("put", &item.put),
                ("patch", &item.patch),
                ("delete", &item.delete),
            ];
            for (method, op) in methods {
                let Some(op) = op else { continue };
                let json = serde_json::to_value(&op.responses).unwrap();
                for (status, answer) in json.as_object().unwrap() {
                    let schema = &answer["content"]["application/json"]["schema"]["$ref"];
                    if status.starts_with('4') || (status.starts_with('5') && path != "/v1/health") {
                        assert_eq!(schema, "#/components/schemas/ErrorBody", "{method} {path} {status}");
                    }
                }
                // A webhook delivery carries no token but a signature, refused with 401 too.
                let authenticated =
                    op.security.as_ref().is_some_and(|s| !s.is_empty()) || path.starts_with("/v1/hooks/");
                assert_eq!(authenticated, json.get("401").is_some(), "{method} {path}");
                assert!(json.get("503").is_some(), "{method} {path}");
            }
        }
    }
}
