//! The web console's built files (`web/dist`) at `/`, as CloudFront serves
//! them on AWS: `/v1/*` is the API, everything else a file of the console,
//! and a path that names no file (a page such as `/runs/<id>`, routed in the
//! browser) is answered `index.html`, so a reload or a shared link opens it.

use std::convert::Infallible;
use std::path::Path;

use axum::response::IntoResponse;
use tower::ServiceExt;
use tower_http::services::{ServeDir, ServeFile};

pub type Console = ServeDir<ServeFile>;

pub fn service(dir: &Path) -> Console {
    ServeDir::new(dir).fallback(ServeFile::new(dir.join("index.html")))
}

/// A read outside the API: the console's to answer.
pub fn serves(req: &axum::extract::Request) -> bool {
    let path = req.uri().path();
    let api = path == "/v1" || path.starts_with("/v1/");
    !api && (req.method() == http::Method::GET || req.method() == http::Method::HEAD)
}

pub async fn serve(console: Console, req: axum::extract::Request) -> axum::response::Response {
    let result: Result<_, Infallible> = console.oneshot(req).await;
    match result {
        Ok(response) => response.into_response(),
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, path: &str) -> axum::extract::Request {
        http::Request::builder().method(method).uri(path).body(axum::body::Body::empty()).unwrap_or_default()
    }

    #[test]
    fn the_api_keeps_v1_and_every_write() {
        assert!(serves(&request("GET", "/")));
        assert!(serves(&request("GET", "/runs/0b9c/jobs/1")));
        assert!(serves(&request("GET", "/assets/index.js")));
        assert!(!serves(&request("GET", "/v1/health")));
        assert!(!serves(&request("GET", "/v1")));
        assert!(!serves(&request("POST", "/runs")));
        // A route that only starts like the API's is the console's.
        assert!(serves(&request("GET", "/v1x")));
    }
}
