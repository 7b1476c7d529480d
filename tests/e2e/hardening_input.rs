//! Input that should never have been accepted (issue #11), refused by the
//! real server with 400 `invalid_value` naming the field; names unique
//! regardless of case; and the database created private to its user.

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::support::{Client, Reply, Server, builtin_wasm, distinct_copy, expect_status};

/// Asserts `reply` is 400 `invalid_value` naming `field`.
#[track_caller]
fn assert_invalid(reply: &Reply, field: &str, what: &str) {
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (400, "invalid_value"),
        "{what}: {}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(
        reply.json()["error"]["details"]["field"],
        field,
        "{what}: {}",
        String::from_utf8_lossy(&reply.body)
    );
}

fn cluster(admin: &Client, name: &str) -> String {
    let cluster = expect_status(
        &admin.post("/api/v1/clusters", &json!({ "name": name })),
        201,
    );
    format!("/api/v1/clusters/{}", cluster["id"].as_str().expect("id"))
}

fn hosts() -> Value {
    json!([
        { "id": "a", "metrics": { "memory_total_mib": 8192, "memory_free_mib": 8192, "cpu_sockets": 1, "cpu_cores": 4, "cpu_threads": 8 } },
        { "id": "b", "metrics": { "memory_total_mib": 8192, "memory_free_mib": 4096, "cpu_sockets": 1, "cpu_cores": 4, "cpu_threads": 8 } },
    ])
}

#[test]
fn names_are_one_spelling_per_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();

    // Case: `Prod` after `prod` is the same name.
    cluster(&admin, "prod");
    let clash = admin.post("/api/v1/clusters", &json!({ "name": "PROD" }));
    assert_eq!(
        (clash.status, clash.code().as_str()),
        (409, "name_taken"),
        "{}",
        String::from_utf8_lossy(&clash.body)
    );
    expect_status(
        &admin.post("/api/v1/schedulingpolicies", &json!({ "name": "Mine" })),
        201,
    );
    let clash = admin.post("/api/v1/schedulingpolicies", &json!({ "name": "mINE" }));
    assert_eq!((clash.status, clash.code().as_str()), (409, "name_taken"));
    let wasm = distinct_copy(builtin_wasm("memory"), "names");
    expect_status(
        &admin.post_wasm("/api/v1/schedulingpolicyunits?name=Roomy", &wasm),
        201,
    );
    let other = distinct_copy(builtin_wasm("memory"), "names-2");
    let clash = admin.post_wasm("/api/v1/schedulingpolicyunits?name=ROOMY", &other);
    assert_eq!(
        (clash.status, clash.code().as_str()),
        (409, "name_taken"),
        "{}",
        String::from_utf8_lossy(&clash.body)
    );
    // A built-in unit's name in another case is taken too.
    let clash = admin.post_wasm("/api/v1/schedulingpolicyunits?name=MEMORY", &other);
    assert_eq!((clash.status, clash.code().as_str()), (409, "name_taken"));

    // Decomposed text: schema-valid (no pattern can say NFC), so 422.
    let name = "cafe\u{301}";
    for (path, body) in [
        ("/api/v1/clusters", json!({ "name": name })),
        ("/api/v1/schedulingpolicies", json!({ "name": name })),
        ("/api/v1/tokens", json!({ "name": name, "role": "reader" })),
    ] {
        let reply = admin.post(path, &body);
        assert_eq!(
            (reply.status, reply.code().as_str()),
            (422, "text_not_nfc"),
            "{path}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.json()["error"]["details"]["field"], "name");
    }
    // Invisible and layout characters.
    for name in [
        "evil\u{202E}gnp.exe",
        "a\u{2066}b",
        "zero\u{200B}width",
        "nul\u{0}",
    ] {
        let reply = admin.post("/api/v1/clusters", &json!({ "name": name }));
        assert_invalid(&reply, "name", &format!("cluster {name:?}"));
        let reply = admin.post("/api/v1/schedulingpolicies", &json!({ "name": name }));
        assert_invalid(&reply, "name", &format!("policy {name:?}"));
        let reply = admin.post("/api/v1/tokens", &json!({ "name": name, "role": "reader" }));
        assert_invalid(&reply, "name", &format!("token {name:?}"));
    }
    let reply = admin.post_wasm("/api/v1/schedulingpolicyunits?name=x%E2%80%AEy", &other);
    assert_invalid(&reply, "name", "unit with a bidi override");
}

#[test]
fn figures_and_ids_that_mean_nothing_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();
    let path = cluster(&admin, "c");
    let schedule = format!("{path}/schedule");

    // Inline requests.
    for (vm, field) in [
        (json!({ "id": "v", "memory_mib": -1 }), "vm.memory_mib"),
        (json!({ "id": "v", "vcpus": 0 }), "vm.vcpus"),
        (json!({ "id": "v\u{202E}" }), "vm.id"),
        (json!({ "id": "x".repeat(10_000) }), "vm.id"),
    ] {
        let reply = admin.post(&schedule, &json!({ "vm": vm, "hosts": hosts() }));
        assert_invalid(&reply, field, &format!("inline {vm}"));
    }
    for (host, field) in [
        (
            json!({ "id": "h", "metrics": { "memory_total_mib": -8192 } }),
            "hosts[0].metrics.memory_total_mib",
        ),
        (
            json!({ "id": "h", "metrics": { "cpu_cores": -1 } }),
            "hosts[0].metrics.cpu_cores",
        ),
        (json!({ "id": "h\u{0}" }), "hosts[0].id"),
        (json!({ "id": "h\u{2067}" }), "hosts[0].id"),
    ] {
        let reply = admin.post(
            &schedule,
            &json!({ "vm": { "id": "v" }, "hosts": [host.clone()] }),
        );
        assert_invalid(&reply, field, &format!("inline host {host}"));
    }
    let reply = admin.post(
        &schedule,
        &json!({ "vm": { "id": "v" }, "hosts": hosts(),
                 "vms": [{ "id": "r", "host": "a", "vcpus": 0 }] }),
    );
    assert_invalid(&reply, "vms[0].vcpus", "a running VM with no vCPUs");

    // The held inventory: a push, an update, and a schedule over it.
    let inventory = format!("{path}/inventory");
    let reply = admin.put(
        &inventory,
        &json!({ "generation": 1, "hosts": [{ "id": "h", "metrics": { "memory_total_mib": -1 } }] }),
    );
    assert_invalid(
        &reply,
        "hosts[0].metrics.memory_total_mib",
        "a pushed inventory",
    );
    let reply = admin.put(
        &inventory,
        &json!({ "generation": 1, "hosts": [{ "id": "h\u{202D}" }] }),
    );
    assert_invalid(
        &reply,
        "hosts[0].id",
        "a pushed inventory with a bidi host id",
    );
    expect_status(
        &admin.put(&inventory, &json!({ "generation": 1, "hosts": hosts() })),
        200,
    );
    let before = expect_status(&admin.get(&inventory), 200);
    let reply = admin.post(
        &format!("{inventory}/updates"),
        &json!({ "updates": [
            { "op": "upsert", "generation": 2, "host": hosts()[0] },
            { "op": "upsert", "generation": 3,
              "host": { "id": "b", "metrics": { "memory_total_mib": -4 } } },
        ] }),
    );
    assert_invalid(
        &reply,
        "updates[1].host.metrics.memory_total_mib",
        "an update with a negative total",
    );
    let reply = admin.post(
        &format!("{inventory}/updates"),
        &json!({ "updates": [ { "op": "remove", "generation": 4, "host_id": "\u{0}" } ] }),
    );
    assert_invalid(&reply, "updates[0].host_id", "a removal of a NUL id");
    assert_eq!(
        expect_status(&admin.get(&inventory), 200),
        before,
        "a refused batch leaves the held inventory as it was"
    );

    for (body, field) in [
        (json!({ "vm": { "id": "v" }, "count": 0 }), "count"),
        (json!({ "vm": { "id": "v" }, "count": 257 }), "count"),
        (
            json!({ "vm": { "id": "v", "memory_mib": -1 } }),
            "vm.memory_mib",
        ),
        (json!({ "vm": { "id": "v", "vcpus": 0 } }), "vm.vcpus"),
        (
            json!({ "vm": { "id": "v" }, "count": 2, "instance_ids": ["ok", "bad\u{200F}"] }),
            "instance_ids[1]",
        ),
    ] {
        let reply = admin.post(&schedule, &body);
        assert_invalid(&reply, field, &format!("held {body}"));
    }
    // Nothing was claimed by the refused requests.
    let claims = expect_status(&admin.get(&format!("{path}/claims")), 200);
    assert_eq!(claims["claims"], json!([]), "{claims:#}");
    // ...and a good request still places.
    let placed = expect_status(
        &admin.post(
            &schedule,
            &json!({ "vm": { "id": "v", "memory_mib": 1024 }, "count": 1 }),
        ),
        200,
    );
    assert!(placed["chosen_host"].is_string(), "{placed:#}");
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn the_database_is_created_private() {
    use std::process::{Command, Stdio};

    // A first start into a directory that does not exist yet: the server
    // creates it, the database and its companions. Their modes are read as
    // soon as all four exist, before the server has compiled its built-in
    // units (a first start's long part, which this test is not about):
    // they must be private from the moment they are created.
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let db = data.join("sandpiper.db");
    let mut files = vec![
        (data.clone(), "the data directory"),
        (db.clone(), "the database"),
    ];
    for suffix in ["-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        files.push((name.into(), suffix));
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandpiper"))
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .env_remove("SANDPIPER_LOG")
        .env("SANDPIPER_ADMIN_TOKEN", crate::support::ADMIN_TOKEN)
        .env("SANDPIPER_CACHE_DIR", crate::support::unit_cache_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sandpiper");
    let deadline = std::time::Instant::now() + crate::support::START_TIMEOUT;
    let created = loop {
        if files.iter().all(|(path, _)| path.exists()) {
            break true;
        }
        let exited = child.try_wait().expect("try_wait").is_some();
        if exited || std::time::Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let modes = created.then(|| {
        files
            .iter()
            .map(|(path, what)| (*what, mode(path)))
            .collect::<Vec<_>>()
    });
    let _ = child.kill();
    let _ = child.wait();
    let modes = modes.expect("the server created its data directory, database, -wal and -shm");
    assert_eq!(
        modes,
        [
            ("the data directory", 0o700),
            ("the database", 0o600),
            ("-wal", 0o600),
            ("-shm", 0o600),
        ]
    );
}
