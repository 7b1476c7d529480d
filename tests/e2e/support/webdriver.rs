//! A small blocking client of the W3C WebDriver protocol, over the tests'
//! own HTTP client ([`super::http`]): the dozen commands the console's
//! browser test sends to chromedriver (`tests/e2e/console.rs`).
//!
//! Why not a WebDriver crate: the well-kept one, fantoccini, is async and
//! its dependencies (webdriver's ICU segmenter, `time`, `cookie`, `url`)
//! change the features the workspace's shared crates are built with, which
//! rebuilt every crate of the workspace, wasmtime included; these commands
//! are JSON over HTTP, and a page of code that the suite already has the
//! parts for costs less than that on every CI run.

use std::net::SocketAddr;

use serde_json::{Value, json};

/// The key of an element reference in WebDriver's JSON.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// An error WebDriver answered with (`no such element`, ...), or a reply
/// that was not WebDriver's.
#[derive(Debug, thiserror::Error)]
#[error("WebDriver {command}: {error}: {message}")]
pub struct WebDriverError {
    pub command: String,
    /// WebDriver's error code, e.g. `no such element`.
    pub error: String,
    pub message: String,
}

/// An element of the page, as the driver names it.
#[derive(Clone, Debug)]
pub struct Element(String);

impl Element {
    /// The element as a script argument.
    pub fn arg(&self) -> Value {
        json!({ ELEMENT: self.0 })
    }
}

/// One browser session.
pub struct Session {
    driver: SocketAddr,
    id: String,
}

impl Session {
    /// Opens a session on the driver at `driver` with `capabilities`
    /// (`alwaysMatch`).
    pub fn new(driver: SocketAddr, capabilities: Value) -> Result<Session, WebDriverError> {
        let body = json!({ "capabilities": { "alwaysMatch": capabilities } });
        let value = call(driver, "POST", "/session", Some(body))?;
        let id = value["sessionId"]
            .as_str()
            .ok_or_else(|| not_webdriver("new session", &value))?
            .to_owned();
        Ok(Session { driver, id })
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, WebDriverError> {
        call(
            self.driver,
            method,
            &format!("/session/{}{path}", self.id),
            body,
        )
    }

    pub fn goto(&self, url: &str) -> Result<(), WebDriverError> {
        self.call("POST", "/url", Some(json!({ "url": url })))
            .map(drop)
    }

    /// The first element matching the CSS selector, if there is one now.
    pub fn find(&self, css: &str) -> Result<Option<Element>, WebDriverError> {
        let body = json!({ "using": "css selector", "value": css });
        match self.call("POST", "/element", Some(body)) {
            Ok(value) => Ok(Some(element(&value)?)),
            Err(e) if e.error == "no such element" => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every element matching the CSS selector now.
    pub fn find_all(&self, css: &str) -> Result<Vec<Element>, WebDriverError> {
        let body = json!({ "using": "css selector", "value": css });
        let value = self.call("POST", "/elements", Some(body))?;
        value
            .as_array()
            .ok_or_else(|| not_webdriver("find elements", &value))?
            .iter()
            .map(element)
            .collect()
    }

    pub fn click(&self, e: &Element) -> Result<(), WebDriverError> {
        self.call("POST", &format!("/element/{}/click", e.0), Some(json!({})))
            .map(drop)
    }

    pub fn clear(&self, e: &Element) -> Result<(), WebDriverError> {
        self.call("POST", &format!("/element/{}/clear", e.0), Some(json!({})))
            .map(drop)
    }

    /// Types `text` into the element (for a file input: the file's path).
    pub fn send_keys(&self, e: &Element, text: &str) -> Result<(), WebDriverError> {
        self.call(
            "POST",
            &format!("/element/{}/value", e.0),
            Some(json!({ "text": text })),
        )
        .map(drop)
    }

    /// The element's rendered text.
    pub fn text(&self, e: &Element) -> Result<String, WebDriverError> {
        let value = self.call("GET", &format!("/element/{}/text", e.0), None)?;
        Ok(value.as_str().unwrap_or_default().to_owned())
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page.
    pub fn execute(&self, script: &str, args: Vec<Value>) -> Result<Value, WebDriverError> {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
    }

    /// The viewport as PNG.
    pub fn screenshot(&self) -> Result<Vec<u8>, WebDriverError> {
        let value = self.call("GET", "/screenshot", None)?;
        let text = value
            .as_str()
            .ok_or_else(|| not_webdriver("screenshot", &value))?;
        decode_base64(text).ok_or_else(|| not_webdriver("screenshot", &value))
    }

    /// Ends the session (the browser exits).
    pub fn close(&self) -> Result<(), WebDriverError> {
        call(
            self.driver,
            "DELETE",
            &format!("/session/{}", self.id),
            None,
        )
        .map(drop)
    }
}

/// Sends one command; WebDriver answers `{"value": ...}`, with
/// `{"error", "message"}` inside for a failure.
fn call(
    driver: SocketAddr,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<Value, WebDriverError> {
    let command = format!("{method} {path}");
    let reply = super::http::try_send(
        driver,
        method,
        path,
        &[("Content-Type", "application/json")],
        body.map(|b| b.to_string().into_bytes()),
    )
    .map_err(|e| WebDriverError {
        command: command.clone(),
        error: "connection".to_owned(),
        message: e.to_string(),
    })?;
    let json: Value = serde_json::from_slice(&reply.body).map_err(|e| WebDriverError {
        command: command.clone(),
        error: "not JSON".to_owned(),
        message: e.to_string(),
    })?;
    let value = json.get("value").cloned().unwrap_or(Value::Null);
    if reply.status >= 400 || value.get("error").is_some_and(Value::is_string) {
        return Err(WebDriverError {
            command,
            error: value["error"]
                .as_str()
                .unwrap_or("unknown error")
                .to_owned(),
            message: value["message"].as_str().unwrap_or_default().to_owned(),
        });
    }
    Ok(value)
}

fn element(value: &Value) -> Result<Element, WebDriverError> {
    value[ELEMENT]
        .as_str()
        .map(|id| Element(id.to_owned()))
        .ok_or_else(|| not_webdriver("element", value))
}

fn not_webdriver(command: &str, value: &Value) -> WebDriverError {
    WebDriverError {
        command: command.to_owned(),
        error: "unexpected reply".to_owned(),
        message: value.to_string(),
    }
}

/// Standard base64 (with padding), as WebDriver sends screenshots.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let sextet = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let data: Vec<u8> = chunk.iter().copied().filter(|&c| c != b'=').collect();
        let mut n = 0u32;
        for &c in &data {
            n = (n << 6) | sextet(c)?;
        }
        n <<= 6 * (4 - data.len() as u32);
        let got = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&got[..data.len().saturating_sub(1)]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::decode_base64;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(decode_base64("aGVsbG8=").as_deref(), Some(&b"hello"[..]));
        assert_eq!(decode_base64("aGk=").as_deref(), Some(&b"hi"[..]));
        assert_eq!(decode_base64("YWJj").as_deref(), Some(&b"abc"[..]));
        assert_eq!(decode_base64("a$==").as_deref(), None);
    }
}
