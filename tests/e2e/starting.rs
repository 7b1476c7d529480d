//! A first start answers before its units are loaded: from the moment the
//! store is open, the socket is bound and every request, `/healthz`
//! included, gets 503 `starting` with `Retry-After`; once the built-in
//! units are compiled and loaded the real routes answer on the same socket,
//! and on the same connections: none opened while starting is closed at
//! the switch. A fresh database and an empty cache of compiled units make
//! the start compile every built-in unit, which takes seconds here, so the
//! starting answers are seen.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::http::{exchange, send};
use crate::support::{ADMIN_TOKEN, START_TIMEOUT};

/// A port no one listens on now (the OS's pick, released at once).
fn free_port() -> u16 {
    let probe = TcpListener::bind("127.0.0.1:0").expect("bind a probe");
    probe.local_addr().expect("probe address").port()
}

#[test]
fn a_first_start_answers_503_starting_until_its_units_are_loaded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("address");
    let child = Command::new(env!("CARGO_BIN_EXE_sandpiper"))
        // Longer than the start, so a connection that says nothing while
        // starting is still open at the switch.
        .args(["serve", "--header-read-timeout-secs", "300"])
        .args(["--listen", &addr.to_string(), "--db"])
        .arg(dir.path().join("sandpiper.db"))
        .env_remove("SANDPIPER_LOG")
        .env("SANDPIPER_ADMIN_TOKEN", ADMIN_TOKEN)
        // An empty cache of compiled units: the start compiles every one.
        .env("SANDPIPER_CACHE_DIR", dir.path().join("cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sandpiper");
    // Killed if an assertion fails first, so a failed run leaves no server.
    let mut child = KillOnDrop(Some(child));
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let auth = [("Authorization", bearer.as_str())];

    let deadline = Instant::now() + START_TIMEOUT;
    let (mut health_starting, mut route_starting) = (0, 0);
    // Opened while starting and kept: one that has said nothing yet, and
    // one that was answered `starting` and kept alive.
    let (mut silent, mut answered) = (None, None);
    loop {
        assert!(Instant::now() < deadline, "the server never became ready");
        if TcpStream::connect(addr).is_err() {
            // Not bound yet: the store is being opened.
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let health = send(addr, "GET", "/healthz", &[], None);
        if health.status == 200 {
            break;
        }
        assert_eq!(
            health.status,
            503,
            "{}",
            String::from_utf8_lossy(&health.body)
        );
        assert_eq!(health.json()["error"]["code"], "starting");
        assert_eq!(health.header("retry-after"), Some("1"));
        health_starting += 1;
        if silent.is_none() {
            silent = Some(TcpStream::connect(addr).expect("connect while starting"));
            let kept = TcpStream::connect(addr).expect("connect while starting");
            kept.set_read_timeout(Some(Duration::from_secs(30)))
                .expect("read timeout");
            let reply = exchange(&kept, "GET", "/healthz").expect("a starting answer");
            assert_eq!(reply.status, 503);
            answered = Some(kept);
        }
        let clusters = send(addr, "GET", "/api/v1/clusters", &auth, None);
        if clusters.status == 503 {
            assert_eq!(clusters.json()["error"]["code"], "starting");
            route_starting += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        health_starting > 0 && route_starting > 0,
        "no starting answer seen ({health_starting} on /healthz, {route_starting} on a route)"
    );
    // Ready: the real routes answer on the same socket.
    let clusters = send(addr, "GET", "/api/v1/clusters", &auth, None);
    assert_eq!(clusters.status, 200);
    assert!(send(addr, "GET", "/healthz", &[], None).json()["units_loaded"].as_u64() > Some(0));
    // The connections opened while starting are served by the real routes.
    for (which, stream) in [("silent", silent), ("answered", answered)] {
        let stream = stream.expect("a connection opened while starting");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("read timeout");
        let reply = exchange(&stream, "GET", "/healthz")
            .unwrap_or_else(|e| panic!("the {which} connection after the switch: {e}"));
        assert_eq!(reply.status, 200, "the {which} connection after the switch");
    }

    let mut child = child.0.take().expect("running");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
}

struct KillOnDrop(Option<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
