//! The README's five-minute tour as a test — upload a unit, make a policy,
//! attach it to a cluster, schedule a VM, read the explain — followed by a
//! restart that must keep everything exactly as it was.

use serde_json::{Value, json};

use crate::support::{
    Server, builtin_wasm, distinct_copy, dump, expect_status, tour_hosts, unit_id, without_usage,
};

#[test]
fn the_readme_tour_works_and_a_restart_keeps_everything() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path());
    let admin = server.admin();

    let health = expect_status(&server.client(None).get("/healthz"), 200);
    assert_eq!(health["status"], "ok");

    // 1. Upload a unit. (The README builds one from source; here the
    //    built-in Memory filter's component, built from source by the
    //    build script, is uploaded under a name of our own, with a custom
    //    section added so that the server has never compiled these bytes:
    //    the upload goes through the out-of-process compile.)
    let copy = distinct_copy(builtin_wasm("memory"), "tour");
    let wasm = copy.as_slice();
    let reply = admin.post_wasm("/api/v1/schedulingpolicyunits?name=TourMemory", wasm);
    let unit = expect_status(&reply, 201);
    let unit_id_text = unit["id"].as_str().expect("id").to_owned();
    assert_eq!(unit["name"], "TourMemory");
    assert_eq!(unit["internal"], false);
    assert_eq!(
        unit["exports"],
        json!({ "filter": true, "score": false, "balance": false })
    );
    assert_eq!(unit["uploaded_by"], "bootstrap-admin");
    assert_eq!(
        reply.header("location"),
        Some(format!("/api/v1/schedulingpolicyunits/{unit_id_text}").as_str())
    );
    // The same bytes under the same name again: the same unit.
    let again = expect_status(
        &admin.post_wasm("/api/v1/schedulingpolicyunits?name=TourMemory", wasm),
        200,
    );
    assert_eq!(again["id"], unit["id"]);
    let param = unit["params"][0]["name"]
        .as_str()
        .expect("a parameter")
        .to_owned();

    // 2. Create a policy: the uploaded filter first, an even-memory weight.
    let policy = expect_status(
        &admin.post(
            "/api/v1/schedulingpolicies",
            &json!({ "name": "tour", "description": "the README tour" }),
        ),
        201,
    );
    let policy_path = format!(
        "/api/v1/schedulingpolicies/{}",
        policy["id"].as_str().expect("id")
    );
    let filter = expect_status(
        &admin.post(
            &format!("{policy_path}/filters"),
            &json!({ "scheduling_policy_unit": { "id": unit_id_text }, "position": -1 }),
        ),
        201,
    );
    assert_eq!(filter["id"], unit["id"]);
    let even = unit_id(&admin, "OptimalForMemoryEvenDistribution");
    let weight = expect_status(
        &admin.post(
            &format!("{policy_path}/weights"),
            &json!({ "scheduling_policy_unit": { "id": even }, "factor": 3 }),
        ),
        201,
    );
    assert_eq!(weight["factor"], 3);
    let updated = expect_status(
        &admin.put(
            &policy_path,
            &json!({ "properties": [ { "name": param, "value": "150" } ] }),
        ),
        200,
    );
    assert_eq!(
        updated["properties"],
        json!([ { "name": param, "value": "150" } ])
    );
    assert_eq!(updated["filters"][0]["position"], -1);

    // 3. Attach it to a cluster.
    let cluster = expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({ "name": "tour-cluster", "scheduling_policy": { "id": policy["id"] } }),
        ),
        201,
    );
    assert_eq!(cluster["scheduling_policy"]["name"], "tour");
    let cluster_path = format!("/api/v1/clusters/{}", cluster["id"].as_str().expect("id"));

    // 4. An engine token schedules a VM.
    let created = expect_status(
        &admin.post(
            "/api/v1/tokens",
            &json!({ "name": "ovirt-engine", "role": "engine" }),
        ),
        201,
    );
    let engine = server.client(Some(created["secret"].as_str().expect("secret")));
    let request = json!({
        "vm": { "id": "vm-42", "memory_mib": 4096, "vcpus": 2 },
        "hosts": tour_hosts(),
    });
    let answer = expect_status(
        &engine.post(&format!("{cluster_path}/schedule"), &request),
        200,
    );
    assert_eq!(answer["chosen_host"], "big", "{answer:#}");
    assert_eq!(answer["vm_id"], "vm-42");
    let ranked: Vec<&str> = answer["ranked"]
        .as_array()
        .expect("ranked")
        .iter()
        .map(|r| r["host"].as_str().expect("host"))
        .collect();
    assert_eq!(ranked, ["big", "mid"]);
    // The explain says why `small` lost.
    let filters = &answer["explain"]["filters"];
    assert_eq!(filters[0]["unit"], "TourMemory");
    assert_eq!(filters[0]["rejected"][0]["hosts"], json!(["small"]));
    let decision_id = answer["decision_id"].as_str().expect("recorded").to_owned();

    // A dry run decides the same and records nothing.
    let dry = expect_status(
        &engine.post(&format!("{cluster_path}/schedule?dry_run=true"), &request),
        200,
    );
    assert_eq!(dry["chosen_host"], "big");
    assert_eq!(dry["decision_id"], Value::Null);
    // The engine may not change policies.
    let denied = engine.post("/api/v1/schedulingpolicies", &json!({ "name": "nope" }));
    assert_eq!(denied.status, 403);
    assert_eq!(denied.code(), "forbidden");

    // 5. Read the explain back from the decisions log.
    let decisions = expect_status(&admin.get(&format!("{cluster_path}/decisions")), 200);
    assert_eq!(
        decisions.as_array().expect("list").len(),
        1,
        "the dry run is not logged"
    );
    let decision = expect_status(
        &admin.get(&format!("{cluster_path}/decisions/{decision_id}")),
        200,
    );
    assert_eq!(decision["kind"], "schedule");
    assert_eq!(decision["host_id"], "big");
    assert_eq!(
        decision["answer"], answer,
        "the log keeps the answer as returned"
    );

    // Restart: everything stays, byte for byte.
    let everything = |client: &crate::support::Client| -> Vec<Value> {
        [
            "/api/v1/schedulingpolicyunits".to_owned(),
            "/api/v1/schedulingpolicies".to_owned(),
            "/api/v1/clusters".to_owned(),
            "/api/v1/tokens".to_owned(),
            format!("{cluster_path}/decisions"),
        ]
        .iter()
        .map(|path| expect_status(&client.get(path), 200))
        .collect()
    };
    let before = everything(&admin);
    let db = server.db.clone();
    let status = server.stop();
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    let stored = dump(&db);
    assert!(
        !db.with_extension("db-wal").exists()
            || std::fs::metadata(db.with_extension("db-wal"))
                .map(|m| m.len())
                .unwrap_or(0)
                == 0,
        "the write-ahead log was checkpointed on shutdown"
    );

    let server = Server::start(dir.path());
    assert_eq!(dump(&db), stored, "a restart changes nothing in the store");
    let admin = server.admin();
    assert_eq!(everything(&admin), before);
    let engine = server.client(engine.token.as_deref());
    let again = expect_status(
        &engine.post(&format!("{cluster_path}/schedule?dry_run=true"), &request),
        200,
    );
    assert_eq!(again["chosen_host"], "big");
    assert_eq!(
        without_usage(&again["explain"]),
        without_usage(&answer["explain"]),
        "the same decision after a restart"
    );
}
