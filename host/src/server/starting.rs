//! While the server starts: its socket is bound as soon as the store is
//! open, and until every unit is loaded (a first start compiles the
//! built-in ones, which takes seconds) each request gets 503 `starting`
//! with `Retry-After`, so a client polling `/healthz`, a load balancer or an
//! engine sees a server that is coming rather than a refused connection.
//!
//! One listener serves from the bind to the stop, and [`Routes`] switches
//! what it answers: the starting answers, then the real routes. Nothing is
//! closed at the switch. (Stopping a first listener and starting a second
//! one closed connections accepted but not read yet, and a request sent on
//! one in that instant got end-of-file.)

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use tower::ServiceExt;

use crate::api::error::ApiError;

/// What a client is told to wait before asking again, seconds.
pub const STARTING_RETRY_AFTER_SECS: u64 = 1;

/// The main listener's routes: the starting answers until
/// [`Routes::ready`] hands over the real ones.
#[derive(Clone, Default)]
pub struct Routes {
    real: Arc<OnceLock<Router>>,
}

impl Routes {
    /// The router the listener serves, which asks on each request whether
    /// the real routes are ready: a connection opened while starting gets
    /// real answers once they are.
    pub fn app(&self) -> Router {
        let real = Arc::clone(&self.real);
        Router::new().fallback_service(tower::service_fn(move |request: Request| {
            let real = real.get().cloned();
            async move {
                Ok::<_, Infallible>(match real {
                    Some(app) => app.oneshot(request).await?,
                    None => starting(),
                })
            }
        }))
    }

    /// From now on, every request goes to `app`. Only the first call
    /// counts.
    pub fn ready(&self, app: Router) {
        let _ = self.real.set(app);
    }
}

/// 503 `starting`.
fn starting() -> Response {
    ApiError::Busy {
        code: "starting",
        message: "the server is starting: its units are being compiled and loaded; retry shortly"
            .to_owned(),
        details: serde_json::json!({}),
        retry_after_secs: STARTING_RETRY_AFTER_SECS,
    }
    .into_response()
}
