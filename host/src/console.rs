//! The admin console (docs/console.md): the static files of `host/console/`,
//! embedded in the binary at compile time and served at `/ui`, so an
//! operator needs no other web server and the browser fetches nothing from
//! the internet. The page holds no data; everything it shows comes from the
//! public API with the token the user signs in with.
//!
//! The routes are public (`api::access::ROUTES`) and kept out of the OpenAPI
//! document, which describes the API engines and scripts call, not a page.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::api::AppState;
use crate::api::error::ApiError;

mod files {
    //! `FILES`: every file under `host/console/`, listed by `build.rs`.
    include!(concat!(env!("OUT_DIR"), "/console_files.rs"));
}

/// The console's routes, as the router spells them: `/ui` and `/ui/` are
/// the page, `/ui/{*path}` its scripts and styles.
pub const PATHS: &[&str] = &["/ui", "/ui/", "/ui/{*path}"];

/// The page the bare `/ui` serves.
const INDEX: &str = "index.html";

/// Only the console's own files run and load: no inline script or style (so
/// no `onclick=` attribute either), no other origin, no framing. The SVG
/// charts are built with DOM calls, which the policy allows.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The files change only with the binary, but a browser that kept them
/// after an upgrade would run an old page against a new API: revalidate
/// every time (the files are small, and the server is on the LAN).
const CACHE_CONTROL: &str = "no-cache";

/// The console's routes over the application's state; `api::app` puts them
/// behind the access check like every other route.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(PATHS[0], get(index))
        .route(PATHS[1], get(index))
        .route(PATHS[2], get(file))
}

async fn index() -> Result<Response, ApiError> {
    serve(INDEX)
}

async fn file(Path(path): Path<String>) -> Result<Response, ApiError> {
    serve(&path)
}

/// The embedded file at `path` (relative to `host/console/`), with its
/// content type and the console's security headers; unknown paths are a
/// 404 in the API's error shape.
fn serve(path: &str) -> Result<Response, ApiError> {
    let body = files::FILES
        .iter()
        .find(|(name, _)| *name == path)
        .map(|(_, bytes)| *bytes)
        .ok_or_else(|| ApiError::NotFound {
            resource: "console file",
            id: path.to_owned(),
        })?;
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static(content_type(path)),
        ),
        (
            header::CACHE_CONTROL,
            HeaderValue::from_static(CACHE_CONTROL),
        ),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
    ];
    Ok((headers, body).into_response())
}

/// The content type of a console file, by its extension (the folder holds
/// only these kinds; anything else is served as opaque bytes).
fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_its_entry_module_are_embedded() {
        let names: Vec<&str> = files::FILES.iter().map(|(name, _)| *name).collect();
        for needed in [INDEX, "app.js", "api.js", "style.css"] {
            assert!(names.contains(&needed), "{needed} in {names:?}");
        }
    }

    #[test]
    fn every_embedded_file_has_a_known_content_type() {
        for (name, _) in files::FILES {
            assert_ne!(
                content_type(name),
                "application/octet-stream",
                "{name}: add its extension to content_type"
            );
        }
    }

    #[test]
    fn no_file_has_inline_script_or_handlers_the_policy_would_block() {
        for (name, bytes) in files::FILES {
            if !name.ends_with(".html") {
                continue;
            }
            let text = std::str::from_utf8(bytes).expect("UTF-8 HTML");
            assert!(!text.contains("<script>"), "{name}: inline <script>");
            assert!(!text.contains(" onclick="), "{name}: inline handler");
            assert!(!text.contains(" style="), "{name}: inline style");
        }
    }
}
