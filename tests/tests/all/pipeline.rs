//! The scheduling pipeline end to end: combination arithmetic (rank and
//! normalised, ties), filter order and outcomes, failures, parameters,
//! balancing, and golden explain records.
//!
//! Units are the real test components (`Scripted`, `ScriptedHigher`,
//! `Hostile`) run by the real sandbox; small native units stand in only
//! where a test needs several differently-scripted score units at once or a
//! balancer with a fixed answer, which is pure arithmetic over their output.
//! Goldens live in `tests/golden/*.json` and are compared exactly, with
//! every `elapsed_us` masked (fuel is deterministic and kept); regenerate
//! them with `UPDATE_GOLDEN=1 cargo test -p sandpiper-tests pipeline`.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use sandpiper::pipeline::{
    BalanceError, BalanceInput, Combination, Decision, OnFailure, Outcome, ParamError, ParamValues,
    Policy, PolicyError, Position, Ranked, ScheduleError, ScheduleRequest, Standing, balance,
    schedule, schedule_calling_every_unit,
};
use sandpiper::sandbox::Runtime;
use sandpiper::snapshot::Snapshot;
use sandpiper::unit::{Role, Unit, UnitError};
use sandpiper_guest::Inventory;
use sandpiper_guest::model::{
    BalanceRequest, Migration, Rejection, Request, RequestProperty, ScoreOrder, Scores, UnitInfo,
    Vm, VmGroup,
};
use sandpiper_guest::native::{BalanceFn, NativeUnit, ScoreFn};
use sandpiper_test_hostile::MODE;
use sandpiper_tests::guests::{
    GuestComponent, SANDPIPER_TEST_HOSTILE, SANDPIPER_TEST_SCRIPTED, SANDPIPER_TEST_SCRIPTED_HIGHER,
};

/// One runtime for the module, so each test component compiles once.
static RUNTIME: LazyLock<Runtime> = LazyLock::new(sandpiper_tests::runtime);

fn component(guest: &GuestComponent) -> Arc<dyn Unit> {
    RUNTIME
        .load(guest.bytes)
        .unwrap_or_else(|error| panic!("{} should load: {error}", guest.package))
}

/// `Scripted`: rejects hosts whose named metric `reject` is above 0 and
/// scores each by the named metric `metric` (default `score`), lower better.
fn scripted() -> Arc<dyn Unit> {
    component(&SANDPIPER_TEST_SCRIPTED)
}

/// `ScriptedHigher`: the same, higher better.
fn scripted_higher() -> Arc<dyn Unit> {
    component(&SANDPIPER_TEST_SCRIPTED_HIGHER)
}

/// `Hostile`: misbehaves as its `mode` parameter says.
fn hostile() -> Arc<dyn Unit> {
    component(&SANDPIPER_TEST_HOSTILE)
}

// ---- shared helpers ----

/// A snapshot from the JSON cluster format.
fn cluster(json: &str) -> Arc<Inventory> {
    let snapshot = Snapshot::from_json(json).expect("test snapshot parses");
    Arc::new(snapshot.build().expect("test snapshot builds").inventory)
}

/// Three hosts A, B, C with named metrics.
fn abc(metrics: [&str; 3]) -> Arc<Inventory> {
    cluster(&format!(
        r#"{{"hosts": [
            {{"id": "A", "named_metrics": {{{}}}}},
            {{"id": "B", "named_metrics": {{{}}}}},
            {{"id": "C", "named_metrics": {{{}}}}}]}}"#,
        metrics[0], metrics[1], metrics[2]
    ))
}

/// Native score units reading one named metric each, for the combination
/// arithmetic (a policy holds a unit once, so each needs its own name).
macro_rules! metric_score {
    ($fn:ident, $metric:literal) => {
        fn $fn(inventory: &Inventory, _: &Request, candidates: &[u32]) -> Scores {
            let column = inventory.host_named_metric($metric);
            Scores::new(candidates.iter().map(|&h| column[h as usize]).collect())
        }
    };
}
metric_score!(by_cpu, "cpu");
metric_score!(by_mem, "mem");
metric_score!(by_ram, "ram");

fn native_score(name: &str, score: ScoreFn, order: ScoreOrder) -> Arc<dyn Unit> {
    Arc::new(NativeUnit {
        info: UnitInfo::new(name, "test score unit").with_score_order(order),
        filter: None,
        score: Some(score),
        balance: None,
    })
}

fn run(policy: &Policy, inventory: &Arc<Inventory>) -> Decision {
    schedule(policy, inventory, &ScheduleRequest::default()).expect("a decision")
}

fn params(pairs: &[(&str, &str)]) -> ParamValues {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn ids(d: &Decision, hosts: &[u32]) -> Vec<String> {
    hosts.iter().map(|&h| d.explain.host_id(h)).collect()
}

fn totals(d: &Decision) -> Vec<f64> {
    d.explain.totals.clone()
}

// ---- combination: rank ----

#[test]
fn rank_reproduces_ovirts_worked_example() {
    // The reference's worked example (ovirt-engine-scheduling.md §3): CPU
    // weights [10, 20, 20] with factor 2, memory [900, 100, 500] with factor
    // 1, lower is better. oVirt's RankSelector gives tied hosts the rank of
    // the best of their group, so CPU ranks are [0, 1, 1] and points
    // (n − 1 − rank) × 2 = [4, 2, 2]; memory ranks [2, 0, 1] give [0, 2, 1].
    // Totals are [4, 4, 3] (the note's "[4, 2, 1]" has CPU points [4, 0, 0],
    // which its own formula does not give); A wins, tied with B, on
    // candidate order.
    let inventory = abc([
        r#""cpu": 10, "mem": 900"#,
        r#""cpu": 20, "mem": 100"#,
        r#""cpu": 20, "mem": 500"#,
    ]);
    let policy = Policy::builder()
        .score(native_score("Cpu", by_cpu, ScoreOrder::LowerIsBetter), 2)
        .score(native_score("Mem", by_mem, ScoreOrder::LowerIsBetter), 1)
        .build()
        .expect("valid policy");
    let d = run(&policy, &inventory);
    assert_eq!(d.chosen, Some(0));
    assert_eq!(totals(&d), [4.0, 4.0, 3.0]);
    assert_eq!(d.explain.scores[0].standing, Standing::Ranks(vec![0, 1, 1]));
    assert_eq!(d.explain.scores[1].standing, Standing::Ranks(vec![2, 0, 1]));
    assert_eq!(
        d.ranked,
        [
            Ranked {
                host: 0,
                total: 4.0
            },
            Ranked {
                host: 1,
                total: 4.0
            },
            Ranked {
                host: 2,
                total: 3.0
            }
        ]
    );
    assert_eq!(
        d.explain.outcome,
        Outcome::Weighed {
            winner: 0,
            tied_with: vec![1]
        }
    );
}

#[test]
fn rank_ignores_magnitudes_and_factor_zero_silences_a_unit() {
    // Memory is worth little by rank (it only orders), however far apart
    // the values are; the CPU unit with factor 0 is not even called.
    let inventory = abc([
        r#""cpu": 1, "mem": 1"#,
        r#""cpu": 9, "mem": 2"#,
        r#""cpu": 9, "mem": 1000000"#,
    ]);
    let policy = Policy::builder()
        .score(native_score("Cpu", by_cpu, ScoreOrder::HigherIsBetter), 0)
        .score(native_score("Mem", by_mem, ScoreOrder::HigherIsBetter), 1)
        .build()
        .expect("valid policy");
    let d = run(&policy, &inventory);
    assert!(!d.explain.scores[0].called);
    assert_eq!(d.explain.scores[0].usage, None);
    assert_eq!(totals(&d), [0.0, 1.0, 2.0]);
    assert_eq!(d.chosen, Some(2));
}

#[test]
fn ties_go_to_the_first_candidate_in_candidate_order() {
    let inventory = abc([r#""cpu": 5"#, r#""cpu": 5"#, r#""cpu": 7"#]);
    for combination in [Combination::Rank, Combination::Normalised] {
        let policy = Policy::builder()
            .score(native_score("Cpu", by_cpu, ScoreOrder::LowerIsBetter), 1)
            .combination(combination)
            .build()
            .expect("valid policy");
        let d = run(&policy, &inventory);
        assert_eq!(d.chosen, Some(0), "{combination:?}");
        assert_eq!(
            d.explain.outcome,
            Outcome::Weighed {
                winner: 0,
                tied_with: vec![1]
            }
        );
        // Offered B first, B wins the same tie.
        let request = ScheduleRequest {
            candidates: Some(vec![2, 1, 0]),
            ..ScheduleRequest::default()
        };
        let d = schedule(&policy, &inventory, &request).expect("a decision");
        assert_eq!(d.chosen, Some(1), "{combination:?}");
        assert_eq!(
            d.ranked.iter().map(|r| r.host).collect::<Vec<_>>(),
            [1, 0, 2]
        );
    }
}

// ---- combination: normalised ----

#[test]
fn normalised_weighs_spread_where_rank_only_weighs_order() {
    // CPU (lower better) puts B half-way between A and C; RAM (higher
    // better) puts B almost level with C. By rank each unit only orders, the
    // totals tie and A wins on candidate order; normalised keeps the
    // distances, and B, close to the best on both, wins.
    let inventory = abc([
        r#""cpu": 10, "ram": 100"#,
        r#""cpu": 11, "ram": 9999"#,
        r#""cpu": 12, "ram": 10000"#,
    ]);
    let builder = || {
        Policy::builder()
            .score(native_score("Cpu", by_cpu, ScoreOrder::LowerIsBetter), 1)
            .score(native_score("Ram", by_ram, ScoreOrder::HigherIsBetter), 1)
    };
    let rank = run(&builder().build().expect("valid policy"), &inventory);
    assert_eq!(totals(&rank), [2.0, 2.0, 2.0]);
    assert_eq!(rank.chosen, Some(0));
    assert_eq!(
        rank.explain.outcome,
        Outcome::Weighed {
            winner: 0,
            tied_with: vec![1, 2]
        }
    );

    let normalised = run(
        &builder()
            .combination(Combination::Normalised)
            .build()
            .expect("valid policy"),
        &inventory,
    );
    assert_eq!(normalised.chosen, Some(1));
    assert_eq!(
        normalised.explain.scores[0].standing,
        Standing::Normalised(vec![1.0, 0.5, 0.0])
    );
    let t = totals(&normalised);
    let expected = [1.0, 0.5 + 9899.0 / 9900.0, 1.0];
    assert!(
        t.iter().zip(expected).all(|(a, b)| (a - b).abs() < 1e-12),
        "{t:?}"
    );
}

#[test]
fn normalised_ties_when_every_unit_is_flat() {
    let inventory = abc([r#""cpu": 3"#, r#""cpu": 3"#, r#""cpu": 3"#]);
    let policy = Policy::builder()
        .score(native_score("Cpu", by_cpu, ScoreOrder::HigherIsBetter), 5)
        .combination(Combination::Normalised)
        .build()
        .expect("valid policy");
    let d = run(&policy, &inventory);
    assert_eq!(totals(&d), [0.0, 0.0, 0.0]);
    assert_eq!(d.chosen, Some(0));
    assert_eq!(
        d.explain.outcome,
        Outcome::Weighed {
            winner: 0,
            tied_with: vec![1, 2]
        }
    );
}

// ---- filters ----

/// A filter rejecting nothing, for ordering tests: it exports filter only.
fn pass(_: &Inventory, _: &Request, _: &[u32]) -> Vec<Rejection> {
    Vec::new()
}

fn pass_filter(name: &str) -> Arc<dyn Unit> {
    Arc::new(NativeUnit {
        info: UnitInfo::new(name, "passes everything"),
        filter: Some(pass),
        score: None,
        balance: None,
    })
}

#[test]
fn first_and_last_filters_run_first_and_last() {
    let inventory = abc(["", "", ""]);
    let policy = Policy::builder()
        .filter(pass_filter("M1"))
        .filter_with(pass_filter("L"), Position::Last, OnFailure::FailClosed)
        .filter(pass_filter("M2"))
        .filter_with(pass_filter("F"), Position::First, OnFailure::FailClosed)
        .filter(pass_filter("M3"))
        .build()
        .expect("valid policy");
    let order: Vec<&str> = policy
        .filters()
        .iter()
        .map(|f| f.unit.info().name.as_str())
        .collect();
    assert_eq!(order, ["F", "M1", "M2", "M3", "L"]);
    let d = run(&policy, &inventory);
    let ran: Vec<&str> = d.explain.filters.iter().map(|f| f.unit.as_str()).collect();
    assert_eq!(ran, ["F", "M1", "M2", "M3", "L"]);
    assert_eq!(d.explain.filters[0].position, Position::First);
    assert_eq!(d.explain.filters[4].position, Position::Last);
}

#[test]
fn a_policy_has_at_most_one_first_and_one_last_filter() {
    let first = |name| (pass_filter(name), Position::First, OnFailure::FailClosed);
    let (a, p, o) = first("F1");
    let (b, q, r) = first("F2");
    let err = Policy::builder()
        .filter_with(a, p, o)
        .filter_with(b, q, r)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        PolicyError::SecondFirst {
            unit: "F2".into(),
            first: "F1".into()
        }
    );
    let err = Policy::builder()
        .filter_with(pass_filter("L1"), Position::Last, OnFailure::FailOpen)
        .filter_with(pass_filter("L2"), Position::Last, OnFailure::FailClosed)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        PolicyError::SecondLast {
            unit: "L2".into(),
            last: "L1".into()
        }
    );
}

#[test]
fn a_unit_fills_a_role_once_and_only_roles_it_exports() {
    let unit = scripted();
    let name = unit.info().name.clone();
    let err = Policy::builder()
        .filter(Arc::clone(&unit))
        .filter(Arc::clone(&unit))
        .build()
        .unwrap_err();
    assert_eq!(err, PolicyError::DuplicateUnit { unit: name.clone() });
    // One unit may filter and score (oVirt's affinity units do both).
    Policy::builder()
        .filter(Arc::clone(&unit))
        .score(Arc::clone(&unit), 1)
        .build()
        .expect("filter and score are two roles");
    let err = Policy::builder().balance(unit).build().unwrap_err();
    assert_eq!(
        err,
        PolicyError::NotExported {
            unit: name,
            role: Role::Balance
        }
    );
    let err = Policy::builder()
        .score(pass_filter("OnlyFilters"), 1)
        .build()
        .unwrap_err();
    assert!(matches!(
        err,
        PolicyError::NotExported {
            role: Role::Score,
            ..
        }
    ));
}

#[test]
fn a_single_survivor_is_chosen_without_scoring() {
    let inventory = abc([r#""reject": 1"#, r#""score": 1"#, r#""reject": 1"#]);
    let policy = Policy::builder()
        .filter(scripted())
        .score(scripted_higher(), 1)
        .build()
        .expect("valid policy");
    let d = run(&policy, &inventory);
    assert_eq!(d.chosen, Some(1));
    assert_eq!(d.explain.outcome, Outcome::SingleSurvivor { host: 1 });
    // The score unit was never called.
    assert!(d.explain.scores.is_empty());
    assert!(d.explain.scored.is_empty());
    assert_eq!(
        d.ranked,
        [Ranked {
            host: 1,
            total: 0.0
        }]
    );
}

#[test]
fn no_host_lists_every_rejection_and_stops_the_chain() {
    let inventory = abc([r#""reject": 1"#, r#""reject": 2"#, r#""reject": 1"#]);
    let policy = Policy::builder()
        .filter(scripted())
        .filter(pass_filter("NeverRuns"))
        .score(scripted_higher(), 1)
        .build()
        .expect("valid policy");
    let d = run(&policy, &inventory);
    assert_eq!(d.chosen, None);
    assert!(d.ranked.is_empty());
    assert_eq!(d.explain.outcome, Outcome::NoHost);
    assert_eq!(
        d.explain.filters.len(),
        1,
        "the chain stops at no survivors"
    );
    let rejections: Vec<(&str, String, Vec<String>)> = d
        .explain
        .rejections()
        .into_iter()
        .map(|(unit, reason, hosts)| (unit, reason, ids(&d, &hosts)))
        .collect();
    let unit = d.explain.filters[0].unit.as_str();
    assert_eq!(
        rejections,
        [(
            unit,
            "scripted rejection".to_owned(),
            vec!["A".into(), "B".into(), "C".into()]
        )]
    );
    assert!(d.explain.scores.is_empty());
}

// ---- failures ----

#[test]
fn a_failing_fail_closed_filter_fails_the_decision() {
    let inventory = abc(["", "", ""]);
    let policy = Policy::builder()
        .filter(hostile())
        .param(MODE, "panic")
        .build()
        .expect("valid policy");
    let err = schedule(&policy, &inventory, &ScheduleRequest::default()).unwrap_err();
    let ScheduleError::FilterFailed { unit, failed } = err else {
        panic!("expected FilterFailed, got {err:?}");
    };
    assert_eq!(unit, hostile().info().name);
    assert!(
        matches!(failed.error, UnitError::Trap { .. }),
        "{:?}",
        failed.error
    );
}

#[test]
fn a_failing_fail_open_filter_is_skipped_and_recorded() {
    let inventory = abc([
        r#""score": 3"#,
        r#""score": 1, "reject": 1"#,
        r#""score": 2"#,
    ]);
    let policy = Policy::builder()
        .filter_with(hostile(), Position::First, OnFailure::FailOpen)
        .filter(scripted())
        .score(scripted_higher(), 1)
        .param(MODE, "panic")
        .build()
        .expect("valid policy");
    let d = run(&policy, &inventory);
    let skipped = &d.explain.filters[0];
    assert_eq!(skipped.failure.as_ref().map(|f| f.code), Some("trap"));
    assert_eq!((skipped.input, skipped.survivors), (3, 3));
    assert!(skipped.rejected.is_empty());
    // The rest of the policy still ran and decided.
    assert_eq!(d.explain.filters[1].survivors, 2);
    assert_eq!(d.chosen, Some(0));
}

#[test]
fn filter_answers_must_name_candidates_once() {
    let inventory = abc(["", "", ""]);
    for mode in ["bad-index", "duplicate-index"] {
        let policy = Policy::builder()
            .filter(hostile())
            .param(MODE, mode)
            .build()
            .expect("valid policy");
        let err = schedule(&policy, &inventory, &ScheduleRequest::default()).unwrap_err();
        let ScheduleError::FilterFailed { failed, .. } = err else {
            panic!("{mode}: expected FilterFailed, got {err:?}");
        };
        assert!(
            matches!(failed.error, UnitError::InvalidOutput(_)),
            "{mode}: {:?}",
            failed.error
        );
        // Fail-open, the invalid answer is ignored entirely.
        let policy = Policy::builder()
            .filter_with(hostile(), Position::Middle, OnFailure::FailOpen)
            .param(MODE, mode)
            .build()
            .expect("valid policy");
        let d = run(&policy, &inventory);
        assert_eq!(d.explain.filters[0].survivors, 3, "{mode}");
        assert_eq!(
            d.explain.filters[0].failure.as_ref().map(|f| f.code),
            Some("invalid_output")
        );
    }
}

#[test]
fn a_failing_score_unit_is_skipped_and_recorded() {
    let inventory = abc([r#""score": 1"#, r#""score": 3"#, r#""score": 2"#]);
    for (mode, code) in [
        ("panic", "trap"),
        ("nan", "invalid_output"),
        ("wrong-length", "invalid_output"),
    ] {
        let policy = Policy::builder()
            .score(hostile(), 10)
            .score(scripted_higher(), 1)
            .param(MODE, mode)
            .build()
            .expect("valid policy");
        let d = run(&policy, &inventory);
        let failed = &d.explain.scores[0];
        assert!(failed.called);
        assert_eq!(
            failed.failure.as_ref().map(|f| f.code),
            Some(code),
            "{mode}"
        );
        assert_eq!(failed.standing, Standing::None);
        assert_eq!(d.chosen, Some(1), "{mode}: the other unit decides");
    }
}

#[test]
fn a_failing_fail_closed_score_unit_fails_the_decision_naming_it() {
    let inventory = abc([r#""score": 1"#, r#""score": 3"#, r#""score": 2"#]);
    for (mode, code) in [
        ("panic", "trap"),
        ("loop", "out_of_fuel"),
        ("nan", "invalid_output"),
        ("infinite", "invalid_output"),
        ("wrong-length", "invalid_output"),
    ] {
        let policy = Policy::builder()
            .score_with(hostile(), 10, OnFailure::FailClosed)
            .score(scripted_higher(), 1)
            .param(MODE, mode)
            .build()
            .expect("valid policy");
        let error = schedule(&policy, &inventory, &ScheduleRequest::default())
            .expect_err("a fail-closed weight failed");
        let ScheduleError::ScoreFailed { unit, failed } = error else {
            panic!("{mode}: not a weight's failure: {error}");
        };
        assert_eq!(unit, hostile().info().name, "{mode}");
        assert_eq!(failed.error.code(), code, "{mode}");
    }
}

// ---- candidates ----

#[test]
fn candidates_must_be_distinct_hosts_of_the_snapshot() {
    let inventory = abc(["", "", ""]);
    let policy = Policy::builder()
        .filter(scripted())
        .build()
        .expect("valid policy");
    let request = |candidates: Vec<u32>| ScheduleRequest {
        candidates: Some(candidates),
        ..ScheduleRequest::default()
    };
    assert_eq!(
        schedule(&policy, &inventory, &request(vec![0, 3])).unwrap_err(),
        ScheduleError::CandidateOutOfRange {
            host: 3,
            host_count: 3
        }
    );
    assert_eq!(
        schedule(&policy, &inventory, &request(vec![1, 0, 1])).unwrap_err(),
        ScheduleError::DuplicateCandidate { host: 1 }
    );
    let d = schedule(&policy, &inventory, &request(vec![])).expect("a decision");
    assert_eq!(d.chosen, None);
    assert!(d.explain.filters.is_empty(), "no candidate, no filter call");
}

// ---- parameters ----

#[test]
fn an_unknown_parameter_is_refused_by_name() {
    let err = Policy::builder()
        .filter(scripted())
        .param("metirc", "score")
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        PolicyError::Param(ParamError::UnknownKey {
            key: "metirc".into()
        })
    );
    // The same check guards a cluster's overrides at decision time.
    let policy = Policy::builder()
        .filter(scripted())
        .build()
        .expect("valid policy");
    let request = ScheduleRequest {
        params: params(&[("HighUtilization", "80")]),
        ..ScheduleRequest::default()
    };
    assert_eq!(
        schedule(&policy, &abc(["", "", ""]), &request).unwrap_err(),
        ScheduleError::Params(ParamError::UnknownKey {
            key: "HighUtilization".into()
        })
    );
}

#[test]
fn a_bad_value_is_refused_naming_key_value_and_pattern() {
    let unit = scripted();
    let spec = unit
        .info()
        .param("metric")
        .expect("scripted declares `metric`")
        .clone();
    let err = Policy::builder()
        .filter(unit)
        .param("metric", "Not A Metric!")
        .build()
        .unwrap_err();
    let PolicyError::Param(ParamError::BadValue {
        key,
        value,
        pattern,
        ..
    }) = &err
    else {
        panic!("expected BadValue, got {err:?}");
    };
    assert_eq!((key.as_str(), value.as_str()), ("metric", "Not A Metric!"));
    assert_eq!(pattern, &spec.pattern);
    let message = err.to_string();
    assert!(
        message.contains("metric")
            && message.contains("Not A Metric!")
            && message.contains(&spec.pattern)
    );
}

#[test]
fn defaults_then_policy_values_then_cluster_overrides() {
    let inventory = abc([
        r#""score": 1, "alt": 30, "other": 200"#,
        r#""score": 3, "alt": 10, "other": 300"#,
        r#""score": 2, "alt": 20, "other": 100"#,
    ]);
    let raw = |d: &Decision| d.explain.scores[0].raw.clone();

    // Default: the unit's own default metric, `score`.
    let policy = Policy::builder()
        .score(scripted_higher(), 1)
        .build()
        .expect("valid policy");
    let d = run(&policy, &inventory);
    assert_eq!(raw(&d), [1.0, 3.0, 2.0]);
    assert_eq!(d.chosen, Some(1));

    // The policy's value beats the default.
    let policy = Policy::builder()
        .score(scripted_higher(), 1)
        .param("metric", "alt")
        .build()
        .expect("valid policy");
    let d = run(&policy, &inventory);
    assert_eq!(raw(&d), [30.0, 10.0, 20.0]);
    assert_eq!(d.chosen, Some(0));

    // The cluster's override beats the policy's value.
    let request = ScheduleRequest {
        params: params(&[("metric", "other")]),
        ..ScheduleRequest::default()
    };
    let d = schedule(&policy, &inventory, &request).expect("a decision");
    assert_eq!(raw(&d), [200.0, 300.0, 100.0]);
    assert_eq!(d.chosen, Some(1));
    assert!(
        policy
            .check_overrides(&params(&[("metric", "BAD VALUE")]))
            .is_err()
    );
}

// ---- balance ----

/// Proposes moving the first VM to every other candidate.
fn propose_first_vm(inventory: &Inventory, request: &BalanceRequest) -> Option<Migration> {
    let source = *inventory.vm_hosts().first()?;
    Some(Migration {
        vm: 0,
        destinations: request
            .candidates
            .iter()
            .copied()
            .filter(|&h| h != source)
            .collect(),
    })
}

fn balanced(_: &Inventory, _: &BalanceRequest) -> Option<Migration> {
    None
}

fn out_of_range_vm(_: &Inventory, _: &BalanceRequest) -> Option<Migration> {
    Some(Migration {
        vm: 7,
        destinations: vec![1],
    })
}

fn balancer(name: &str, balance: BalanceFn) -> Arc<dyn Unit> {
    Arc::new(NativeUnit {
        info: UnitInfo::new(name, "test balancer"),
        filter: None,
        score: None,
        balance: Some(balance),
    })
}

/// A, B, C with `score` metrics, and vm1 running on A.
fn with_vm_on_a(scores: [u32; 3]) -> Arc<Inventory> {
    cluster(&format!(
        r#"{{"hosts": [
            {{"id": "A", "named_metrics": {{"score": {}}}}},
            {{"id": "B", "named_metrics": {{"score": {}}}}},
            {{"id": "C", "named_metrics": {{"score": {}}}}}],
           "vms": [{{"id": "vm1", "host": "A", "memory_mib": 2048, "vcpus": 2}}]}}"#,
        scores[0], scores[1], scores[2]
    ))
}

#[test]
fn balance_moves_the_vm_when_a_destination_wins() {
    let inventory = with_vm_on_a([5, 9, 1]);
    let policy = Policy::builder()
        .score(scripted_higher(), 1)
        .balance(balancer("Mover", propose_first_vm))
        .build()
        .expect("valid policy");
    let d = balance(&policy, &inventory, &BalanceInput::default()).expect("a balance decision");
    assert_eq!(
        d.proposal,
        Some(Migration {
            vm: 0,
            destinations: vec![1, 2]
        })
    );
    assert_eq!(d.destination, Some(1));
    assert_eq!(d.explain.outcome(), "migrate");
    let schedule = d
        .explain
        .schedule
        .as_ref()
        .expect("the proposal was scheduled");
    // The source host is the first candidate.
    assert_eq!(schedule.scored, [0, 1, 2]);
}

#[test]
fn balance_keeps_the_vm_when_its_host_wins_or_ties() {
    let policy = Policy::builder()
        .score(scripted_higher(), 1)
        .balance(balancer("Mover", propose_first_vm))
        .build()
        .expect("valid policy");
    for scores in [[9, 5, 1], [9, 9, 1]] {
        let inventory = with_vm_on_a(scores);
        let d = balance(&policy, &inventory, &BalanceInput::default()).expect("a decision");
        assert!(d.proposal.is_some());
        assert_eq!(d.destination, None, "{scores:?}: no migration");
        assert_eq!(d.explain.outcome(), "stay");
    }
}

#[test]
fn balance_without_a_proposal_schedules_nothing() {
    let policy = Policy::builder()
        .score(scripted_higher(), 1)
        .balance(balancer("Calm", balanced))
        .build()
        .expect("valid policy");
    let d =
        balance(&policy, &with_vm_on_a([1, 2, 3]), &BalanceInput::default()).expect("a decision");
    assert_eq!((d.proposal, d.destination), (None, None));
    assert!(d.explain.schedule.is_none());
    assert_eq!(d.explain.outcome(), "balanced");
}

#[test]
fn an_invalid_proposal_is_the_balance_units_failure() {
    let policy = Policy::builder()
        .balance(balancer("Wild", out_of_range_vm))
        .build()
        .expect("valid policy");
    let err = balance(&policy, &with_vm_on_a([1, 2, 3]), &BalanceInput::default()).unwrap_err();
    let BalanceError::BalanceFailed { unit, failed } = err else {
        panic!("expected BalanceFailed, got {err:?}");
    };
    assert_eq!(unit, "Wild");
    assert!(matches!(failed.error, UnitError::InvalidOutput(_)));
    let no_balancer = Policy::builder()
        .score(scripted_higher(), 1)
        .build()
        .expect("valid policy");
    assert_eq!(
        balance(
            &no_balancer,
            &with_vm_on_a([1, 2, 3]),
            &BalanceInput::default()
        )
        .unwrap_err(),
        BalanceError::NoBalanceUnit
    );
}

// ---- golden explain records ----

/// The cluster of the golden records: h2 is rejected by `Scripted`;
/// `score` and `cpu` are scripted so that h3 and h4 tie in rank mode.
const GOLDEN_CLUSTER: &str = r#"{
  "hosts": [
    {"id": "h1", "named_metrics": {"score": 30, "cpu": 40}},
    {"id": "h2", "named_metrics": {"score": 10, "cpu": 20, "reject": 1}},
    {"id": "h3", "named_metrics": {"score": 30, "cpu": 10}},
    {"id": "h4", "named_metrics": {"score": 50, "cpu": 30}},
    {"id": "h5", "named_metrics": {"score": 20, "cpu": 20}}
  ],
  "vms": [{"id": "vm1", "host": "h1", "memory_mib": 4096, "vcpus": 2, "cpu_usage_percent": 40}]
}"#;

/// `Scripted` filters, `ScriptedHigher` (×2) and a native CPU cost (×1)
/// score.
fn golden_policy(combination: Combination) -> Policy {
    Policy::builder()
        .filter(scripted())
        .score(scripted_higher(), 2)
        .score(native_score("Cpu", by_cpu, ScoreOrder::LowerIsBetter), 1)
        .combination(combination)
        .build()
        .expect("valid policy")
}

/// Replaces every `elapsed_us` value in pretty-printed JSON: wall-clock
/// time differs run to run. (Done on the text, not on a `serde_json::Value`,
/// whose map would sort the fields and hide the record's own order.)
fn mask_times(json: &str) -> String {
    const FIELD: &str = "\"elapsed_us\": ";
    let mut masked = String::with_capacity(json.len());
    let mut rest = json;
    while let Some(at) = rest.find(FIELD) {
        let value = &rest[at + FIELD.len()..];
        let digits = value.len() - value.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        masked.push_str(&rest[..at + FIELD.len()]);
        masked.push_str("\"<masked>\"");
        rest = &value[digits..];
    }
    masked.push_str(rest);
    masked
}

/// Compares `record` with `tests/golden/<name>.json`, or rewrites the file
/// when `UPDATE_GOLDEN=1`.
fn assert_golden(name: &str, record: &impl serde::Serialize) {
    let json = serde_json::to_string_pretty(record).expect("explain records serialise");
    let actual = mask_times(&json) + "\n";
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join(format!("{name}.json"));
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &actual)
            .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "cannot read {}: {error} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    if expected != actual {
        let (line, (want, got)) = expected
            .lines()
            .chain(std::iter::repeat("<end of file>"))
            .zip(actual.lines().chain(std::iter::repeat("<end of file>")))
            .enumerate()
            .find(|(_, (want, got))| want != got)
            .unwrap_or((0, ("", "")));
        panic!(
            "{} differs from this run at line {}:\n  golden: {want}\n  actual: {got}\n\
             (run with UPDATE_GOLDEN=1 to accept the new record)\nfull record:\n{actual}",
            path.display(),
            line + 1
        );
    }
}

#[test]
fn golden_rank() {
    let d = run(&golden_policy(Combination::Rank), &cluster(GOLDEN_CLUSTER));
    assert_eq!(ids(&d, &[d.chosen.expect("a winner")]), ["h3"]);
    assert_golden("rank", &d.explain);
}

#[test]
fn golden_normalised() {
    let d = run(
        &golden_policy(Combination::Normalised),
        &cluster(GOLDEN_CLUSTER),
    );
    assert_golden("normalised", &d.explain);
}

#[test]
fn golden_no_host() {
    let request = ScheduleRequest {
        candidates: Some(vec![1]),
        ..ScheduleRequest::default()
    };
    let d = schedule(
        &golden_policy(Combination::Rank),
        &cluster(GOLDEN_CLUSTER),
        &request,
    )
    .expect("a decision");
    assert_eq!(d.chosen, None);
    assert_golden("no_host", &d.explain);
}

#[test]
fn golden_single_survivor() {
    let request = ScheduleRequest {
        candidates: Some(vec![1, 4]),
        ..ScheduleRequest::default()
    };
    let d = schedule(
        &golden_policy(Combination::Rank),
        &cluster(GOLDEN_CLUSTER),
        &request,
    )
    .expect("a decision");
    assert_eq!(d.chosen, Some(4));
    assert_golden("single_survivor", &d.explain);
}

/// Answers one score too many.
fn too_many_scores(_: &Inventory, _: &Request, candidates: &[u32]) -> Scores {
    Scores::new(vec![1.0; candidates.len() + 1])
}

/// A fail-open filter answering an index out of range (a panic would put
/// the guest's source line in the record) and a score unit answering one
/// score too many: both skipped, both recorded.
#[test]
fn golden_failures_skipped() {
    let policy = Policy::builder()
        .filter_with(hostile(), Position::First, OnFailure::FailOpen)
        .filter(scripted())
        .score(scripted_higher(), 2)
        .score(
            native_score("Broken", too_many_scores, ScoreOrder::LowerIsBetter),
            5,
        )
        .param(MODE, "bad-index")
        .build()
        .expect("valid policy");
    let d = run(&policy, &cluster(GOLDEN_CLUSTER));
    assert_eq!(ids(&d, &[d.chosen.expect("a winner")]), ["h4"]);
    assert_golden("failures_skipped", &d.explain);
}

#[test]
fn golden_balance() {
    let policy = Policy::builder()
        .filter(scripted())
        .score(scripted_higher(), 1)
        .balance(balancer("Mover", propose_first_vm))
        .build()
        .expect("valid policy");
    let d = balance(&policy, &cluster(GOLDEN_CLUSTER), &BalanceInput::default())
        .expect("a balance decision");
    assert_eq!(d.destination, Some(3));
    assert_golden("balance", &d.explain);
}

// ---- overload ----

/// A unit whose every call was starved of CPU by a busy machine.
struct Starved(UnitInfo);

impl Starved {
    fn unit() -> Arc<dyn Unit> {
        Arc::new(Starved(UnitInfo {
            name: "Starved".to_owned(),
            description: String::new(),
            params: Vec::new(),
            score_order: ScoreOrder::LowerIsBetter,
            applies_to: Default::default(),
            per_host: false,
        }))
    }

    fn failed<T>() -> sandpiper::unit::CallResult<T> {
        Err(sandpiper::unit::Failed {
            error: UnitError::Overloaded {
                deadline: std::time::Duration::from_millis(250),
                cpu: std::time::Duration::from_millis(3),
                elapsed: std::time::Duration::from_millis(400),
            },
            usage: sandpiper::unit::Usage::default(),
        })
    }
}

impl Unit for Starved {
    fn info(&self) -> &UnitInfo {
        &self.0
    }

    fn exports(&self) -> sandpiper::unit::Exports {
        sandpiper::unit::Exports {
            filter: true,
            score: true,
            balance: false,
        }
    }

    fn filter(
        &self,
        _: &Arc<Inventory>,
        _: &Request,
        _: &[u32],
    ) -> sandpiper::unit::CallResult<Vec<Rejection>> {
        Starved::failed()
    }

    fn score(
        &self,
        _: &Arc<Inventory>,
        _: &Request,
        _: &[u32],
    ) -> sandpiper::unit::CallResult<Scores> {
        Starved::failed()
    }

    fn balance(
        &self,
        _: &Arc<Inventory>,
        _: &BalanceRequest,
    ) -> sandpiper::unit::CallResult<Option<Migration>> {
        Starved::failed()
    }
}

#[test]
fn a_starved_unit_stops_the_decision_even_where_a_failure_would_be_skipped() {
    let inventory = Arc::new(Inventory::new(3, 0));
    // A fail-open filter and a score unit are skipped when they fail; when
    // the machine starved them, deciding without them would make the load
    // a verdict, so the decision stops for the engine to retry.
    let fail_open = Policy::builder()
        .filter_with(Starved::unit(), Position::Middle, OnFailure::FailOpen)
        .build()
        .expect("valid policy");
    let scored = Policy::builder()
        .score(Starved::unit(), 1)
        .build()
        .expect("valid policy");
    for policy in [fail_open, scored] {
        match schedule(&policy, &inventory, &ScheduleRequest::default()) {
            Err(ScheduleError::Overloaded { unit, failed }) => {
                assert_eq!(unit, "Starved");
                assert_eq!(failed.error.code(), "overloaded");
            }
            other => panic!("expected Overloaded, got {other:?}"),
        }
    }
}

// ---- units that declare which requests concern them ----

/// Calls of `grouped_filter`, to see whether the pipeline called it.
static GROUPED_CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Rejects host A when the VM is in a group; nothing otherwise, as its
/// declaration promises.
fn grouped_filter(_: &Inventory, request: &Request, candidates: &[u32]) -> Vec<Rejection> {
    GROUPED_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    match request.vm.groups.is_empty() {
        true => Vec::new(),
        false => vec![Rejection::new("grouped", candidates[..1].to_vec())],
    }
}

/// Prefers C for a VM in a group; the same score for all otherwise.
fn grouped_score(_: &Inventory, request: &Request, candidates: &[u32]) -> Scores {
    let grouped = !request.vm.groups.is_empty();
    Scores::new(
        candidates
            .iter()
            .map(|&h| if grouped && h == 2 { 0.0 } else { 5.0 })
            .collect(),
    )
}

/// A score that breaks its promise: it spreads hosts without a group.
fn dishonest_score(_: &Inventory, _: &Request, candidates: &[u32]) -> Scores {
    Scores::new(candidates.iter().map(|&h| f64::from(h)).collect())
}

fn grouped_unit(name: &str, score: ScoreFn) -> Arc<dyn Unit> {
    Arc::new(NativeUnit {
        info: UnitInfo::new(name, "concerns grouped VMs only")
            .applies_to([RequestProperty::Groups]),
        filter: Some(grouped_filter),
        score: Some(score),
        balance: None,
    })
}

#[test]
fn a_unit_is_skipped_for_requests_it_declared_do_not_concern_it_and_nothing_changes() {
    let inventory = abc([r#""cpu": 3"#, r#""cpu": 1"#, r#""cpu": 2"#]);
    let unit = grouped_unit("Grouped", grouped_score);
    for combination in [Combination::Rank, Combination::Normalised] {
        let policy = Policy::builder()
            .combination(combination)
            .filter(Arc::clone(&unit))
            .score(Arc::clone(&unit), 3)
            .score(native_score("ByCpu", by_cpu, ScoreOrder::LowerIsBetter), 1)
            .build()
            .expect("valid");
        let plain = ScheduleRequest::default();
        let before = GROUPED_CALLS.load(std::sync::atomic::Ordering::Relaxed);
        let skipping = schedule(&policy, &inventory, &plain).expect("decides");
        // Other tests may call it meanwhile; none of them skips it.
        let calling = schedule_calling_every_unit(&policy, &inventory, &plain).expect("decides");
        assert!(GROUPED_CALLS.load(std::sync::atomic::Ordering::Relaxed) > before);
        assert_eq!(
            skipping.ranked, calling.ranked,
            "{combination:?}: totals too"
        );
        assert_eq!(skipping.chosen, Some(1));
        let filter = &skipping.explain.filters[0];
        assert_eq!(
            filter.skipped.as_deref(),
            Some("the request has none of: groups")
        );
        assert_eq!(filter.survivors, 3);
        let score = &skipping.explain.scores[0];
        assert!(!score.called && score.skipped.is_some() && score.raw.is_empty());
        assert!(calling.explain.filters[0].skipped.is_none());

        // A request with the property runs the unit.
        let grouped = ScheduleRequest {
            vm: Vm {
                groups: vec![VmGroup::default()],
                ..Vm::default()
            },
            ..ScheduleRequest::default()
        };
        let decision = schedule(&policy, &inventory, &grouped).expect("decides");
        assert!(decision.explain.filters[0].skipped.is_none());
        assert_eq!(decision.explain.filters[0].survivors, 2);
        assert_eq!(decision.chosen, Some(2));
    }
}

#[test]
fn a_unit_breaking_its_declaration_is_caught_by_deciding_both_ways() {
    // What the default policies' equality test relies on: a declaration
    // that is not true changes the decision.
    let inventory = abc([r#""cpu": 1"#, r#""cpu": 1"#, r#""cpu": 1"#]);
    let policy = Policy::builder()
        .score(grouped_unit("Dishonest", dishonest_score), 1)
        .build()
        .expect("valid");
    let plain = ScheduleRequest::default();
    let skipping = schedule(&policy, &inventory, &plain).expect("decides");
    let calling = schedule_calling_every_unit(&policy, &inventory, &plain).expect("decides");
    assert_ne!(skipping.ranked, calling.ranked);
}
