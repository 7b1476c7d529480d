//! While the server starts: its socket is bound as soon as the store is
//! open, and until every unit is loaded (a first start compiles the
//! built-in ones, which takes seconds) each request gets 503 `starting`
//! with `Retry-After`, so a client polling `/healthz`, a load balancer or an
//! engine sees a server that is coming rather than a refused connection.
//! The answers close their connection, so no kept-alive connection carries
//! over into serving; the real routes take over on the same socket.

use axum::Router;
use axum::http::HeaderValue;
use axum::http::header::CONNECTION;
use axum::response::{IntoResponse, Response};

use crate::api::error::ApiError;

/// What a client is told to wait before asking again, seconds.
pub const STARTING_RETRY_AFTER_SECS: u64 = 1;

/// Every route, answered `starting`.
pub fn app() -> Router {
    Router::new().fallback(starting)
}

async fn starting() -> Response {
    let mut response = ApiError::Busy {
        code: "starting",
        message: "the server is starting: its units are being compiled and loaded; retry shortly"
            .to_owned(),
        details: serde_json::json!({}),
        retry_after_secs: STARTING_RETRY_AFTER_SECS,
    }
    .into_response();
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}
