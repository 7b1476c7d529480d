//! Deleting a cluster drops everything Sandpiper held for it: its stored
//! inventory, claims and decisions, and its state in memory, which the
//! claim sweeper would otherwise keep working on. A cluster created again
//! under the same name is a new cluster (a new id) that starts empty.

use std::time::Duration;

use serde_json::json;

use crate::load::{HOSTS, HostSpec, capacity_policy, vm};
use crate::support::{Server, dump, expect_status};

#[test]
fn a_deleted_cluster_leaves_no_held_state_and_its_namesake_starts_empty() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start_with(
        dir.path(),
        &[],
        &[
            ("SANDPIPER_CLAIM_TTL_SECS", "2"),
            ("SANDPIPER_RETRY_WAIT_MS", "0"),
        ],
    );
    let admin = server.admin();
    let policy = capacity_policy(&admin, "doomed");
    let create = || {
        expect_status(
            &admin.post(
                "/api/v1/clusters",
                &json!({ "name": "doomed", "scheduling_policy": { "id": policy } }),
            ),
            201,
        )["id"]
            .as_str()
            .expect("id")
            .to_owned()
    };
    let old = create();
    let old_path = format!("/api/v1/clusters/{old}");
    let hosts: Vec<_> = HOSTS.iter().map(HostSpec::json).collect();
    expect_status(
        &admin.put(
            &format!("{old_path}/inventory"),
            &json!({ "generation": 5, "hosts": hosts }),
        ),
        200,
    );
    let placed = expect_status(
        &admin.post(
            &format!("{old_path}/schedule"),
            &json!({ "vm": vm("vm-1") }),
        ),
        200,
    );
    assert_eq!(placed["complete"], true, "{placed:#}");
    let claims = expect_status(&admin.get(&format!("{old_path}/claims")), 200);
    assert_eq!(claims["claims"][0]["vm_id"], "vm-1");

    assert_eq!(admin.delete(&old_path).status, 204);
    let deleted_at = server.log().len();

    // The old id is gone from every placement route.
    for reply in [
        admin.get(&format!("{old_path}/inventory")),
        admin.get(&format!("{old_path}/claims")),
        admin.get(&format!("{old_path}/decisions")),
        admin.post(
            &format!("{old_path}/schedule"),
            &json!({ "vm": vm("vm-2") }),
        ),
        admin.put(
            &format!("{old_path}/inventory"),
            &json!({ "generation": 6, "hosts": [] }),
        ),
        admin.delete(&format!("{old_path}/claims/vm-1")),
    ] {
        assert_eq!(
            reply.status,
            404,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.code(), "not_found");
    }

    // The same name again: a new cluster, holding nothing.
    let new = create();
    assert_ne!(new, old);
    let new_path = format!("/api/v1/clusters/{new}");
    let held = expect_status(&admin.get(&format!("{new_path}/inventory")), 200);
    assert_eq!(
        (&held["generation"], &held["hosts"], &held["claims"]),
        (&json!(0), &json!(0), &json!(0))
    );
    let refused = admin.post(
        &format!("{new_path}/schedule"),
        &json!({ "vm": vm("vm-1") }),
    );
    assert_eq!(refused.status, 409);
    assert_eq!(refused.code(), "no_inventory");
    // A generation below the deleted cluster's is the new one's first.
    expect_status(
        &admin.put(
            &format!("{new_path}/inventory"),
            &json!({ "generation": 1, "hosts": [HOSTS[0].json()] }),
        ),
        200,
    );
    let claims = expect_status(&admin.get(&format!("{new_path}/claims")), 200);
    assert_eq!(claims["claims"], json!([]));

    // Nothing of the old cluster is stored.
    let stored = dump(&server.db);
    assert!(!stored.contains(&old), "rows of the deleted cluster remain");

    // Nor held: its claim (two seconds to live) is not swept after the
    // deletion, because nothing of the cluster is left to sweep. (Kept in
    // memory, the sweeper, every second, would expire it and log so.)
    std::thread::sleep(Duration::from_millis(3500));
    let log = server.log();
    let swept: Vec<&str> = log[deleted_at..]
        .lines()
        .filter(|l| l.contains("claims expired") && l.contains(&old))
        .collect();
    assert!(
        swept.is_empty(),
        "the deleted cluster's state was still held: {swept:?}"
    );
}
