//! Presigned URLs of the log and artifact stores, which the API hands out
//! and the client then uses directly. The API's error shape does not apply:
//! any 2xx is done, 5xx and 429 are transient, the rest permanent.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::{classify_transport, ClientError};
use crate::Client;

/// How long moving one part or one archive may take.
pub const TRANSFER_TIMEOUT: Duration = Duration::from_secs(600);

impl Client {
    /// `PUT`s `body` to a presigned URL (the log store), with the headers it
    /// was signed with, within the request timeout.
    pub async fn put_bytes(
        &self,
        url: &str,
        headers: &BTreeMap<String, String>,
        body: Vec<u8>,
    ) -> Result<(), ClientError> {
        let mut request = self.http.put(url).timeout(self.timeout).body(body);
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request.send().await.map_err(|e| classify_transport(&e))?;
        let status = response.status().as_u16();
        if is_stored(status, headers) {
            return Ok(());
        }
        Err(store_refusal("log store", status, response.text().await.unwrap_or_default()))
    }

    /// `PUT`s one part of an artifact to its presigned URL; S3's `ETag` of
    /// it, which completing the upload names.
    pub async fn put_part(&self, url: &str, body: Vec<u8>) -> Result<String, ClientError> {
        let response =
            self.http.put(url).timeout(TRANSFER_TIMEOUT).body(body).send().await.map_err(|e| classify_transport(&e))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            let etag = response.headers().get("etag").and_then(|v| v.to_str().ok()).map(str::to_string);
            return etag.ok_or_else(|| ClientError::Transient("the artifact store answered no ETag".into()));
        }
        Err(store_refusal("artifact store", status, response.text().await.unwrap_or_default()))
    }

    /// `GET`s a presigned URL's object (an artifact archive).
    pub async fn get_bytes(&self, url: &str) -> Result<Vec<u8>, ClientError> {
        let response = self.http.get(url).timeout(TRANSFER_TIMEOUT).send().await.map_err(|e| classify_transport(&e))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return response.bytes().await.map(|b| b.to_vec()).map_err(|e| classify_transport(&e));
        }
        Err(store_refusal("artifact store", status, response.text().await.unwrap_or_default()))
    }
}

/// An object store's refusal: 5xx and 429 are worth retrying.
fn store_refusal(store: &str, status: u16, text: String) -> ClientError {
    let message = text.chars().take(300).collect::<String>();
    if status >= 500 || status == 429 {
        ClientError::Transient(format!("{store} answered {status}: {message}"))
    } else {
        ClientError::Permanent { status, code: store.replace(' ', "-"), message }
    }
}

/// Whether a PUT's answer means the object is stored. A URL that may not
/// replace an object (`If-None-Match: *`, signed in by the server so a
/// chunk is never overwritten) answers 412 when the object is there: a
/// try of this very upload whose answer was lost stored it already.
fn is_stored(status: u16, headers: &BTreeMap<String, String>) -> bool {
    let create_only = headers.iter().any(|(name, value)| name.eq_ignore_ascii_case("if-none-match") && value == "*");
    (200..300).contains(&status) || (status == 412 && create_only)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_only_put_that_finds_its_chunk_there_stored_it_already() {
        let create_only = BTreeMap::from([("If-None-Match".to_string(), "*".to_string())]);
        assert!(is_stored(200, &create_only));
        assert!(is_stored(412, &create_only), "a lost answer's retry finds the chunk stored");
        assert!(!is_stored(412, &Default::default()), "a 412 without the condition is a failure");
        assert!(!is_stored(403, &create_only));
    }
}
