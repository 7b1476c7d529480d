//! Request extractors that fail in our error shape: a JSON body whose
//! errors name the offending field, a query string and path parameters.
//! axum's own extractors answer with plain-text bodies, which engines
//! cannot branch on.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON body. Unknown fields are refused by the target types
/// (`deny_unknown_fields`), and every error names the field it is about.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<S, T> FromRequest<S> for Json<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::UnsupportedMediaType {
                expected: "application/json",
            });
        }
        let bytes = body_bytes(req, state).await?;
        parse_json(&bytes).map(Json)
    }
}

/// Reads the whole body, turning the route's body limit into a 413 (from
/// `Content-Length` alone when it announces more, before reading anything)
/// and a stalled body into a 408.
pub async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    let limit = req.extensions().get::<BodyLimit>().map(|limit| limit.0);
    if let Some(limit) = limit {
        check_content_length(req.headers(), limit)?;
    }
    let limit = limit.unwrap_or(0);
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge { limit_bytes: limit }
        } else if let Some(timeout) = body_timeout(&rejection) {
            timeout.into()
        } else {
            ApiError::InvalidField {
                field: ".".to_owned(),
                message: rejection.body_text(),
            }
        }
    })
}

/// Refuses a body whose `Content-Length` is over `limit` bytes, so that it
/// is never read.
pub fn check_content_length(headers: &HeaderMap, limit: usize) -> Result<(), ApiError> {
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match announced {
        Some(length) if length > limit as u64 => {
            Err(ApiError::PayloadTooLarge { limit_bytes: limit })
        }
        _ => Ok(()),
    }
}

/// Reading a request body ran past a deadline of the connection layer
/// (`server::listen`): it stalled (`idle`) or took too long in all.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the request body did not arrive in time ({limit:?})")]
pub struct BodyTimeout {
    pub idle: bool,
    pub limit: std::time::Duration,
}

impl From<BodyTimeout> for ApiError {
    fn from(t: BodyTimeout) -> Self {
        ApiError::BodyTimeout {
            idle: t.idle,
            limit_secs: t.limit.as_secs(),
        }
    }
}

/// The [`BodyTimeout`] somewhere in `error`'s chain of causes.
pub fn body_timeout(error: &(dyn std::error::Error + 'static)) -> Option<BodyTimeout> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(timeout) = e.downcast_ref::<BodyTimeout>() {
            return Some(*timeout);
        }
        current = e.source();
    }
    None
}

/// The body limit in force for a route, put in the request's extensions by
/// the router so that a 413 can say what the limit was.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimit(pub usize);

/// Parses `bytes` as a `T`, naming the field on error.
///
/// A valid body is read once, by serde_json alone; only a body it refuses
/// is read again with its path tracked (`parse_tracking_path`), which
/// allocates for every field and element it reads (its own frames were
/// about 5 % of the server's CPU in perf during 10,000-host inline
/// decisions, besides those allocations). Tracking the path does
/// not change what is accepted, so the second read only names the field
/// at fault, or accepts a whole number written as a float.
///
/// The body's UTF-8 is checked once, as a whole, and the text then read
/// as a `&str`: serde_json reading bytes checks each string it reads on
/// its own, which made a 10,000-host inline body's read about a fifth
/// slower (docs/performance.md, "Inline hosts read one at a time"). A body
/// that is not UTF-8 is read as bytes, so its error says where.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let read = match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    };
    match read {
        Ok(value) => Ok(value),
        Err(_) => parse_tracking_path(bytes),
    }
}

/// [`parse_json`]'s second read of a body it refused: the same read with
/// each field's path tracked, so that the error names the field (or, for a
/// whole number written as a float, the value it meant).
fn parse_tracking_path<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = match serde_path_to_error::deserialize(&mut de) {
        Ok(value) => value,
        Err(e) => {
            if e.inner().classify() == serde_json::error::Category::Data
                && let Some(again) = with_whole_numbers_as_integers(bytes)
            {
                return again;
            }
            return Err(path_error(e));
        }
    };
    // Trailing characters after the value are malformed JSON too.
    de.end().map_err(|e| json_error(e, ".".to_owned()))?;
    Ok(value)
}

/// `bytes` read again with every whole number written as a float (`4.0`)
/// turned into an integer, when it has one (then the error, if any, names
/// what is still wrong). JSON Schema counts `4.0` as an integer, and
/// clients write whole numbers that way (Python's `json` for a float), but
/// a typed read refuses it for an integer field. Only a body the typed
/// read refused takes this slower path.
fn with_whole_numbers_as_integers<T: DeserializeOwned>(
    bytes: &[u8],
) -> Option<Result<T, ApiError>> {
    /// Integers above this are not exact as floats.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    fn walk(value: &mut serde_json::Value) -> bool {
        match value {
            serde_json::Value::Number(n) => match n.as_f64() {
                Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() <= EXACT => {
                    *n = if f < 0.0 {
                        (f as i64).into()
                    } else {
                        (f as u64).into()
                    };
                    true
                }
                _ => false,
            },
            serde_json::Value::Array(items) => {
                // Every item, not the first that changed.
                items.iter_mut().map(walk).fold(false, |a, b| a | b)
            }
            serde_json::Value::Object(members) => {
                members.values_mut().map(walk).fold(false, |a, b| a | b)
            }
            _ => false,
        }
    }
    let mut value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if !walk(&mut value) {
        return None;
    }
    Some(serde_path_to_error::deserialize(value).map_err(path_error))
}

/// A typed read's error, naming the field where it happened.
fn path_error(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let field = e.path().to_string();
    json_error(e.into_inner(), field)
}

fn json_error(e: serde_json::Error, field: String) -> ApiError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Data => ApiError::InvalidField {
            field,
            message: e.to_string(),
        },
        Category::Syntax | Category::Eof | Category::Io => ApiError::MalformedJson {
            message: e.to_string(),
            line: e.line(),
            column: e.column(),
        },
    }
}

/// The essence of the `Content-Type` (`application/json`), lowercase,
/// without its parameters.
pub fn media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(essence(value))
}

/// A media type without its parameters, in lower case: what a
/// `Content-Type` is compared by.
pub fn essence(content_type: &str) -> String {
    let essence = content_type.split(';').next().unwrap_or_default();
    essence.trim().to_ascii_lowercase()
}

/// Whether the request says its body is JSON.
pub fn is_json(headers: &HeaderMap) -> bool {
    let Some(essence) = media_type(headers) else {
        return false;
    };
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// A query string.
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|rejection| ApiError::InvalidQuery(rejection.body_text()))
    }
}

/// Path parameters.
#[derive(Debug, Clone, Copy, Default)]
pub struct Path<T>(pub T);

impl<S, T> FromRequestParts<S> for Path<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|rejection| ApiError::InvalidPath(rejection.body_text()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "only deserialised")]
    struct Outer {
        name: String,
        inner: Inner,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "only deserialised")]
    struct Inner {
        factor: u32,
    }

    fn field_of(body: &str) -> (String, &'static str) {
        let err = parse_json::<Outer>(body.as_bytes()).expect_err("must fail");
        let code = err.code();
        match err {
            ApiError::InvalidField { field, .. } => (field, code),
            other => (String::new(), other.code()),
        }
    }

    #[test]
    fn an_unknown_nested_field_is_named() {
        let (field, code) = field_of(r#"{"name": "a", "inner": {"factor": 1, "weight": 2}}"#);
        assert_eq!(code, "invalid_field");
        assert_eq!(field, "inner.weight");
    }

    #[test]
    fn a_wrong_type_is_named() {
        let (field, code) = field_of(r#"{"name": "a", "inner": {"factor": -1}}"#);
        assert_eq!(code, "invalid_field");
        assert_eq!(field, "inner.factor");
    }

    #[test]
    fn a_whole_number_written_as_a_float_is_an_integer() {
        #[derive(Debug, serde::Deserialize)]
        struct Counts {
            vcpus: u32,
            offset: i64,
        }
        let counts: Counts =
            parse_json(br#"{"vcpus": 4.0, "offset": -2.0}"#).expect("whole numbers");
        assert_eq!((counts.vcpus, counts.offset), (4, -2));
        // Not whole: still refused, naming the field.
        let (field, code) = field_of(r#"{"name": "a", "inner": {"factor": 1.5}}"#);
        assert_eq!((field.as_str(), code), ("inner.factor", "invalid_field"));
        let (field, _) = field_of(r#"{"name": "a", "inner": {"factor": 1.0, "weight": 2}}"#);
        assert_eq!(field, "inner.weight");
    }

    #[test]
    fn broken_json_is_malformed() {
        let (_, code) = field_of(r#"{"name": "a", "#);
        assert_eq!(code, "malformed_json");
        let (_, code) = field_of(r#"{"name": "a", "inner": {"factor": 1}} x"#);
        assert_eq!(code, "malformed_json");
    }
}
