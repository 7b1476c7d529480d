//! The operations queue's contract (issue #12): submit, the lease order
//! (priority, then Ganeti's predictive value), conflicting operations
//! never leased together, the per-cluster lease limit, the long poll,
//! lease expiry with attempts kept, lost leases, bad input refused with
//! nothing changed, and the event stream.

use std::time::{Duration, Instant};

use http_body_util::BodyExt as _;
use serde_json::{Value, json};

use crate::support::{Api, Client, expect_status};

/// A new cluster's operations path.
async fn cluster(client: &Client, name: &str) -> String {
    let cluster = expect_status(
        &client
            .post("/api/v1/clusters", &json!({ "name": name }))
            .await,
        201,
    );
    format!(
        "/api/v1/clusters/{}/operations",
        cluster["id"].as_str().expect("id")
    )
}

async fn submit(client: &Client, ops: &str, body: Value) -> Value {
    expect_status(&client.post(ops, &body).await, 201)
}

/// Locks of a VM, exclusive.
fn vm(name: &str) -> Value {
    json!({ "vm": { "exclusive": [name] } })
}

/// Leases with no wait: the leased body, or `None` on 204.
async fn lease(client: &Client, ops: &str, body: Value) -> Option<Value> {
    let reply = client.post(&format!("{ops}/lease"), &body).await;
    match reply.status {
        204 => None,
        _ => Some(expect_status(&reply, 200)),
    }
}

async fn lease_now(client: &Client, ops: &str) -> Option<Value> {
    lease(client, ops, json!({ "holder": "worker-1" })).await
}

async fn complete(client: &Client, ops: &str, leased: &Value, outcome: &str) -> Value {
    let id = leased["operation"]["id"].as_str().expect("id");
    expect_status(
        &client
            .post(
                &format!("{ops}/{id}/complete"),
                &json!({ "lease": leased["lease"]["id"], "outcome": outcome }),
            )
            .await,
        200,
    )
}

fn kind_of(leased: &Option<Value>) -> Option<&str> {
    leased
        .as_ref()
        .map(|l| l["operation"]["kind"].as_str().expect("kind"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operation_is_submitted_leased_and_completed() {
    let api = Api::start().await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;

    let op = submit(
        &admin,
        &ops,
        json!({ "kind": "refresh-host", "priority": -3, "locks": { "host": { "shared": ["h1"] } },
                "payload": { "host": "h1" } }),
    )
    .await;
    assert_eq!(op["state"], "queued");
    assert_eq!(op["kind"], "refresh-host");
    assert_eq!(op["priority"], -3);
    assert_eq!(op["origin"], "engine");
    assert_eq!(op["attempts"], 0);
    assert_eq!(op["payload"], json!({ "host": "h1" }));
    assert_eq!(op["lease"], Value::Null);
    let id = op["id"].as_str().expect("id");

    // No locks declared: the whole cluster, the worst case.
    let whole = submit(&admin, &ops, json!({ "kind": "start" })).await;
    assert_eq!(whole["locks"]["cluster"], true);
    assert_eq!(whole["priority"], 0);

    let leased = lease_now(&admin, &ops).await.expect("leased");
    assert_eq!(leased["operation"]["id"], id);
    assert_eq!(leased["operation"]["state"], "leased");
    assert_eq!(leased["operation"]["attempts"], 1);
    assert_eq!(leased["lease"]["holder"], "worker-1");
    // The lease id is the holder's proof: never shown in a listing.
    let shown = expect_status(&admin.get(&format!("{ops}/{id}")).await, 200);
    assert_eq!(shown["state"], "leased");
    assert_eq!(shown["lease"]["holder"], "worker-1");
    assert!(shown["lease"].get("id").is_none());
    // The cluster-wide operation conflicts with it: not leased beside it.
    assert_eq!(lease_now(&admin, &ops).await, None);

    let renewed = expect_status(
        &admin
            .post(
                &format!("{ops}/{id}/renew"),
                &json!({ "lease": leased["lease"]["id"], "ttl_ms": 120000 }),
            )
            .await,
        200,
    );
    assert!(renewed["lease"]["expires_at"].as_str() > leased["lease"]["expires_at"].as_str());

    let done = expect_status(
        &admin
            .post(
                &format!("{ops}/{id}/complete"),
                &json!({ "lease": leased["lease"]["id"], "outcome": "succeeded",
                        "detail": { "took_ms": 12 } }),
            )
            .await,
        200,
    );
    assert_eq!(done["state"], "succeeded");
    assert_eq!(done["detail"], json!({ "took_ms": 12 }));
    assert!(done["finished_at"].is_string());

    // Completing again with the same lease: it already finished it.
    let again = admin
        .post(
            &format!("{ops}/{id}/complete"),
            &json!({ "lease": leased["lease"]["id"], "outcome": "failed" }),
        )
        .await;
    assert_eq!(
        (again.status, again.code().as_str()),
        (409, "operation_finished")
    );

    // Now the cluster-wide one runs, alone.
    assert_eq!(kind_of(&lease_now(&admin, &ops).await), Some("start"));

    let listed = expect_status(&admin.get(&format!("{ops}?state=succeeded")).await, 200);
    let listed = listed["operations"].as_array().expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], id);
    let all = expect_status(&admin.get(&format!("{ops}?limit=1")).await, 200);
    assert_eq!(all["operations"].as_array().expect("list").len(), 1);
    let seq = all["operations"][0]["seq"].as_u64().expect("seq");
    let rest = expect_status(&admin.get(&format!("{ops}?after={seq}")).await, 200);
    assert_eq!(rest["operations"][0]["kind"], "start");
}

#[tokio::test(flavor = "multi_thread")]
async fn leases_go_by_priority_then_predictive_value_then_submit_order() {
    let api = Api::start().await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;

    // Priority first: the later, more urgent one goes first.
    submit(&admin, &ops, json!({ "kind": "low", "locks": vm("a") })).await;
    submit(
        &admin,
        &ops,
        json!({ "kind": "urgent", "priority": -10, "locks": vm("b") }),
    )
    .await;
    let urgent = lease_now(&admin, &ops).await;
    assert_eq!(kind_of(&urgent), Some("urgent"));
    // `urgent` holds VM b exclusive. Of two equal priorities, the one
    // whose VM lock might block (unknown exclusive against a held
    // exclusive: 1.5) waits behind the one that cannot (a different named
    // VM: 0.5), though submitted first; `low` (VM a, 0.5) came before both.
    submit(
        &admin,
        &ops,
        json!({ "kind": "unknown-vm", "locks": { "vm": "unknown_exclusive" } }),
    )
    .await;
    submit(
        &admin,
        &ops,
        json!({ "kind": "named-vm", "locks": vm("c") }),
    )
    .await;
    assert_eq!(kind_of(&lease_now(&admin, &ops).await), Some("low"));
    assert_eq!(kind_of(&lease_now(&admin, &ops).await), Some("named-vm"));
    assert_eq!(kind_of(&lease_now(&admin, &ops).await), Some("unknown-vm"));
    assert_eq!(lease_now(&admin, &ops).await, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn conflicting_operations_are_never_leased_together() {
    let api = Api::start().await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;

    let migration = json!({ "vm": { "exclusive": ["vm-1"] },
                            "host_resources": { "exclusive": ["h1", "h2"] } });
    submit(
        &admin,
        &ops,
        json!({ "kind": "migrate", "locks": migration }),
    )
    .await;
    // Same VM; then another VM on one of the migration's hosts.
    submit(
        &admin,
        &ops,
        json!({ "kind": "same-vm", "locks": vm("vm-1") }),
    )
    .await;
    submit(
        &admin,
        &ops,
        json!({ "kind": "same-host", "locks": { "host_resources": { "exclusive": ["h2"] } } }),
    )
    .await;
    submit(
        &admin,
        &ops,
        json!({ "kind": "elsewhere", "locks": { "vm": { "exclusive": ["vm-9"] },
                "host_resources": { "exclusive": ["h3"] } } }),
    )
    .await;

    let first = lease_now(&admin, &ops).await.expect("the migration");
    assert_eq!(first["operation"]["kind"], "migrate");
    // Only the operation that meets none of the migration's locks.
    assert_eq!(kind_of(&lease_now(&admin, &ops).await), Some("elsewhere"));
    assert_eq!(lease_now(&admin, &ops).await, None);

    complete(&admin, &ops, &first, "failed").await;
    // Now both may run: they do not conflict with each other.
    let mut next = vec![
        kind_of(&lease_now(&admin, &ops).await).map(str::to_owned),
        kind_of(&lease_now(&admin, &ops).await).map(str::to_owned),
    ];
    next.sort();
    assert_eq!(
        next,
        vec![Some("same-host".to_owned()), Some("same-vm".to_owned())]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_leases_at_most_its_limit() {
    let api = Api::start_with(&["--max-leased-operations", "2"]).await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;
    let other = cluster(&admin, "d").await;
    for i in 0..3 {
        submit(
            &admin,
            &ops,
            json!({ "kind": "work", "locks": vm(&format!("v{i}")) }),
        )
        .await;
    }
    submit(&admin, &other, json!({ "kind": "work", "locks": vm("v0") })).await;

    let first = lease_now(&admin, &ops).await.expect("one");
    lease_now(&admin, &ops).await.expect("two");
    assert_eq!(lease_now(&admin, &ops).await, None, "the limit is 2");
    // Per cluster: the other one is not held back.
    assert!(lease_now(&admin, &other).await.is_some());
    complete(&admin, &ops, &first, "succeeded").await;
    assert!(lease_now(&admin, &ops).await.is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_lease_is_answered_by_a_submit() {
    let api = Api::start().await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;

    let waiting = {
        let admin = admin.clone();
        let ops = ops.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let leased = lease(
                &admin,
                &ops,
                json!({ "holder": "w", "wait_ms": 20000, "kinds": ["wanted"] }),
            )
            .await;
            (leased, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A kind the waiter does not take does not answer it.
    submit(&admin, &ops, json!({ "kind": "other", "locks": vm("x") })).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished());
    submit(&admin, &ops, json!({ "kind": "wanted", "locks": vm("y") })).await;
    let (leased, took) = waiting.await.expect("the waiter");
    assert_eq!(kind_of(&leased), Some("wanted"));
    assert!(
        took < Duration::from_secs(5),
        "answered at once, not at the wait's end: {took:?}"
    );

    // Nothing comes: 204 after the wait.
    let started = Instant::now();
    let reply = admin
        .post(
            &format!("{ops}/lease"),
            &json!({ "holder": "w", "wait_ms": 300, "kinds": ["wanted"] }),
        )
        .await;
    assert_eq!(reply.status, 204);
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_lease_returns_the_operation_with_its_attempts() {
    let api = Api::start().await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;
    let op = submit(&admin, &ops, json!({ "kind": "slow", "locks": vm("a") })).await;
    let id = op["id"].as_str().expect("id");

    let first = lease(&admin, &ops, json!({ "holder": "dies", "ttl_ms": 1000 }))
        .await
        .expect("leased");
    assert_eq!(first["operation"]["attempts"], 1);
    // The worker dies: no renewal. Within the TTL and a sweep it is back.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let shown = expect_status(&admin.get(&format!("{ops}/{id}")).await, 200);
        if shown["state"] == "queued" {
            assert_eq!(shown["attempts"], 1, "attempts kept");
            assert_eq!(shown["lease"], Value::Null);
            break;
        }
        assert!(Instant::now() < deadline, "the lease never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let second = lease(&admin, &ops, json!({ "holder": "lives" }))
        .await
        .expect("offered again");
    assert_eq!(second["operation"]["id"], id);
    assert_eq!(second["operation"]["attempts"], 2);

    // The dead worker's lease is lost, for renewal and completion alike.
    let stale = json!({ "lease": first["lease"]["id"], "outcome": "succeeded" });
    let renew = json!({ "lease": first["lease"]["id"] });
    for (action, body) in [("renew", renew), ("complete", stale)] {
        let reply = admin.post(&format!("{ops}/{id}/{action}"), &body).await;
        assert_eq!(
            (reply.status, reply.code().as_str()),
            (409, "lease_lost"),
            "{action}"
        );
        assert_eq!(reply.json()["error"]["details"]["field"], "lease");
    }
    complete(&admin, &ops, &second, "succeeded").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_leases_unknown_operations_and_other_clusters() {
    let api = Api::start().await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;
    let other = cluster(&admin, "d").await;
    let op = submit(&admin, &ops, json!({ "kind": "k", "locks": vm("a") })).await;
    let id = op["id"].as_str().expect("id");
    let stranger = "00000000-0000-4000-8000-000000000001";

    // Queued, not leased: any lease is lost.
    let reply = admin
        .post(
            &format!("{ops}/{id}/complete"),
            &json!({ "lease": stranger, "outcome": "succeeded" }),
        )
        .await;
    assert_eq!((reply.status, reply.code().as_str()), (409, "lease_lost"));
    let leased = lease_now(&admin, &ops).await.expect("leased");
    let reply = admin
        .post(&format!("{ops}/{id}/renew"), &json!({ "lease": stranger }))
        .await;
    assert_eq!((reply.status, reply.code().as_str()), (409, "lease_lost"));
    // Unknown operation; the operation through another cluster.
    for path in [format!("{ops}/{stranger}"), format!("{other}/{id}")] {
        assert_eq!(admin.get(&path).await.status, 404, "{path}");
        let reply = admin
            .post(
                &format!("{path}/complete"),
                &json!({ "lease": leased["lease"]["id"], "outcome": "succeeded" }),
            )
            .await;
        assert_eq!(
            (reply.status, reply.code().as_str()),
            (404, "not_found"),
            "{path}"
        );
        assert_eq!(
            admin
                .post(&format!("{path}/cancel"), &json!({}))
                .await
                .status,
            404
        );
    }
    // Unknown cluster.
    let nowhere = format!("/api/v1/clusters/{stranger}/operations");
    assert_eq!(admin.get(&nowhere).await.status, 404);
    assert_eq!(
        admin.post(&nowhere, &json!({ "kind": "k" })).await.status,
        404
    );
    assert_eq!(
        admin
            .post(&format!("{nowhere}/lease"), &json!({ "holder": "w" }))
            .await
            .status,
        404
    );
    assert_eq!(admin.open(&format!("{nowhere}/events")).await.status(), 404);
    // Still leased by the right lease.
    assert_eq!(
        complete(&admin, &ops, &leased, "succeeded").await["state"],
        "succeeded"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_ends_queued_and_leased_operations() {
    let api = Api::start().await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;
    let queued = submit(&admin, &ops, json!({ "kind": "a", "locks": vm("a") })).await;
    let queued_id = queued["id"].as_str().expect("id");
    let held = submit(
        &admin,
        &ops,
        json!({ "kind": "b", "priority": -1, "locks": vm("b") }),
    )
    .await;
    let leased = lease_now(&admin, &ops).await.expect("leased");
    assert_eq!(leased["operation"]["id"], held["id"]);
    let held_id = held["id"].as_str().expect("id");

    for id in [queued_id, held_id] {
        let cancelled = expect_status(
            &admin.post(&format!("{ops}/{id}/cancel"), &json!({})).await,
            200,
        );
        assert_eq!(cancelled["state"], "cancelled");
        let again = admin.post(&format!("{ops}/{id}/cancel"), &json!({})).await;
        assert_eq!(
            (again.status, again.code().as_str()),
            (409, "operation_finished")
        );
    }
    // The worker of the cancelled lease learns it on completing.
    let reply = admin
        .post(
            &format!("{ops}/{held_id}/complete"),
            &json!({ "lease": leased["lease"]["id"], "outcome": "succeeded" }),
        )
        .await;
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (409, "operation_finished")
    );
    assert_eq!(reply.json()["error"]["details"]["state"], "cancelled");
    assert_eq!(lease_now(&admin, &ops).await, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_naming_the_field_and_changes_nothing() {
    let api = Api::start().await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;
    let op = submit(&admin, &ops, json!({ "kind": "k", "locks": vm("a") })).await;
    let id = op["id"].as_str().expect("id");
    let big = "x".repeat(70 * 1024);

    let submits: Vec<(Value, &str, &str)> = vec![
        (json!({}), "invalid_field", "."),
        (json!({ "kind": "" }), "invalid_value", "kind"),
        (json!({ "kind": "a\u{200B}b" }), "invalid_value", "kind"),
        (json!({ "kind": "k".repeat(65) }), "invalid_value", "kind"),
        (json!({ "kind": 3 }), "invalid_field", "kind"),
        (
            json!({ "kind": "k", "priority": 20 }),
            "invalid_value",
            "priority",
        ),
        (
            json!({ "kind": "k", "priority": -21 }),
            "invalid_value",
            "priority",
        ),
        // A whole number written as a float is read as the integer it is,
        // then refused for its range; a fraction is the wrong type.
        (
            json!({ "kind": "k", "priority": 1e12 }),
            "invalid_value",
            "priority",
        ),
        (
            json!({ "kind": "k", "priority": 1.5 }),
            "invalid_field",
            "priority",
        ),
        (
            json!({ "kind": "k", "locks": { "vm": "sometimes" } }),
            "invalid_field",
            "locks.vm",
        ),
        (
            json!({ "kind": "k", "locks": { "vm": { "exclusive": [] } } }),
            "invalid_value",
            "locks.vm",
        ),
        (
            json!({ "kind": "k", "locks": { "host": { "shared": [""] } } }),
            "invalid_value",
            "locks.host",
        ),
        (
            json!({ "kind": "k", "locks": { "network": { "shared": [" n"] } } }),
            "invalid_value",
            "locks.network",
        ),
        (
            json!({ "kind": "k", "locks": { "rack": "none" } }),
            "invalid_field",
            "locks",
        ),
        (
            json!({ "kind": "k", "locks": { "cluster": "yes" } }),
            "invalid_field",
            "locks.cluster",
        ),
        (
            json!({ "kind": "k", "payload": big }),
            "invalid_value",
            "payload",
        ),
        (
            json!({ "kind": "k", "vm_id": "vm-1" }),
            "invalid_field",
            "vm_id",
        ),
    ];
    let leases: Vec<(Value, &str, &str)> = vec![
        (json!({}), "invalid_field", "."),
        (json!({ "holder": "" }), "invalid_value", "holder"),
        (
            json!({ "holder": "w", "wait_ms": 30001 }),
            "invalid_value",
            "wait_ms",
        ),
        (
            json!({ "holder": "w", "ttl_ms": 999 }),
            "invalid_value",
            "ttl_ms",
        ),
        (
            json!({ "holder": "w", "ttl_ms": 3600001 }),
            "invalid_value",
            "ttl_ms",
        ),
        (
            json!({ "holder": "w", "kinds": [] }),
            "invalid_value",
            "kinds",
        ),
        (
            json!({ "holder": "w", "kinds": ["ok", ""] }),
            "invalid_value",
            "kinds[1]",
        ),
    ];
    let completes: Vec<(Value, &str, &str)> = vec![
        (json!({ "outcome": "succeeded" }), "invalid_field", "."),
        (
            json!({ "lease": "not-a-uuid", "outcome": "succeeded" }),
            "invalid_field",
            "lease",
        ),
        (
            json!({ "lease": id, "outcome": "done" }),
            "invalid_field",
            "outcome",
        ),
        (
            json!({ "lease": id, "outcome": "succeeded", "detail": big }),
            "invalid_value",
            "detail",
        ),
    ];
    let before = api_state(&admin, &ops).await;
    let mut cases = Vec::new();
    cases.extend(submits.into_iter().map(|c| (ops.clone(), c)));
    cases.extend(leases.into_iter().map(|c| (format!("{ops}/lease"), c)));
    cases.extend(
        completes
            .into_iter()
            .map(|c| (format!("{ops}/{id}/complete"), c)),
    );
    for (path, (body, code, field)) in cases {
        let reply = admin.post(&path, &body).await;
        let error = reply.json();
        assert_eq!(
            (reply.status, reply.code().as_str()),
            (400, code),
            "{path} {body}: {error}"
        );
        let named = error["error"]["details"]["field"]
            .as_str()
            .unwrap_or_default();
        assert!(
            named.starts_with(field) || named == field,
            "{path} {body}: {error}"
        );
    }
    for query in ["state=running", "limit=0", "limit=1001", "limit=x"] {
        let reply = admin.get(&format!("{ops}?{query}")).await;
        assert_eq!(reply.status, 400, "{query}");
    }
    assert_eq!(api_state(&admin, &ops).await, before, "nothing changed");
}

/// Everything of a cluster's queue the API shows.
async fn api_state(admin: &Client, ops: &str) -> Value {
    expect_status(&admin.get(&format!("{ops}?limit=1000")).await, 200)
}

/// The next event of a stream, within a few seconds.
async fn next_event(body: &mut axum::body::Body) -> Value {
    let mut text = String::new();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("an event in time")
            .expect("the stream goes on")
            .expect("a frame");
        if let Ok(data) = frame.into_data() {
            text.push_str(std::str::from_utf8(&data).expect("UTF-8"));
        }
        if let Some(end) = text.find("\n\n") {
            let event = &text[..end];
            if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) {
                return serde_json::from_str(data).expect("JSON data");
            }
            text.drain(..end + 2);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_event_stream_tells_every_change() {
    let api = Api::start().await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;
    let response = admin.open(&format!("{ops}/events")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().expect("text"),
        "text/event-stream"
    );
    let mut body = response.into_body();

    let op = submit(&admin, &ops, json!({ "kind": "k", "locks": vm("a") })).await;
    let leased = lease_now(&admin, &ops).await.expect("leased");
    let id = op["id"].as_str().expect("id");
    expect_status(
        &admin
            .post(
                &format!("{ops}/{id}/renew"),
                &json!({ "lease": leased["lease"]["id"] }),
            )
            .await,
        200,
    );
    complete(&admin, &ops, &leased, "failed").await;
    let other = submit(&admin, &ops, json!({ "kind": "k2" })).await;
    let other_id = other["id"].as_str().expect("id");
    expect_status(
        &admin
            .post(&format!("{ops}/{other_id}/cancel"), &json!({}))
            .await,
        200,
    );

    let mut seen = Vec::new();
    for _ in 0..6 {
        let event = next_event(&mut body).await;
        seen.push((
            event["event"].as_str().expect("event").to_owned(),
            event["operation"]["state"]
                .as_str()
                .expect("state")
                .to_owned(),
        ));
    }
    let expected = [
        ("submitted", "queued"),
        ("leased", "leased"),
        ("renewed", "leased"),
        ("completed", "failed"),
        ("submitted", "queued"),
        ("cancelled", "cancelled"),
    ];
    assert_eq!(
        seen,
        expected
            .iter()
            .map(|(e, s)| ((*e).to_owned(), (*s).to_owned()))
            .collect::<Vec<_>>()
    );
}

/// Schedules `vm` over the held inventory of the cluster whose operations
/// path is `ops`: the decision claims a host for it. Returns that host.
async fn claim(admin: &Client, ops: &str, vm: &str) -> String {
    let cluster = ops.trim_end_matches("/operations");
    let placed = expect_status(
        &admin
            .post(
                &format!("{cluster}/schedule"),
                &json!({ "vm": { "id": vm, "memory_mib": 512, "vcpus": 1 } }),
            )
            .await,
        200,
    );
    placed["chosen_host"]
        .as_str()
        .or_else(|| placed["claims"][0]["host_id"].as_str())
        .unwrap_or_else(|| panic!("a host in {placed:#}"))
        .to_owned()
}

async fn claim_state(admin: &Client, ops: &str, vm: &str) -> Option<String> {
    let cluster = ops.trim_end_matches("/operations");
    let claims = expect_status(&admin.get(&format!("{cluster}/claims")).await, 200);
    claims["claims"]
        .as_array()
        .expect("claims")
        .iter()
        .find(|c| c["vm_id"] == vm)
        .map(|c| c["state"].as_str().expect("state").to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operation_carrying_a_claim_confirms_or_releases_it() {
    use sandpiper::operations::{Kind, NewOperation, Origin, start_locks};

    let api = Api::start().await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;
    let cluster_path = ops.trim_end_matches("/operations");
    let cluster_id: uuid::Uuid = cluster_path
        .rsplit('/')
        .next()
        .and_then(|id| id.parse().ok())
        .expect("a cluster id");
    let mut hosts = crate::support::tour_hosts();
    for host in hosts.as_array_mut().expect("hosts") {
        host["metrics"]["cpu_sockets"] = json!(1);
    }
    expect_status(
        &admin
            .put(
                &format!("{cluster_path}/inventory"),
                &json!({ "generation": 1, "hosts": hosts }),
            )
            .await,
        200,
    );
    let operations = api.state.operations();
    for (vm, outcome, claim_after) in [
        ("vm-ok", "succeeded", Some("confirmed")),
        ("vm-bad", "failed", None),
        ("vm-gone", "cancel", None),
    ] {
        let host = claim(&admin, &ops, vm).await;
        assert_eq!(
            claim_state(&admin, &ops, vm).await.as_deref(),
            Some("pending")
        );
        let op = operations
            .submit(NewOperation {
                id: uuid::Uuid::new_v4(),
                cluster_id,
                kind: Kind::Start,
                priority: 0,
                locks: start_locks(vm, &host),
                payload: json!({ "vm_id": vm, "host_id": host }),
                origin: Origin::Pool {
                    pool_id: uuid::Uuid::new_v4(),
                },
                vm_id: Some(vm.to_owned()),
            })
            .await
            .expect("submitted");
        assert_eq!(operations.in_flight(cluster_id).await.len(), 1);
        if outcome == "cancel" {
            expect_status(
                &admin
                    .post(&format!("{ops}/{}/cancel", op.id), &json!({}))
                    .await,
                200,
            );
        } else {
            let leased = lease_now(&admin, &ops).await.expect("leased");
            assert_eq!(leased["operation"]["vm_id"], vm);
            assert_eq!(leased["operation"]["origin"], "pool");
            complete(&admin, &ops, &leased, outcome).await;
        }
        assert_eq!(
            claim_state(&admin, &ops, vm).await.as_deref(),
            claim_after,
            "{vm} {outcome}"
        );
        assert!(operations.in_flight(cluster_id).await.is_empty());
    }

    // A claim already gone is not the completion's error.
    let host = claim(&admin, &ops, "vm-released").await;
    expect_status(
        &admin
            .delete(&format!("{cluster_path}/claims/vm-released"))
            .await,
        200,
    );
    operations
        .submit(NewOperation {
            id: uuid::Uuid::new_v4(),
            cluster_id,
            kind: Kind::Start,
            priority: 0,
            locks: start_locks("vm-released", &host),
            payload: Value::Null,
            origin: Origin::Balance,
            vm_id: Some("vm-released".to_owned()),
        })
        .await
        .expect("submitted");
    let leased = lease_now(&admin, &ops).await.expect("leased");
    assert_eq!(
        complete(&admin, &ops, &leased, "succeeded").await["state"],
        "succeeded"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_lives_as_long_as_its_operation() {
    use sandpiper::operations::{Kind, NewOperation, Origin, migration_locks};

    let api = Api::start_with(&["--claim-ttl-secs", "2"]).await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;
    let cluster_path = ops.trim_end_matches("/operations");
    let cluster_id: uuid::Uuid = cluster_path
        .rsplit('/')
        .next()
        .and_then(|id| id.parse().ok())
        .expect("a cluster id");
    let mut hosts = crate::support::tour_hosts();
    for host in hosts.as_array_mut().expect("hosts") {
        host["metrics"]["cpu_sockets"] = json!(1);
    }
    expect_status(
        &admin
            .put(
                &format!("{cluster_path}/inventory"),
                &json!({ "generation": 1, "hosts": hosts }),
            )
            .await,
        200,
    );
    let host = claim(&admin, &ops, "vm-moving").await;
    claim(&admin, &ops, "vm-alone").await;
    api.state
        .operations()
        .submit(NewOperation {
            id: uuid::Uuid::new_v4(),
            cluster_id,
            kind: Kind::Migrate,
            priority: 0,
            locks: migration_locks("vm-moving", "small", &host),
            payload: Value::Null,
            origin: Origin::Balance,
            vm_id: Some("vm-moving".to_owned()),
        })
        .await
        .expect("submitted");
    // Twice the claim TTL: the claim without an operation expired, the
    // one whose operation is still queued did not.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(claim_state(&admin, &ops, "vm-alone").await, None);
    assert_eq!(
        claim_state(&admin, &ops, "vm-moving").await.as_deref(),
        Some("pending")
    );
    let leased = lease_now(&admin, &ops).await.expect("leased");
    complete(&admin, &ops, &leased, "succeeded").await;
    assert_eq!(
        claim_state(&admin, &ops, "vm-moving").await.as_deref(),
        Some("confirmed")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reader_that_falls_behind_is_told_to_list_again() {
    let api = Api::start().await;
    let admin = api.admin();
    let ops = cluster(&admin, "c").await;
    let mut body = admin.open(&format!("{ops}/events")).await.into_body();
    let submitted = sandpiper::operations::EVENT_BUFFER + 10;
    for i in 0..submitted {
        submit(
            &admin,
            &ops,
            json!({ "kind": "k", "locks": vm(&format!("v{i}")) }),
        )
        .await;
    }
    let first = next_event(&mut body).await;
    assert_eq!(first["event"], "lagged");
    assert_eq!(first["missed"], 10);
    // Then the events still buffered, in order.
    let next = next_event(&mut body).await;
    assert_eq!(next["event"], "submitted");
    assert_eq!(next["operation"]["seq"].as_u64(), Some(10));
}
