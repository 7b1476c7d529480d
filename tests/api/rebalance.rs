//! One periodic balancing round (`sandpiper::rebalance::round::run`), run
//! in process over the server's own state: which clusters it skips, the
//! hosts it leaves out, the claim and the `migrate` operation it makes,
//! and how it holds back while that operation is in flight. The loop's
//! timing over the real binary is `tests/e2e/rebalance.rs`.

use sandpiper::operations::{Kind, NewOperation, Origin, migration_locks};
use sandpiper::rebalance::Round;
use sandpiper::rebalance::round::run;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::{Api, Client, expect_status, overloaded_hosts, overloaded_vms, policy_id};

/// A cluster on the built-in policy `policy`, balanced only when the test
/// says so; with the overloaded inventory held when `held`.
async fn cluster(admin: &Client, name: &str, policy: &str, held: bool) -> Uuid {
    let policy_id = policy_id(admin, policy).await;
    let created = expect_status(
        &admin
            .post(
                "/api/v1/clusters",
                &json!({ "name": name, "scheduling_policy": { "id": policy_id },
                         "balance": { "enabled": false } }),
            )
            .await,
        201,
    );
    let id: Uuid = created["id"].as_str().expect("id").parse().expect("uuid");
    if held {
        expect_status(
            &admin
                .put(
                    &format!("/api/v1/clusters/{id}/inventory"),
                    &json!({ "generation": 1, "hosts": overloaded_hosts(), "vms": overloaded_vms() }),
                )
                .await,
            200,
        );
    }
    id
}

async fn decisions(admin: &Client, cluster: Uuid) -> Vec<Value> {
    expect_status(
        &admin
            .get(&format!("/api/v1/clusters/{cluster}/decisions?limit=500"))
            .await,
        200,
    )
    .as_array()
    .expect("decisions")
    .clone()
}

#[tokio::test]
async fn clusters_without_a_balance_unit_or_a_held_inventory_are_not_balanced() {
    let api = Api::start().await;
    let admin = api.admin();
    let no_balancer = cluster(&admin, "plain", "none", true).await;
    let not_held = cluster(&admin, "empty", "evenly_distributed", false).await;
    for (id, why) in [
        (no_balancer, "the policy has no balance unit"),
        (not_held, "the cluster's inventory is not held"),
    ] {
        let round = run(&api.state, id).await.expect("a round");
        assert_eq!(round, Round::NotBalanced(why));
        assert!(decisions(&admin, id).await.is_empty(), "nothing logged");
    }
}

#[tokio::test]
async fn a_round_claims_and_queues_one_migration_and_leaves_out_hosts_migrating() {
    let api = Api::start().await;
    let admin = api.admin();
    let id = cluster(&admin, "hot", "evenly_distributed", true).await;
    let path = format!("/api/v1/clusters/{id}");

    // An engine's own migration onto `cool` is in flight: `cool` is left
    // out, so the balance can only pick `warm`.
    let theirs = api
        .state
        .operations()
        .submit(NewOperation {
            id: Uuid::new_v4(),
            cluster_id: id,
            kind: Kind::Migrate,
            priority: 0,
            locks: migration_locks("elsewhere", "far", "cool"),
            payload: json!({}),
            origin: Origin::Engine,
            vm_id: None,
        })
        .await
        .expect("submit");

    let round = run(&api.state, id).await.expect("a round");
    let Round::Migrating {
        decision_id,
        operation_id,
        vm_id,
        destination,
    } = round
    else {
        panic!("a migration: {round:?}");
    };
    assert_eq!((vm_id.as_str(), destination.as_str()), ("v2", "warm"));

    // The operation carries the claim, with a migration's locks.
    let op = expect_status(
        &admin
            .get(&format!("{path}/operations/{operation_id}"))
            .await,
        200,
    );
    assert_eq!(
        (&op["kind"], &op["origin"], &op["state"], &op["vm_id"]),
        (
            &json!("migrate"),
            &json!("balance"),
            &json!("queued"),
            &json!("v2")
        )
    );
    assert_eq!(
        op["payload"],
        json!({ "vm_id": "v2", "source_host": "hot", "destination_host": "warm",
                "decision_id": decision_id })
    );
    assert_eq!(
        op["locks"]["host_resources"],
        json!({ "exclusive": ["hot", "warm"] })
    );
    let claims = expect_status(&admin.get(&format!("{path}/claims")).await, 200);
    assert_eq!(
        (
            &claims["claims"][0]["vm_id"],
            &claims["claims"][0]["host_id"]
        ),
        (&json!("v2"), &json!("warm"))
    );

    // Logged: the claim's schedule decision, then the round with the
    // operation it queued and the explain record.
    let logged = decisions(&admin, id).await;
    assert_eq!(logged.len(), 2, "{logged:#?}");
    let (round_entry, schedule_entry) = (&logged[0], &logged[1]);
    assert_eq!(round_entry["id"], json!(decision_id));
    assert_eq!(round_entry["kind"], "balance");
    assert_eq!(round_entry["answer"]["outcome"], "migrate");
    assert_eq!(round_entry["answer"]["operation_id"], json!(operation_id));
    assert!(round_entry["answer"]["explain"].is_object());
    assert_eq!(
        (
            &schedule_entry["kind"],
            &schedule_entry["vm_id"],
            &schedule_entry["host_id"]
        ),
        (&json!("schedule"), &json!("v2"), &json!("warm"))
    );

    // Next round: it holds back, and says why.
    let again = run(&api.state, id).await.expect("a round");
    let Round::InFlight {
        operation_id: waiting_for,
        ..
    } = again
    else {
        panic!("held back: {again:?}");
    };
    assert_eq!(waiting_for, operation_id);
    let latest = &decisions(&admin, id).await[0];
    assert_eq!(latest["answer"]["outcome"], "in_flight", "{latest:#}");
    assert_eq!(latest["answer"]["operation_id"], json!(operation_id));
    let listed = expect_status(&admin.get(&format!("{path}/operations")).await, 200);
    assert_eq!(listed["operations"].as_array().map(Vec::len), Some(2));

    // Once it is cancelled, its claim goes, and the next round may move a
    // VM again (the engine's migration still keeps `cool` out).
    expect_status(
        &admin
            .post(
                &format!("{path}/operations/{operation_id}/cancel"),
                &json!({}),
            )
            .await,
        200,
    );
    let claims = expect_status(&admin.get(&format!("{path}/claims")).await, 200);
    assert_eq!(
        claims["claims"],
        json!([]),
        "the cancelled migration's claim is released"
    );
    let third = run(&api.state, id).await.expect("a round");
    assert!(
        matches!(&third, Round::Migrating { destination, .. } if destination == "warm"),
        "{third:?}"
    );
    drop(theirs);
}

/// A migration the engine finished, but its inventory does not show yet:
/// the claim stays on the destination through reports that still list the
/// VM on its source, and through reports older than the generation the
/// completion names (`covered_from`), and the rounds leave both hosts out
/// until the destination lists it, so the stale figures never move it (or
/// another VM) a second time.
#[tokio::test]
async fn a_finished_migration_keeps_its_hosts_out_until_the_inventory_shows_it() {
    let api = Api::start().await;
    let admin = api.admin();
    let id = cluster(&admin, "hot", "evenly_distributed", true).await;
    let path = format!("/api/v1/clusters/{id}");
    let round = run(&api.state, id).await.expect("a round");
    let Round::Migrating {
        operation_id,
        vm_id,
        destination,
        ..
    } = round
    else {
        panic!("a migration: {round:?}");
    };
    let report = |generation: u64, hosts: Value, vms: Value| {
        let admin = admin.clone();
        let path = path.clone();
        async move {
            expect_status(
                &admin
                    .put(
                        &format!("{path}/inventory"),
                        &json!({ "generation": generation, "hosts": hosts, "vms": vms }),
                    )
                    .await,
                200,
            )
        }
    };
    let claim = || {
        let admin = admin.clone();
        let path = path.clone();
        async move {
            let claims = expect_status(&admin.get(&format!("{path}/claims")).await, 200);
            let first = &claims["claims"][0];
            (
                first["vm_id"].clone(),
                first["host_id"].clone(),
                first["state"].clone(),
            )
        }
    };

    // The engine takes the migration; its full report while the VM moves
    // still lists the VM on `hot`, and `hot` overloaded.
    let leased = expect_status(
        &admin
            .post(
                &format!("{path}/operations/lease"),
                &json!({ "holder": "test-engine" }),
            )
            .await,
        200,
    );
    assert_eq!(leased["operation"]["id"], json!(operation_id));
    report(2, overloaded_hosts(), overloaded_vms()).await;
    assert_eq!(
        claim().await,
        (json!(vm_id), json!(destination), json!("pending")),
        "a report of the source keeps the destination's claim"
    );
    // The engine's reports lag its completions, so it names the first
    // generation that counts the VM; with `failed` that means nothing.
    let complete = |outcome: &str| {
        let admin = admin.clone();
        let url = format!("{path}/operations/{operation_id}/complete");
        let body = json!({ "lease": leased["lease"]["id"], "outcome": outcome, "covered_from": 4 });
        async move { admin.post(&url, &body).await }
    };
    let refused = expect_status(&complete("failed").await, 422);
    assert_eq!(
        (
            &refused["error"]["code"],
            &refused["error"]["details"]["field"]
        ),
        (&json!("covered_from_needs_success"), &json!("covered_from"))
    );
    expect_status(&complete("succeeded").await, 200);
    assert_eq!(
        claim().await,
        (json!(vm_id), json!(destination), json!("confirmed"))
    );
    // A report taken before the VM arrived, received after the
    // completion: generation 3 does not count the VM yet.
    report(3, overloaded_hosts(), overloaded_vms()).await;
    assert_eq!(
        claim().await,
        (json!(vm_id), json!(destination), json!("confirmed")),
        "a report before `covered_from` keeps the claim"
    );
    for _ in 0..2 {
        let round = run(&api.state, id).await.expect("a round");
        assert!(
            matches!(round, Round::NothingToDo { .. }),
            "nothing moves on figures about to change: {round:?}"
        );
    }
    let listed = expect_status(&admin.get(&format!("{path}/operations")).await, 200);
    assert_eq!(listed["operations"].as_array().map(Vec::len), Some(1));

    // The report that shows the move settles the claim; the rounds see the
    // cooler host and move nothing more.
    let mut cooler = overloaded_hosts();
    cooler[0]["metrics"]["cpu_usage_percent"] = json!(50.0);
    cooler[0]["metrics"]["cpu_overloaded_minutes"] = json!(0.0);
    let mut moved = overloaded_vms();
    for vm in moved.as_array_mut().expect("vms") {
        if vm["id"] == json!(vm_id) {
            vm["host"] = json!(destination);
        }
    }
    report(4, cooler, moved).await;
    let claims = expect_status(&admin.get(&format!("{path}/claims")).await, 200);
    assert_eq!(claims["claims"], json!([]), "{claims:#}");
    let round = run(&api.state, id).await.expect("a round");
    assert!(matches!(round, Round::NothingToDo { .. }), "{round:?}");
    let listed = expect_status(&admin.get(&format!("{path}/operations")).await, 200);
    assert_eq!(listed["operations"].as_array().map(Vec::len), Some(1));
}
