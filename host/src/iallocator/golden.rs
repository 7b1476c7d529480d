//! Golden tests: Ganeti's own hail inputs (tests/api/golden/iallocator/,
//! copied from ganeti/ganeti's test/data/htools/) answered offline with
//! the default policy, checked against the stored answers and for the
//! decisions that follow from the policy. `SANDPIPER_UPDATE_GOLDEN=1`
//! rewrites the stored answers.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::{Value, json};

use super::decide::Local;
use super::wire::{Envelope, InputError};
use super::{RunError, policy, run};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/api/golden/iallocator")
}

/// The default policy, compiled once for every test (no cache written).
fn local() -> &'static Local {
    static LOCAL: OnceLock<Local> = OnceLock::new();
    LOCAL.get_or_init(|| {
        let policy = policy::resolve(policy::DEFAULT_POLICY).expect("the default policy");
        policy::local_in(&policy, None).expect("the default policy assembles")
    })
}

fn input(name: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(format!("{name}.json"))).expect("fixture");
    serde_json::from_str(&text).expect("fixture JSON")
}

fn answer(input: &Value) -> Envelope {
    let bytes = serde_json::to_vec(input).expect("bytes");
    run(&bytes, local()).expect("decided")
}

/// Compares with (or writes) `<name>.out.json`.
fn golden(name: &str, envelope: &Envelope) {
    let path = dir().join(format!("{name}.out.json"));
    let got = serde_json::to_value(envelope).expect("json");
    if std::env::var_os("SANDPIPER_UPDATE_GOLDEN").is_some() {
        let text = serde_json::to_string_pretty(&got).expect("json") + "\n";
        std::fs::write(&path, text).expect("write golden");
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} missing: run with SANDPIPER_UPDATE_GOLDEN=1",
            path.display()
        )
    });
    let want: Value = serde_json::from_str(&text).expect("golden JSON");
    assert_eq!(
        got,
        want,
        "{name}: the answer differs from {}",
        path.display()
    );
}

fn nodes(result: &Value) -> Vec<String> {
    serde_json::from_value(result.clone()).expect("a list of node names")
}

#[test]
fn drbd_allocation_takes_two_different_nodes_the_emptiest() {
    let envelope = answer(&input("hail-alloc-drbd"));
    golden("hail-alloc-drbd", &envelope);
    assert!(envelope.success, "{}", envelope.info);
    let chosen = nodes(&envelope.result);
    assert_eq!(chosen.len(), 2, "required_nodes is 2");
    assert_ne!(chosen[0], chosen[1]);
    // node3 and node4 carry every instance; node1 and node2 are empty,
    // and the policy's weighers spread.
    let mut sorted = chosen.clone();
    sorted.sort();
    assert_eq!(sorted, ["node1", "node2"]);
    assert!(
        envelope
            .info
            .starts_with("Request successful: Selected group: default")
    );
}

#[test]
fn an_instance_no_node_can_hold_fails_with_counts_per_reason() {
    let mut big = input("hail-alloc-drbd");
    big["request"]["memory"] = json!(32_000);
    let envelope = answer(&big);
    golden("alloc-too-much-memory", &envelope);
    assert!(!envelope.success);
    assert_eq!(envelope.result, json!([]), "result is [] on failure");
    assert!(
        envelope.info.starts_with(
            "Request failed: Can't find a suitable node for position 1 (already selected: )"
        ),
        "{}",
        envelope.info
    );
    assert!(envelope.info.ends_with("FailMem: 4"), "{}", envelope.info);
}

#[test]
fn relocation_finds_a_new_secondary_off_the_instance_nodes() {
    let envelope = answer(&input("hail-reloc-drbd"));
    golden("hail-reloc-drbd", &envelope);
    assert!(envelope.success, "{}", envelope.info);
    let chosen = nodes(&envelope.result);
    assert_eq!(chosen.len(), 1);
    assert!(
        ["node1", "node2"].contains(&chosen[0].as_str()),
        "{chosen:?}"
    );
}

#[test]
fn node_evacuation_moves_the_instance_in_every_mode() {
    let envelope = answer(&input("hail-node-evac"));
    golden("hail-node-evac", &envelope);
    assert!(envelope.success);
    assert!(
        envelope.info.starts_with(
            "Request successful: 0 instances failed to move and 1 were moved successfully"
        ),
        "{}",
        envelope.info
    );
    // instance2 is DRBD on node3 (primary) and node4; `all` replaces both.
    let moved = &envelope.result[0][0];
    assert_eq!(moved[0], "instance2");
    assert_eq!(moved[1], "default");
    let new = nodes(&moved[2]);
    assert!(new.iter().all(|n| n == "node1" || n == "node2"), "{new:?}");
    assert_eq!(envelope.result[1], json!([]));
    assert_eq!(envelope.result[2][0].as_array().map(Vec::len), Some(3));

    for (mode, want) in [("primary-only", None), ("secondary-only", Some("node3"))] {
        let mut variant = input("hail-node-evac");
        variant["request"]["evac_mode"] = json!(mode);
        let envelope = answer(&variant);
        golden(&format!("hail-node-evac.{mode}"), &envelope);
        assert!(
            envelope.info.contains("1 were moved"),
            "{mode}: {}",
            envelope.info
        );
        let new = nodes(&envelope.result[0][0][2]);
        match want {
            // A failover: the secondary becomes the primary.
            None => assert_eq!(new, ["node4", "node3"], "{mode}"),
            // A new secondary; the primary stays.
            Some(primary) => {
                assert_eq!(new[0], primary, "{mode}");
                assert!(
                    ["node1", "node2"].contains(&new[1].as_str()),
                    "{mode}: {new:?}"
                );
            }
        }
    }
}

#[test]
fn a_group_change_moves_the_instance_into_another_group() {
    let input = input("hail-change-group");
    let envelope = answer(&input);
    golden("hail-change-group", &envelope);
    assert!(
        envelope.info.starts_with(
            "Request successful: 0 instances failed to move and 1 were moved successfully"
        ),
        "{}",
        envelope.info
    );
    let moved = &envelope.result[0][0];
    let new = nodes(&moved[2]);
    assert_eq!(new.len(), 2);
    assert_ne!(new[0], new[1]);
    let group_of = |node: &str| input["nodes"][node]["group"].as_str().map(str::to_owned);
    let old = group_of("node3");
    for node in &new {
        assert_ne!(group_of(node), old, "{node} is in the instance's old group");
        assert_eq!(group_of(node), group_of(&new[0]), "both in one group");
    }
}

#[test]
fn multi_allocation_places_each_instance_and_sees_the_earlier_ones() {
    let envelope = answer(&input("hail-multialloc-dedicated"));
    golden("hail-multialloc-dedicated", &envelope);
    assert!(envelope.success);
    let placed = envelope.result[0].as_array().expect("placed");
    assert_eq!(placed.len(), 2, "{}", envelope.info);
    assert_eq!(envelope.result[1], json!([]));
    // node4-full has no memory left; each instance takes a quarter.
    for entry in placed {
        assert_ne!(entry[1][0], "node4-full");
    }
}

#[test]
fn a_one_node_allocation_with_two_disks_counts_both() {
    let envelope = answer(&input("hail-alloc-twodisks"));
    golden("hail-alloc-twodisks", &envelope);
    assert_eq!(envelope.result, json!(["node1"]));
}

#[test]
fn bad_input_names_what_is_wrong() {
    let fail = |bytes: &[u8]| match run(bytes, local()) {
        Err(RunError::Input(e)) => e,
        other => panic!("expected an input error, got {other:?}"),
    };
    assert!(matches!(fail(b""), InputError::Json(_)));
    assert!(matches!(fail(b"[]"), InputError::Key { ref path, .. } if path == "$"));
    assert!(
        matches!(fail(b"{}"), InputError::Key { ref message, .. } if message == "key 'request' not found")
    );
    assert!(
        matches!(fail(br#"{"request": 0}"#), InputError::Key { ref path, .. } if path == "request.type")
    );
    let invalid = std::fs::read(dir().join("hail-invalid-reloc.json")).expect("fixture");
    let error = fail(&invalid);
    assert!(
        matches!(error, InputError::Key { ref path, .. } if path == "request.name"),
        "{error}"
    );
    let mut unknown = input("hail-reloc-drbd");
    unknown["request"]["name"] = json!("nosuch");
    let bytes = serde_json::to_vec(&unknown).expect("bytes");
    assert!(matches!(run(&bytes, local()), Err(RunError::Request(_))));
}

#[test]
fn a_disk_outside_the_groups_instance_policy_fails_as_hail_does() {
    // Two 768 MiB disks, under the group's minimum disk size of 1024.
    let envelope = answer(&input("hail-alloc-invalid-twodisks"));
    golden("hail-alloc-invalid-twodisks", &envelope);
    assert!(!envelope.success);
    assert!(envelope.info.ends_with("FailDisk: 1"), "{}", envelope.info);
}
