//! The built-in catalog on a fresh server: every embedded unit is listed as
//! internal, every `policies/defaults/*.json` policy is listed locked with
//! its own id (oVirt's GUIDs), units and factors, `none` is the default, and
//! a cluster can run each of them; a locked policy is cloned to change it.

use std::collections::BTreeMap;

use sandpiper::builtin::{BuiltinPolicy, UNITS};
use serde_json::{Value, json};

use crate::support::{
    Client, Server, expect_status, overloaded_hosts as hosts, overloaded_vms as vms,
};

/// The unit names of one role of a listed policy.
fn names(policy: &Value, role: &str) -> Vec<String> {
    policy[role]
        .as_array()
        .unwrap_or_else(|| panic!("{role} of {policy}"))
        .iter()
        .map(|slot| {
            slot["scheduling_policy_unit"]["name"]
                .as_str()
                .expect("a unit name")
                .to_owned()
        })
        .collect()
}

fn by_name(list: &Value) -> BTreeMap<String, Value> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|item| {
            (
                item["name"].as_str().expect("name").to_owned(),
                item.clone(),
            )
        })
        .collect()
}

/// A cluster on `policy_id`; returns its path.
fn cluster(admin: &Client, name: &str, policy_id: &str) -> String {
    let cluster = expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({ "name": name, "scheduling_policy": { "id": policy_id } }),
        ),
        201,
    );
    format!("/api/v1/clusters/{}", cluster["id"].as_str().expect("id"))
}

#[test]
fn a_fresh_server_lists_the_whole_catalog_and_runs_every_builtin_policy() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A true first start: no template database.
    let server = Server::start_fresh(dir.path(), &[], &[]);
    let admin = server.admin();

    let units = by_name(&expect_status(
        &admin.get("/api/v1/schedulingpolicyunits"),
        200,
    ));
    assert_eq!(
        units.len(),
        UNITS.len(),
        "one listed unit per embedded unit"
    );
    for (name, unit) in &units {
        assert_eq!(unit["internal"], true, "{name}");
        assert_eq!(unit["uploaded_by"], "builtin", "{name}");
    }

    let listed = by_name(&expect_status(
        &admin.get("/api/v1/schedulingpolicies"),
        200,
    ));
    let files = BuiltinPolicy::all().expect("the embedded policy files parse");
    assert_eq!(listed.len(), files.len(), "{:?}", listed.keys());
    for file in &files {
        let policy = listed
            .get(&file.name)
            .unwrap_or_else(|| panic!("`{}` is not listed", file.name));
        assert_eq!(policy["id"], file.id.to_string(), "{}", file.name);
        assert_eq!(policy["locked"], true, "{}", file.name);
        assert_eq!(policy["default_policy"], file.default, "{}", file.name);
        let filters: Vec<String> = file.filters.iter().map(|f| f.unit.clone()).collect();
        assert_eq!(names(policy, "filters"), filters, "{}", file.name);
        let weights: Vec<String> = file.weights.iter().map(|w| w.unit.clone()).collect();
        assert_eq!(names(policy, "weights"), weights, "{}", file.name);
        let factors: Vec<u64> = policy["weights"]
            .as_array()
            .expect("weights")
            .iter()
            .map(|w| w["factor"].as_u64().expect("factor"))
            .collect();
        let expected: Vec<u64> = file.weights.iter().map(|w| u64::from(w.factor)).collect();
        assert_eq!(factors, expected, "{}", file.name);
        assert_eq!(
            names(policy, "balances"),
            file.balance.iter().cloned().collect::<Vec<_>>(),
            "{}",
            file.name
        );
        let properties: BTreeMap<String, String> = policy["properties"]
            .as_array()
            .expect("properties")
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().expect("name").to_owned(),
                    p["value"].as_str().expect("value").to_owned(),
                )
            })
            .collect();
        assert_eq!(properties, file.properties, "{}", file.name);
    }
    assert_eq!(
        listed["none"]["id"], "b4ed2332-a7ac-4d5f-9596-99a439cb2812",
        "oVirt's GUID for `none`"
    );

    // Every built-in policy decides on a cluster of its own; those with a
    // balancer also balance.
    for file in &files {
        let path = cluster(&admin, &format!("on-{}", file.name), &file.id.to_string());
        let request = json!({
            "vm": { "id": format!("new-{}", file.name), "memory_mib": 1024, "vcpus": 1,
                    "highly_available": true },
            "hosts": hosts(),
            "vms": vms(),
        });
        let answer = expect_status(
            &admin.post(&format!("{path}/schedule?dry_run=true"), &request),
            200,
        );
        let chosen = answer["chosen_host"]
            .as_str()
            .unwrap_or_else(|| panic!("`{}` places the VM somewhere: {answer:#}", file.name));
        assert_ne!(chosen, "hot", "`{}` avoids the overloaded host", file.name);
        if file.balance.is_some() {
            let balance = expect_status(
                &admin.post(
                    &format!("{path}/balance?dry_run=true"),
                    &json!({ "hosts": hosts(), "vms": vms() }),
                ),
                200,
            );
            let outcome = balance["outcome"].as_str().unwrap_or_default();
            assert!(
                ["balanced", "migrate", "stay", "nowhere"].contains(&outcome),
                "`{}` balances: {balance:#}",
                file.name
            );
            // oVirt's load balancers move the least CPU-hungry VM off the
            // host that has been overloaded for five minutes.
            if ["evenly_distributed", "power_saving"].contains(&file.name.as_str()) {
                assert_eq!(outcome, "migrate", "`{}`: {balance:#}", file.name);
                assert_eq!(balance["vm_id"], "v2", "`{}`: {balance:#}", file.name);
                let to = balance["destination"].as_str().unwrap_or_default();
                assert!(
                    ["cool", "warm"].contains(&to),
                    "`{}`: {balance:#}",
                    file.name
                );
            }
        }
    }

    // Locked: changing a built-in policy is refused, and nothing changes;
    // a clone is an ordinary, unlocked policy with the same units.
    let none = &listed["none"];
    let none_path = format!(
        "/api/v1/schedulingpolicies/{}",
        none["id"].as_str().expect("id")
    );
    let refused = admin.put(&none_path, &json!({ "description": "mine now" }));
    assert_eq!(refused.status, 409, "{}", refused.json());
    assert_eq!(refused.code(), "policy_locked");
    assert_eq!(expect_status(&admin.get(&none_path), 200), *none);
    let clone = expect_status(
        &admin.post(&format!("{none_path}/clone"), &json!({ "name": "my-none" })),
        201,
    );
    assert_eq!(clone["locked"], false);
    assert_eq!(names(&clone, "filters"), names(none, "filters"));
    assert_eq!(names(&clone, "weights"), names(none, "weights"));
}
