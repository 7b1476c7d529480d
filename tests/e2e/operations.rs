//! The operations queue across a crash (issue #12, "Bad input and
//! faults"): what was acknowledged before kill -9 is there after the
//! restart. A lease taken before the crash is honoured after it until its
//! TTL; an operation nobody leased is still queued; and a worker that dies
//! mid-operation loses nothing: its lease expires and the operation is
//! offered again with its attempt count.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Client, Server, expect_status};

fn cluster(client: &Client) -> String {
    let cluster = expect_status(
        &client.post("/api/v1/clusters", &json!({ "name": "ops" })),
        201,
    );
    format!(
        "/api/v1/clusters/{}/operations",
        cluster["id"].as_str().expect("id")
    )
}

fn submit(client: &Client, ops: &str, kind: &str, vm: &str) -> Value {
    expect_status(
        &client.post(
            ops,
            &json!({ "kind": kind, "locks": { "vm": { "exclusive": [vm] } } }),
        ),
        201,
    )
}

fn show(client: &Client, ops: &str, op: &Value) -> Value {
    let id = op["id"].as_str().expect("id");
    expect_status(&client.get(&format!("{ops}/{id}")), 200)
}

#[test]
fn a_lease_survives_kill_9_and_an_unleased_operation_stays_queued() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let ops = cluster(&admin);
    let first = submit(&admin, &ops, "first", "vm-a");
    let second = submit(&admin, &ops, "second", "vm-b");
    let leased = expect_status(
        &admin.post(
            &format!("{ops}/lease"),
            &json!({ "holder": "w1", "ttl_ms": 120000, "kinds": ["first"] }),
        ),
        200,
    );
    assert_eq!(leased["operation"]["id"], first["id"]);
    server.kill();

    let server = Server::start(dir.path());
    let admin = server.admin();
    let held = show(&admin, &ops, &first);
    assert_eq!(held["state"], "leased");
    assert_eq!(held["attempts"], 1);
    assert_eq!(held["lease"]["holder"], "w1");
    assert_eq!(show(&admin, &ops, &second)["state"], "queued");
    // The lease from before the crash still holds: no one else gets the
    // operation, and its holder completes it.
    let reply = admin.post(
        &format!("{ops}/lease"),
        &json!({ "holder": "w2", "kinds": ["first"] }),
    );
    assert_eq!(reply.status, 204);
    let id = first["id"].as_str().expect("id");
    let done = expect_status(
        &admin.post(
            &format!("{ops}/{id}/complete"),
            &json!({ "lease": leased["lease"]["id"], "outcome": "succeeded" }),
        ),
        200,
    );
    assert_eq!(done["state"], "succeeded");
    let next = expect_status(
        &admin.post(&format!("{ops}/lease"), &json!({ "holder": "w2" })),
        200,
    );
    assert_eq!(next["operation"]["id"], second["id"]);
    server.kill();

    // What was acknowledged is stored: the completion and the new lease.
    let server = Server::start(dir.path());
    let admin = server.admin();
    assert_eq!(show(&admin, &ops, &first)["state"], "succeeded");
    assert_eq!(show(&admin, &ops, &second)["state"], "leased");
    server.stop();
}

#[test]
fn a_worker_dying_mid_operation_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let ops = cluster(&admin);
    let op = submit(&admin, &ops, "work", "vm-a");
    let first = expect_status(
        &admin.post(
            &format!("{ops}/lease"),
            &json!({ "holder": "dies", "ttl_ms": 3000 }),
        ),
        200,
    );
    let leased_at = Instant::now();
    // The worker and the server die together; the lease's time runs on.
    server.kill();
    let server = Server::start(dir.path());
    let admin = server.admin();
    assert_eq!(show(&admin, &ops, &op)["state"], "leased");

    // A second worker waits: the operation comes back when the lease
    // expires, with its attempt count.
    let again = expect_status(
        &admin.post(
            &format!("{ops}/lease"),
            &json!({ "holder": "lives", "wait_ms": 20000 }),
        ),
        200,
    );
    assert!(leased_at.elapsed() >= Duration::from_millis(3000));
    assert_eq!(again["operation"]["id"], op["id"]);
    assert_eq!(again["operation"]["attempts"], 2);
    assert_eq!(again["lease"]["holder"], "lives");
    let id = op["id"].as_str().expect("id");
    let lost = admin.post(
        &format!("{ops}/{id}/complete"),
        &json!({ "lease": first["lease"]["id"], "outcome": "succeeded" }),
    );
    assert_eq!((lost.status, lost.code().as_str()), (409, "lease_lost"));
    expect_status(
        &admin.post(
            &format!("{ops}/{id}/complete"),
            &json!({ "lease": again["lease"]["id"], "outcome": "succeeded" }),
        ),
        200,
    );
    server.stop();
}

/// Opens the event stream on a raw connection and reads its head.
fn open_events(server: &Server, ops: &str) -> std::io::BufReader<std::net::TcpStream> {
    use std::io::{BufRead, Write};
    let mut stream = std::net::TcpStream::connect(server.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("read timeout");
    write!(
        stream,
        "GET {ops}/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
        server.addr,
        crate::support::ADMIN_TOKEN
    )
    .expect("send");
    let mut reader = std::io::BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).expect("status line");
    assert!(status.contains(" 200 "), "{status}");
    reader
}

#[test]
fn an_open_event_stream_and_a_waiting_lease_do_not_hold_up_shutdown() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let ops = cluster(&admin);
    let mut events = open_events(&server, &ops);
    let waiting = {
        let admin = server.admin();
        let ops = ops.clone();
        std::thread::spawn(move || {
            admin.post(
                &format!("{ops}/lease"),
                &json!({ "holder": "w", "wait_ms": 30000 }),
            )
        })
    };
    // The stream is live: a submit shows up on it.
    submit(&admin, &ops, "k", "vm-a");
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !line.starts_with("event: ") {
        line.clear();
        events.read_line(&mut line).expect("an event line");
        assert!(Instant::now() < deadline, "no event");
    }
    // That submit answered the waiting lease; wait again with a kind
    // nobody submits.
    assert_eq!(waiting.join().expect("waiter").status, 200);
    let waiting = {
        let admin = server.admin();
        let ops = ops.clone();
        std::thread::spawn(move || {
            admin.post(
                &format!("{ops}/lease"),
                &json!({ "holder": "w", "wait_ms": 30000, "kinds": ["never"] }),
            )
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let stopping = Instant::now();
    let status = server.stop();
    assert!(status.success(), "{status:?}");
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "shutdown waited {:?} (grace 30 s)",
        stopping.elapsed()
    );
    assert_eq!(waiting.join().expect("waiter").status, 204);
}
