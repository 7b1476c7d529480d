//! A `multipart/form-data` body (RFC 7578) read from memory: each part is
//! a slice of the body, not a copy.
//!
//! A compact body is read whole before it is decoded, because its Arrow
//! columns are read in place and the cluster keeps them for its next body.
//! A streaming reader (multer) only copied each part twice more into its
//! own buffers: a third of the server's time in a compact decision of
//! 10,000 hosts went to copying the 3.7 MB body and faulting in the pages
//! (docs/performance.md).

use axum::http::{HeaderMap, header};
use bytes::Bytes;
use memchr::memmem;

/// One part of the body.
#[derive(Debug)]
pub struct Part {
    /// The form field name from `Content-Disposition: form-data; name=…`.
    pub name: String,
    /// The part's `Content-Type` as sent, if it has one.
    pub content_type: Option<String>,
    /// The part's bytes, sharing the body's allocation.
    pub data: Bytes,
}

/// Why a body is not `multipart/form-data`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MultipartError {
    #[error("the body has no `--` boundary delimiter")]
    NoDelimiter,
    #[error("a boundary delimiter is followed by more than a line break")]
    DelimiterLine,
    #[error("a part's headers are malformed: {0}")]
    Headers(httparse::Error),
    #[error("a part's headers do not end with an empty line")]
    HeadersUnended,
    #[error("a part's `{0}` header is not text")]
    HeaderNotText(String),
    #[error("a part has no `Content-Disposition: form-data` header with a name")]
    NoName,
    #[error("a part does not end with a boundary delimiter")]
    Unclosed,
}

/// The boundary of a `multipart/form-data` `Content-Type`, if it is one and
/// names its boundary.
pub fn boundary(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let media: mime::Mime = value.parse().ok()?;
    if media.type_() != mime::MULTIPART || media.subtype() != mime::FORM_DATA {
        return None;
    }
    let boundary = media.get_param(mime::BOUNDARY)?.as_str();
    (!boundary.is_empty()).then(|| boundary.to_owned())
}

/// The parts of a body, in order. An error ends them: after one, the rest
/// of the body is not read.
pub struct Parts {
    body: Bytes,
    /// `CRLF--boundary`: what ends a part's data.
    delimiter: Vec<u8>,
    /// Where the next `--boundary` starts, or `None` once the parts ended.
    next: Option<usize>,
}

impl Parts {
    /// Finds the first delimiter of `body`, after any preamble.
    pub fn new(body: Bytes, boundary: &str) -> Result<Parts, MultipartError> {
        let delimiter = format!("\r\n--{boundary}").into_bytes();
        let first = if body.starts_with(&delimiter[2..]) {
            0
        } else {
            memmem::find(&body, &delimiter).ok_or(MultipartError::NoDelimiter)? + 2
        };
        Ok(Parts {
            body,
            delimiter,
            next: Some(first),
        })
    }

    /// Reads the part whose delimiter starts at `at`, and sets where the
    /// next one starts; `None` at the closing delimiter.
    fn part(&mut self, at: usize) -> Result<Option<Part>, MultipartError> {
        let body = &self.body[..];
        let mut at = at + self.delimiter.len() - 2;
        if body[at..].starts_with(b"--") {
            // The closing delimiter: what follows is an epilogue.
            return Ok(None);
        }
        // Transport padding, then the line break.
        at += body[at..]
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t'))
            .count();
        if !body[at..].starts_with(b"\r\n") {
            return Err(MultipartError::DelimiterLine);
        }
        at += 2;
        let mut headers = [httparse::EMPTY_HEADER; 8];
        let (length, headers) = match httparse::parse_headers(&body[at..], &mut headers) {
            Ok(httparse::Status::Complete(parsed)) => parsed,
            Ok(httparse::Status::Partial) => return Err(MultipartError::HeadersUnended),
            Err(e) => return Err(MultipartError::Headers(e)),
        };
        let start = at + length;
        let (mut name, mut content_type) = (None, None);
        for header in headers.iter() {
            if header.name.eq_ignore_ascii_case("content-disposition") {
                name = form_data_name(text(header)?);
            } else if header.name.eq_ignore_ascii_case("content-type") {
                content_type = Some(text(header)?.trim().to_owned());
            }
        }
        let name = name.ok_or(MultipartError::NoName)?;
        let end = start
            + memmem::find(&body[start..], &self.delimiter).ok_or(MultipartError::Unclosed)?;
        self.next = Some(end + 2);
        Ok(Some(Part {
            name,
            content_type,
            data: self.body.slice(start..end),
        }))
    }
}

impl Iterator for Parts {
    type Item = Result<Part, MultipartError>;

    fn next(&mut self) -> Option<Self::Item> {
        let at = self.next.take()?;
        self.part(at).transpose()
    }
}

/// A header's value as text.
fn text<'h>(header: &httparse::Header<'h>) -> Result<&'h str, MultipartError> {
    std::str::from_utf8(header.value)
        .map_err(|_| MultipartError::HeaderNotText(header.name.to_owned()))
}

/// The `name` parameter of a `form-data` `Content-Disposition` value.
fn form_data_name(value: &str) -> Option<String> {
    let (kind, mut rest) = value.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("form-data") {
        return None;
    }
    loop {
        let (key, after) = rest.split_once('=')?;
        let after = after.trim_start();
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => quoted_string(quoted)?,
            None => {
                let end = after.find(';').unwrap_or(after.len());
                (after[..end].trim_end().to_owned(), &after[end..])
            }
        };
        if key.trim().eq_ignore_ascii_case("name") {
            return Some(value);
        }
        rest = after.trim_start().strip_prefix(';')?;
    }
}

/// A quoted string's value and what follows its closing quote, given what
/// follows its opening one. A backslash escapes the next character.
fn quoted_string(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &text[i + 1..])),
            '\\' => value.push(chars.next()?.1),
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part as (name, content type, data).
    type Read = (String, Option<String>, Vec<u8>);

    /// What reading a body gives.
    type Reading = Result<Vec<Read>, MultipartError>;

    /// The parts of `body`, or the first error.
    fn read(body: &'static [u8]) -> Reading {
        let body = Bytes::from_static(body);
        let range = body.as_ptr_range();
        Parts::new(body.clone(), "b0undary")?
            .map(|part| {
                let part = part?;
                // A slice of the body, never a copy.
                assert!(range.start <= part.data.as_ptr() && part.data.as_ptr() <= range.end);
                Ok((part.name, part.content_type, part.data.to_vec()))
            })
            .collect()
    }

    fn part(name: &str, media: Option<&str>, data: &[u8]) -> Read {
        (name.to_owned(), media.map(str::to_owned), data.to_vec())
    }

    #[test]
    fn parts_are_read_as_clients_send_them() {
        let cases: &[(&str, &[u8], Reading)] = &[
            (
                "two parts",
                b"--b0undary\r\nContent-Disposition: form-data; name=\"request\"\r\n\
                  Content-Type: application/json\r\n\r\n{}\r\n\
                  --b0undary\r\nContent-Disposition: form-data; name=\"hosts\"; filename=\"h.arrows\"\r\n\
                  Content-Type: application/octet-stream\r\n\r\n\x00\r\n\x01\r\n\
                  --b0undary--\r\n",
                Ok(vec![
                    part("request", Some("application/json"), b"{}"),
                    part("hosts", Some("application/octet-stream"), b"\x00\r\n\x01"),
                ]),
            ),
            (
                "preamble, padding, no type, header names in any case, epilogue",
                b"a preamble\r\n--b0undary \t\r\ncontent-disposition: Form-Data;name=hosts\r\n\r\n\
                  data\r\n--b0undary--epilogue",
                Ok(vec![part("hosts", None, b"data")]),
            ),
            (
                "a quoted name with an escape and a semicolon, after another parameter",
                b"--b0undary\r\nContent-Disposition: form-data; filename=\"a;b\"; name=\"x\\\"y;z\"\r\n\r\n\
                  \r\n--b0undary--",
                Ok(vec![part("x\"y;z", None, b"")]),
            ),
            (
                "the boundary inside data, not after a line break",
                b"--b0undary\r\nContent-Disposition: form-data; name=a\r\n\r\n--b0undary\n--b0undary\r\n\
                  --b0undary--",
                Ok(vec![part("a", None, b"--b0undary\n--b0undary")]),
            ),
            ("no delimiter", b"--other\r\n\r\n", Err(MultipartError::NoDelimiter)),
            (
                "a delimiter followed by more",
                b"--b0undaryX\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\n--b0undary--",
                Err(MultipartError::DelimiterLine),
            ),
            (
                "headers that do not end",
                b"--b0undary\r\nContent-Disposition: form-data; name=a\r\n",
                Err(MultipartError::HeadersUnended),
            ),
            (
                "a malformed header",
                b"--b0undary\r\nContent Disposition: form-data\r\n\r\n\r\n--b0undary--",
                Err(MultipartError::Headers(httparse::Error::HeaderName)),
            ),
            (
                "no name",
                b"--b0undary\r\nContent-Type: text/plain\r\n\r\n\r\n--b0undary--",
                Err(MultipartError::NoName),
            ),
            (
                "not form-data",
                b"--b0undary\r\nContent-Disposition: attachment; name=a\r\n\r\n\r\n--b0undary--",
                Err(MultipartError::NoName),
            ),
            (
                "an unclosed quote",
                b"--b0undary\r\nContent-Disposition: form-data; name=\"a\r\n\r\n\r\n--b0undary--",
                Err(MultipartError::NoName),
            ),
            (
                "a part not closed",
                b"--b0undary\r\nContent-Disposition: form-data; name=a\r\n\r\ndata--b0undary--",
                Err(MultipartError::Unclosed),
            ),
        ];
        for (case, body, expected) in cases {
            assert_eq!(&read(body), expected, "{case}");
        }
    }

    #[test]
    fn the_boundary_comes_from_a_form_data_content_type() {
        let cases = [
            ("multipart/form-data; boundary=b0undary", Some("b0undary")),
            (
                "Multipart/Form-Data; charset=utf-8; boundary=\"a b\"",
                Some("a b"),
            ),
            ("multipart/form-data", None),
            ("multipart/form-data; boundary=\"\"", None),
            ("multipart/mixed; boundary=b0undary", None),
            ("application/json", None),
        ];
        for (value, expected) in cases {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, value.parse().expect("a header value"));
            assert_eq!(boundary(&headers).as_deref(), expected, "{value}");
        }
    }
}
