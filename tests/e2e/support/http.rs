//! A small blocking HTTP/1.1 client for the tests. It writes the request
//! body on its own thread while reading the answer, so a server that
//! answers (413) before reading a large body is still heard, instead of the
//! test seeing only a broken pipe.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::Reply;

/// How long one request may take before the test fails: decisions and
/// uploads of test units take milliseconds; a compile of a real unit well
/// under a second.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Sends one request on a fresh connection; a connection that fails is a
/// test failure.
pub fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Reply {
    try_send(addr, method, path, headers, body)
        .unwrap_or_else(|e| panic!("{method} {path} to {addr}: {e}"))
}

/// Sends one request on a fresh connection, for tests where a server may
/// die mid-request: a refused, reset or cut connection is an error.
pub fn try_send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> std::io::Result<Reply> {
    let stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or_default();
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut writer = stream.try_clone()?;
    let sender = std::thread::spawn(move || {
        // The server may answer and close before reading everything; the
        // answer is what the test checks, so write errors are ignored.
        let _ = writer.write_all(head.as_bytes());
        let _ = writer.write_all(&body);
        let _ = writer.flush();
    });
    let reply = read_reply(stream);
    let _ = sender.join();
    reply
}

fn bad(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// Sends one request without a body on `stream`, an open connection
/// the server may keep alive, and reads its answer.
pub fn exchange(stream: &TcpStream, method: &str, path: &str) -> std::io::Result<Reply> {
    let addr = stream.peer_addr()?;
    let mut writer = stream;
    writer.write_all(format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    read_reply(stream)
}

fn read_reply(stream: impl Read) -> std::io::Result<Reply> {
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    if reader.read_line(&mut status_line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("bad status line {status_line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _): &&(String, String)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim(), 16)
                .map_err(|_| bad(format!("bad chunk size {size:?}")))?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| bad(format!("bad content-length {length:?}")))?;
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else {
        // Connection: close delimits the body; a reset after the answer
        // is just the server closing.
        let _ = reader.read_to_end(&mut body);
    }
    Ok(Reply {
        status,
        headers,
        body,
    })
}
