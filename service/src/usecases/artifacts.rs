//! Artifact archives in S3 (behaviour.md §17): where one is kept and the
//! presigned requests that move its bytes, so that no byte passes through
//! Lambda. Every archive is a multipart upload, of parts of
//! `ARTIFACT_PART_BYTES` (one part for a small one), each URL bound to its
//! part's exact size: the object can only be the size that was charged.

use std::time::Duration;

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::http::LeaseCredentials;
use baton_api::artifacts::{
    artifact_parts, ArtifactPartDone, ArtifactPartUpload, ArtifactUploadResponse, ARTIFACT_PART_BYTES,
};
use baton_domain::error::{ApiError, ErrorCode};
use baton_store::artifacts::Upload;
use baton_store::runner_items::LeaseItem;
use baton_store::Store;

/// How long an operator's or a runner's download URL stays valid.
pub const DOWNLOAD_URL_TTL: Duration = Duration::from_secs(15 * 60);
/// The archives' content type: a gzipped tar.
pub const ARCHIVE_CONTENT_TYPE: &str = "application/gzip";

/// The artifacts bucket (caches' too): 500 if the function was not given it.
pub fn bucket(config: &crate::config::Config) -> Result<&str, ApiError> {
    config.artifacts.bucket.as_deref().ok_or_else(|| {
        tracing::error!("BATON_ARTIFACTS_BUCKET is not set");
        ApiError::internal()
    })
}

/// 503 `unavailable` for an S3 call that failed (logged with its cause).
pub fn s3_failed(what: &str, err: String) -> ApiError {
    tracing::error!(error = %err, "artifact store: {what} failed");
    ApiError::new(ErrorCode::Unavailable, format!("the artifact store did not answer ({what}); try again"))
}

/// The live lease the credentials hold: 409 `lease-lost` once it ended or
/// moved on, 404 for another lease's token. Uploads and downloads act only
/// under it.
pub async fn held_lease(store: &Store, credentials: &LeaseCredentials) -> Result<LeaseItem, ApiError> {
    match store.lease(credentials.execution_id).await? {
        Some(lease) if lease.epoch == credentials.epoch && lease.token_hash == credentials.token_hash => Ok(lease),
        Some(lease) if lease.epoch == credentials.epoch => Err(ApiError::not_found("lease")),
        _ => Err(crate::http::lease_lost()),
    }
}

/// The archive of artifact `name`, uploaded by `execution_id`: under the
/// `artifacts/` prefix the functions' grants are scoped to (caches have
/// `artifacts/caches/`, so the two never meet), one object an
/// execution, so a retry's upload never overwrites what another execution
/// made while it is being replaced.
pub fn object_key(workspace_id: &str, run_id: Uuid, execution_id: Uuid, name: &str) -> String {
    format!("artifacts/runs/{workspace_id}/{run_id}/{execution_id}/{name}.tar.gz")
}

/// The archive of a workspace's cache entry, saved by `execution_id`: its
/// scope and key hashed (a key may hold any printable character), under
/// the same grant as artifacts.
pub fn cache_object_key(workspace_id: &str, scope: &str, key: &str, execution_id: Uuid) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{scope}\n{key}").as_bytes());
    format!("artifacts/caches/{workspace_id}/{digest:x}/{execution_id}.tar.gz")
}

/// Whether `digest` is a SHA-256 in lowercase hex.
pub fn valid_sha256(digest: &str) -> bool {
    digest.len() == 64 && digest.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// The sizes of an archive's parts, in order: all `ARTIFACT_PART_BYTES`
/// but the last.
pub fn part_sizes(bytes: u64) -> Vec<u64> {
    let parts = artifact_parts(bytes);
    (0..parts).map(|i| if i + 1 < parts { ARTIFACT_PART_BYTES } else { bytes - i * ARTIFACT_PART_BYTES }).collect()
}

/// Whether `parts` names every part of an archive of `bytes`, once, in
/// order: what completing the upload requires.
pub fn parts_complete(bytes: u64, parts: &[ArtifactPartDone]) -> bool {
    parts.len() as u64 == artifact_parts(bytes)
        && parts.iter().enumerate().all(|(i, p)| p.part_number as usize == i + 1 && !p.etag.trim().is_empty())
}

/// An S3 error as text (no secrets in it: the SDK's context).
fn sdk_text<E: std::error::Error + 'static, R: std::fmt::Debug>(err: &aws_sdk_s3::error::SdkError<E, R>) -> String {
    baton_store::display_sdk_error(err)
}

/// Starts the multipart upload of an archive; its upload id.
pub async fn create_upload(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<String, String> {
    let created = s3
        .create_multipart_upload()
        .bucket(bucket)
        .key(key)
        .content_type(ARCHIVE_CONTENT_TYPE)
        .send()
        .await
        .map_err(|e| sdk_text(&e))?;
    created.upload_id().map(str::to_string).ok_or_else(|| "S3 answered no upload id".to_string())
}

/// Gives up an upload that will not be completed (its charge is kept: the
/// bytes were promised). The bucket's lifecycle rule aborts any left over.
pub async fn abort_upload(s3: &aws_sdk_s3::Client, bucket: &str, upload: &Upload) {
    let key = &upload.object_key;
    if let Err(error) = abort_open_upload(s3, bucket, key, &upload.upload_id).await {
        tracing::warn!(key, %error, "aborting an artifact upload failed; the lifecycle rule will");
    }
}

/// Aborts an upload that must not be completed any more: its part URLs are
/// refused from then on. One S3 no longer has (aborted or completed
/// before) is a success: a replay's abort changes nothing.
pub async fn abort_open_upload(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
) -> Result<(), String> {
    match s3.abort_multipart_upload().bucket(bucket).key(key).upload_id(upload_id).send().await {
        Ok(_) => Ok(()),
        Err(err) if err.as_service_error().is_some_and(|e| e.is_no_such_upload()) => Ok(()),
        Err(err) => Err(sdk_text(&err)),
    }
}

/// The part numbers one answer carries URLs for: `first` (1 when not
/// asked) and after it, at most `per_answer`; `None` when `first` is no
/// part of an archive of `bytes`.
///
/// Why a window: each URL carries the signer's session token (about 2 KB on
/// AWS), so a 50 GiB archive's 3,200 parts would make an answer of about
/// 6 MB, at Lambda's response limit; a window keeps every answer small
/// whatever the archive's size, and the runner asks for the next one.
pub fn part_window(bytes: u64, first: Option<u32>, per_answer: u32) -> Option<std::ops::RangeInclusive<u64>> {
    let first = u64::from(first.unwrap_or(1));
    let parts = artifact_parts(bytes);
    (first >= 1 && first <= parts).then(|| first..=parts.min(first + u64::from(per_answer.max(1)) - 1))
}

/// A presigned `PUT` of each part of `window` of an upload, signed at `now`.
#[allow(clippy::too_many_arguments)]
pub async fn presign_parts(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
    bytes: u64,
    window: std::ops::RangeInclusive<u64>,
    now: DateTime<Utc>,
    valid_for: Duration,
) -> Result<Vec<ArtifactPartUpload>, String> {
    let config =
        PresigningConfig::builder().start_time(now.into()).expires_in(valid_for).build().map_err(|e| e.to_string())?;
    let mut parts = Vec::new();
    let sizes = part_sizes(bytes).into_iter().enumerate().map(|(index, size)| (index as u64 + 1, size));
    for (number, size) in sizes.filter(|(number, _)| window.contains(number)) {
        let part_number = i32::try_from(number).map_err(|e| e.to_string())?;
        let presigned = s3
            .upload_part()
            .bucket(bucket)
            .key(key)
            .upload_id(upload_id)
            .part_number(part_number)
            .content_length(i64::try_from(size).map_err(|e| e.to_string())?)
            .presigned(config.clone())
            .await
            .map_err(|e| sdk_text(&e))?;
        parts.push(ArtifactPartUpload {
            part_number: part_number as u32,
            bytes: size,
            url: presigned.uri().to_string(),
        });
    }
    Ok(parts)
}

/// Where an upload's URLs are asked for: its part window.
pub struct PartsAsked {
    /// The first part wanted (the request's `first_part`).
    pub first_part: Option<u32>,
    /// The most URLs one answer carries (`BATON_UPLOAD_URLS_PER_ANSWER`).
    pub per_answer: u32,
}

impl PartsAsked {
    /// The window asked of an archive of `bytes`; a 400 when `first_part`
    /// is none of its parts. Checked before anything is charged or begun.
    pub fn window(&self, bytes: u64) -> Result<std::ops::RangeInclusive<u64>, ApiError> {
        part_window(bytes, self.first_part, self.per_answer).ok_or_else(|| {
            ApiError::invalid_request(format!("first_part: a part of this archive's 1 to {}", artifact_parts(bytes)))
        })
    }
}

/// An upload's start (an artifact's or a cache entry's) once its size is
/// checked: the part window asked (a 400 before anything is charged), the
/// bucket, the lease it acts under, and how long its URLs may live.
pub struct UploadStart<'a> {
    pub asked: PartsAsked,
    pub bucket: &'a str,
    pub lease: LeaseItem,
    pub now: DateTime<Utc>,
    pub valid_for: Duration,
}

/// Opens an upload of `bytes` under the lease of `credentials`, its URLs
/// asked from `first_part` on.
pub async fn start_upload<'a>(
    context: &'a crate::context::Context,
    credentials: &LeaseCredentials,
    first_part: Option<u32>,
    bytes: u64,
) -> Result<UploadStart<'a>, ApiError> {
    let asked = PartsAsked { first_part, per_answer: context.config.artifacts.upload_urls_per_answer };
    asked.window(bytes)?;
    let bucket = bucket(&context.config)?;
    let lease = held_lease(&context.store, credentials).await?;
    let now = Utc::now();
    // The URLs die with the lease: a runner that lost it cannot send on.
    let valid_for = crate::usecases::logs::upload_url_ttl(now, lease.expires_at).ok_or_else(crate::http::lease_lost)?;
    Ok(UploadStart { asked, bucket, lease, now, valid_for })
}

/// The answer to an upload's start or resume (artifacts' and caches'):
/// one presigned `PUT` a part of the window asked, valid for `valid_for`
/// from `now`. A `first_part` past the archive's last part is a 400.
pub async fn upload_answer(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    upload: &Upload,
    asked: &PartsAsked,
    now: DateTime<Utc>,
    valid_for: Duration,
) -> Result<ArtifactUploadResponse, ApiError> {
    let bytes = upload.bytes;
    let window = asked.window(bytes)?;
    let parts = presign_parts(s3, bucket, &upload.object_key, &upload.upload_id, bytes, window, now, valid_for)
        .await
        .map_err(|e| s3_failed("presigning", e))?;
    let expires_at = now + chrono::Duration::from_std(valid_for).map_err(|_| ApiError::internal())?;
    let part_count = u32::try_from(artifact_parts(bytes)).map_err(|_| ApiError::internal())?;
    Ok(ArtifactUploadResponse { stored: false, parts, part_count, expires_at: Some(expires_at) })
}

/// The answer when the upload is stored already: nothing is left to send.
pub fn already_stored() -> ArtifactUploadResponse {
    ArtifactUploadResponse { stored: true, parts: Vec::new(), part_count: 0, expires_at: None }
}

/// Completes an upload from its parts' ETags. An upload that is gone
/// (completed by an earlier try whose answer was lost) counts as complete
/// when its object is there with the expected size.
pub async fn complete_upload(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    upload: &Upload,
    parts: &[ArtifactPartDone],
) -> Result<(), String> {
    let Upload { object_key: key, upload_id, bytes, .. } = upload;
    let completed = CompletedMultipartUpload::builder()
        .set_parts(Some(
            parts
                .iter()
                .map(|p| CompletedPart::builder().part_number(p.part_number as i32).e_tag(&p.etag).build())
                .collect(),
        ))
        .build();
    let done = s3
        .complete_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .multipart_upload(completed)
        .send()
        .await;
    match done {
        Ok(_) => Ok(()),
        Err(err) => {
            let message = sdk_text(&err);
            let stored = s3.head_object().bucket(bucket).key(key).send().await;
            match stored {
                Ok(head) if head.content_length() == Some(*bytes as i64) => Ok(()),
                _ => Err(message),
            }
        }
    }
}

/// A presigned `GET` of an archive, signed at `now`.
pub async fn presign_get(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    now: DateTime<Utc>,
) -> Result<(String, DateTime<Utc>), String> {
    let config = PresigningConfig::builder()
        .start_time(now.into())
        .expires_in(DOWNLOAD_URL_TTL)
        .build()
        .map_err(|e| e.to_string())?;
    let presigned = s3.get_object().bucket(bucket).key(key).presigned(config).await.map_err(|e| sdk_text(&e))?;
    let expires_at = now + chrono::Duration::from_std(DOWNLOAD_URL_TTL).map_err(|e| e.to_string())?;
    Ok((presigned.uri().to_string(), expires_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_archive_and_only_the_last_is_short() {
        assert_eq!(part_sizes(10), vec![10]);
        assert_eq!(part_sizes(ARTIFACT_PART_BYTES), vec![ARTIFACT_PART_BYTES]);
        assert_eq!(part_sizes(2 * ARTIFACT_PART_BYTES + 5), vec![ARTIFACT_PART_BYTES, ARTIFACT_PART_BYTES, 5]);
        assert_eq!(part_sizes(100_000_000).iter().sum::<u64>(), 100_000_000);
    }

    #[test]
    fn an_answer_carries_a_window_of_parts_from_the_first_asked() {
        let bytes = 5 * ARTIFACT_PART_BYTES + 1; // six parts
        assert_eq!(part_window(bytes, None, 256), Some(1..=6), "a small archive: every part at once");
        assert_eq!(part_window(bytes, None, 4), Some(1..=4));
        assert_eq!(part_window(bytes, Some(5), 4), Some(5..=6), "the last window is short");
        assert_eq!(part_window(bytes, Some(6), 4), Some(6..=6));
        assert_eq!(part_window(bytes, Some(7), 4), None, "past the last part");
        assert_eq!(part_window(bytes, Some(0), 4), None, "parts count from 1");
        // 50 GiB (the largest cap) in answers of 256 URLs: 13 asks.
        let huge = 50 << 30;
        let asks =
            std::iter::successors(part_window(huge, None, 256), |w| part_window(huge, Some(*w.end() as u32 + 1), 256));
        assert_eq!(asks.count(), 13);
    }

    #[test]
    fn a_complete_names_every_part_once_in_order() {
        let done = |n: u32| ArtifactPartDone { part_number: n, etag: format!("\"e{n}\"") };
        let bytes = ARTIFACT_PART_BYTES + 1;
        assert!(parts_complete(bytes, &[done(1), done(2)]));
        assert!(!parts_complete(bytes, &[done(1)]), "a part missing");
        assert!(!parts_complete(bytes, &[done(2), done(1)]), "out of order");
        assert!(!parts_complete(bytes, &[done(1), done(1)]), "one twice");
    }

    #[test]
    fn digests_are_lowercase_hex_sha256() {
        assert!(valid_sha256(&"a1".repeat(32)));
        assert!(!valid_sha256(&"A1".repeat(32)));
        assert!(!valid_sha256("abc"));
    }
}
