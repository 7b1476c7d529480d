//! Ganeti's IAllocator over the real binary (issue #14): `gnt-instance add
//! -I sandpiper` writes the cluster and the request to a file and runs
//! `/usr/lib/ganeti/iallocators/sandpiper <file>`, then reads the envelope
//! on stdout and the exit status. The same call here, with Ganeti's own
//! hail input (tests/api/golden/iallocator/hail-alloc-drbd.json): offline
//! (the built-in units, compiled once into a cache directory) and against
//! a running server with an engine token.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::{Server, expect_status, unit_cache_dir};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/api/golden/iallocator/{name}"))
}

/// Runs `sandpiper iallocator` as Ganeti runs an allocator script.
fn iallocator(args: &[&str], cache: &Path, env: &[(&str, &str)]) -> (Value, Output) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sandpiper"));
    command
        .arg("iallocator")
        .args(args)
        .env("SANDPIPER_CACHE_DIR", cache)
        .env_remove("SANDPIPER_TOKEN");
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run sandpiper iallocator");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let envelope: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON envelope ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (envelope, output)
}

fn assert_drbd_pair(envelope: &Value, output: &Output) {
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(envelope["success"], true, "{envelope}");
    let nodes = envelope["result"].as_array().expect("result");
    assert_eq!(nodes.len(), 2, "required_nodes is 2: {envelope}");
    assert_ne!(nodes[0], nodes[1]);
}

#[test]
fn gnt_instance_add_runs_the_allocator_offline() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A cache of its own, empty: the first run fills it.
    let cache = dir.path().join("cache");
    // Ganeti writes the input to a temporary file and passes its path.
    let input = dir.path().join("ialloc-input.json");
    std::fs::copy(fixture("hail-alloc-drbd.json"), &input).expect("write the input");
    let path = input.to_str().expect("utf-8 path");

    let (first, output) = iallocator(&[path], &cache, &[]);
    assert_drbd_pair(&first, &output);
    // The compiled units were cached, only for the policy's units, and a
    // second run reads them back and answers the same.
    let cached = std::fs::read_dir(cache.join("units"))
        .expect("cache dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        })
        .count();
    assert!(cached > 0, "no compiled unit cached");
    let (second, output) = iallocator(&[path], &cache, &[]);
    assert_drbd_pair(&second, &output);
    assert_eq!(first, second);

    // A policy by name, and one the binary does not know.
    let (named, output) = iallocator(&["--policy", "nova_default", path], &cache, &[]);
    assert_drbd_pair(&named, &output);
    let (unknown, output) = iallocator(&["--policy", "no-such-policy", path], &cache, &[]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(unknown["success"], false);
    assert_eq!(unknown["result"], json!([]));
}

#[test]
fn bad_input_fails_with_hails_exit_status_and_says_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = unit_cache_dir();
    let write = |name: &str, text: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path.to_str().expect("utf-8").to_owned()
    };
    // hail's shelltests: /dev/null, `[]`, `{}`, `{"request": 0}` and
    // hail-invalid-reloc.json all exit non-zero, naming the problem.
    let invalid = fixture("hail-invalid-reloc.json");
    let cases = [
        (write("empty.json", b""), "Invalid JSON"),
        (write("list.json", b"[]"), "must be a JSON object"),
        (write("empty-object.json", b"{}"), "key 'request' not found"),
        (
            write("request-zero.json", br#"{"request": 0}"#),
            "request.type",
        ),
        (invalid.to_str().expect("utf-8").to_owned(), "request.name"),
        ("/nonexistent/input.json".to_owned(), "cannot read"),
    ];
    for (path, says) in cases {
        let (envelope, output) = iallocator(&[&path], &cache, &[]);
        assert_eq!(output.status.code(), Some(1), "{path}: {envelope}");
        assert_eq!(envelope["success"], false, "{path}");
        assert_eq!(envelope["result"], json!([]), "{path}");
        let info = envelope["info"].as_str().expect("info");
        assert!(info.contains(says), "{path}: {info}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(says),
            "{path}: the reason on stderr too"
        );
    }
    // No node fits: a decision, so exit 0, with the counts per reason.
    let mut big: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("hail-alloc-drbd.json")).expect("fixture"),
    )
    .expect("json");
    big["request"]["memory"] = json!(32_000);
    let path = write("big.json", big.to_string().as_bytes());
    let (envelope, output) = iallocator(&[&path], &cache, &[]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(envelope["success"], false);
    assert!(
        envelope["info"]
            .as_str()
            .is_some_and(|i| i.contains("FailMem: 4")),
        "{envelope}"
    );
}

#[test]
fn the_allocator_asks_a_running_server_with_an_engine_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let token = expect_status(
        &admin.post(
            "/api/v1/tokens",
            &json!({ "name": "ganeti", "role": "engine" }),
        ),
        201,
    );
    let secret = token["secret"].as_str().expect("secret").to_owned();
    let policies = expect_status(&admin.get("/api/v1/schedulingpolicies"), 200);
    let nova = policies
        .as_array()
        .expect("policies")
        .iter()
        .find(|p| p["name"] == "nova_default")
        .expect("nova_default")["id"]
        .clone();
    expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({ "name": "ganeti", "scheduling_policy": { "id": nova } }),
        ),
        201,
    );
    let url = format!("http://{}", server.addr);
    let input = fixture("hail-alloc-drbd.json");
    let input = input.to_str().expect("utf-8");
    let cache = unit_cache_dir();

    let (envelope, output) = iallocator(
        &["--server", &url, "--cluster", "ganeti", input],
        &cache,
        &[("SANDPIPER_TOKEN", &secret)],
    );
    assert_drbd_pair(&envelope, &output);
    // The server decides with the same policy as the offline default.
    let (offline, _) = iallocator(&[input], &cache, &[]);
    assert_eq!(envelope["result"], offline["result"]);

    // Without a token the server refuses, and the allocator says so.
    let (refused, output) = iallocator(
        &["--server", &url, "--cluster", "ganeti", input],
        &cache,
        &[],
    );
    assert_eq!(output.status.code(), Some(1), "{refused}");
    assert_eq!(refused["success"], false);
    assert!(
        refused["info"].as_str().is_some_and(|i| i.contains("401")),
        "{refused}"
    );
}
