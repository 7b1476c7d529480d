//! The command line's HTTP client: the JSON API called with a bearer
//! token, every answer read as JSON, and every refusal turned into a
//! [`CliError`] that keeps the API's error code, so the exit status and
//! the message follow it.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// Longest a command waits for one answer. An upload of a large unit is
/// compiled by the server before it answers (up to its compile timeout,
/// 120 s by default), so this is longer than that.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// Largest answer read, bytes: a decisions page with full explain records
/// at a thousand hosts is a few megabytes.
const MAX_ANSWER_BYTES: u64 = 64 << 20;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The server refused the request: its status and error body, and
    /// the request id to quote when reporting it (in the server's log).
    #[error("{message} ({code}, HTTP {status}{})", request_id.as_deref().map(|id| format!(", request {id}")).unwrap_or_default())]
    Api {
        status: u16,
        code: String,
        message: String,
        request_id: Option<String>,
    },
    /// The server could not be reached, or its answer could not be read.
    #[error("{url}: {message}")]
    Transport { url: String, message: String },
    /// Something the command was given or found is unusable.
    #[error("{0}")]
    Usage(String),
}

impl CliError {
    /// The process's exit status, by what went wrong (docs/cli.md): 1 for
    /// anything not listed, 3 not found, 4 a conflict, 5 no or too weak a
    /// token, 6 a bad request or content, 7 the server unreachable or busy.
    /// (2 is clap's, for bad arguments.)
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Api { status, .. } => match status {
                404 => 3,
                409 => 4,
                401 | 403 => 5,
                400 | 408 | 413 | 415 | 422 => 6,
                503 => 7,
                _ => 1,
            },
            CliError::Transport { .. } => 7,
            CliError::Usage(_) => 6,
        }
    }
}

/// One server, one token.
pub struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
}

/// A request body.
pub enum Body<'a> {
    None,
    Json(&'a Value),
    /// `application/wasm` bytes read from `reader`, `len` of them.
    Wasm {
        reader: &'a mut dyn Read,
        len: u64,
    },
}

impl Client {
    /// A client for `base`; an `https://` server is verified against
    /// `ca_cert` (a PEM file) when given, else Mozilla's roots.
    pub fn new(
        base: &str,
        token: Option<String>,
        ca_cert: Option<&Path>,
    ) -> Result<Client, CliError> {
        Client::with_timeout(base, token, ca_cert, ANSWER_TIMEOUT)
    }

    /// A client whose calls each take at most `timeout` in all.
    pub fn with_timeout(
        base: &str,
        token: Option<String>,
        ca_cert: Option<&Path>,
        timeout: Duration,
    ) -> Result<Client, CliError> {
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout));
        if let Some(path) = ca_cert {
            config = config.tls_config(
                ureq::tls::TlsConfig::builder()
                    .root_certs(ureq::tls::RootCerts::new_with_certs(&read_ca(path)?))
                    .build(),
            );
        }
        Ok(Client {
            base: base.trim_end_matches('/').to_owned(),
            token,
            agent: config.build().new_agent(),
        })
    }

    pub fn get(&self, path: &str) -> Result<Value, CliError> {
        self.call("GET", path, Body::None)
    }

    pub fn delete(&self, path: &str) -> Result<Value, CliError> {
        self.call("DELETE", path, Body::None)
    }

    pub fn post(&self, path: &str, body: &Value) -> Result<Value, CliError> {
        self.call("POST", path, Body::Json(body))
    }

    pub fn put(&self, path: &str, body: &Value) -> Result<Value, CliError> {
        self.call("PUT", path, Body::Json(body))
    }

    /// Sends one request; a 2xx answer's JSON body (`null` when empty), or
    /// the refusal as [`CliError::Api`].
    pub fn call(&self, method: &str, path: &str, body: Body<'_>) -> Result<Value, CliError> {
        let url = format!("{}{path}", self.base);
        let transport = |e: ureq::Error| CliError::Transport {
            url: url.clone(),
            message: e.to_string(),
        };
        let mut request = http_request(method, &url);
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let request = request
            .body(())
            .map_err(|e| CliError::Usage(e.to_string()))?;
        let (parts, ()) = request.into_parts();
        let response = match body {
            Body::None => {
                let request = ureq::http::Request::from_parts(parts, ());
                self.agent.run(request)
            }
            Body::Json(value) => {
                let mut request = ureq::http::Request::from_parts(parts, value.to_string());
                request.headers_mut().insert(
                    "content-type",
                    ureq::http::HeaderValue::from_static("application/json"),
                );
                self.agent.run(request)
            }
            Body::Wasm { reader, len } => {
                let mut request =
                    ureq::http::Request::from_parts(parts, ureq::SendBody::from_reader(reader));
                let headers = request.headers_mut();
                headers.insert(
                    "content-type",
                    ureq::http::HeaderValue::from_static("application/wasm"),
                );
                headers.insert("content-length", ureq::http::HeaderValue::from(len));
                self.agent.run(request)
            }
        }
        .map_err(transport)?;
        let status = response.status().as_u16();
        let text = response
            .into_body()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_string()
            .map_err(transport)?;
        let value: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).map_err(|e| CliError::Transport {
                url: url.clone(),
                message: format!("the answer (HTTP {status}) is not JSON: {e}"),
            })?
        };
        if (200..300).contains(&status) {
            return Ok(value);
        }
        let error = &value["error"];
        Err(CliError::Api {
            status,
            code: error["code"].as_str().unwrap_or("unknown").to_owned(),
            message: error["message"]
                .as_str()
                .map_or_else(|| format!("HTTP {status}"), str::to_owned),
            request_id: value["request_id"].as_str().map(str::to_owned),
        })
    }
}

/// The certificates of a PEM file, trusted as the only roots.
fn read_ca(path: &Path) -> Result<Vec<ureq::tls::Certificate<'static>>, CliError> {
    let bad = |message: String| CliError::Usage(format!("{}: {message}", path.display()));
    let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        if let ureq::tls::PemItem::Certificate(cert) = item.map_err(|e| bad(e.to_string()))? {
            certs.push(cert);
        }
    }
    if certs.is_empty() {
        return Err(bad("no CERTIFICATE block in the file".to_owned()));
    }
    Ok(certs)
}

fn http_request(method: &str, url: &str) -> ureq::http::request::Builder {
    ureq::http::Request::builder().method(method).uri(url)
}
