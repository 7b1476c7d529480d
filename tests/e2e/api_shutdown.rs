//! Graceful shutdown: on SIGTERM the server stops accepting connections,
//! lets a request already in flight finish (here an upload whose body is
//! still arriving when the signal comes), then closes the store and exits 0.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::support::{ADMIN_TOKEN, Server, builtin_wasm, dump};

/// Time given to the server to act on what it was just sent (read the
/// request head, handle the signal). Orders events; asserts nothing about
/// speed.
const SETTLE: Duration = Duration::from_millis(300);

#[test]
fn a_request_in_flight_finishes_after_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(dir.path());
    let wasm = builtin_wasm("cpu");
    let (first, rest) = wasm.split_at(wasm.len() / 2);

    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let head = format!(
        "POST /api/v1/schedulingpolicyunits?name=Late HTTP/1.1\r\nHost: {}\r\n\
         Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/wasm\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        server.addr,
        wasm.len()
    );
    stream.write_all(head.as_bytes()).expect("head");
    stream.write_all(first).expect("first half");
    std::thread::sleep(SETTLE);

    server.signal_stop();
    std::thread::sleep(SETTLE);
    assert!(
        server.is_running(),
        "the server waits for the request in flight"
    );
    assert!(
        TcpStream::connect(server.addr).is_err(),
        "no new connections once stopping"
    );

    stream.write_all(rest).expect("second half");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    assert!(
        answer.starts_with("HTTP/1.1 201"),
        "the upload completed: {answer}"
    );

    let db = server.db.clone();
    let status = server.wait();
    assert!(status.success(), "exit 0 after a clean shutdown: {status}");
    assert!(dump(&db).contains("'Late'"), "the upload was committed");
}
