//! Policies in any language: the HeadroomAffinity example, written in Rust,
//! Python, JavaScript and C (`policies/examples/`), built from source in
//! each and run through the real sandbox (`Runtime::load`, `WasmUnit`), must
//! describe itself and answer identically — on a generated cluster full of
//! corner cases, on the example's fixture through `sandpiper unit test`, and
//! at 10,000 hosts under each language's limits — and an infinite loop must
//! stop in every language. (`tests/e2e/languages.rs` does the same through
//! the server, over HTTP.) The Rust unit is built against the current WIT,
//! 0.3.0, and the other languages' helpers against 0.2.0, so identical
//! answers also show both versions hand a unit the same cluster (the
//! example reads CPU flags, a set in 0.3.0 and key/value pairs in 0.2.0).
//!
//! Building needs the guest toolchains (`scripts/install-guest-toolchains.sh`);
//! a missing one fails the test with that command.

mod cluster;
mod examples;
mod limits;

use std::sync::{Arc, LazyLock};

use sandpiper::sandbox::{Limits, PolicyVersion, Runtime, WasmUnit};
use sandpiper::unit::{Unit, UnitError};
use sandpiper_guest::Inventory;
use sandpiper_guest::model::{Rejection, Request, ScoreOrder, Scores};

use cluster::Call;
use examples::Language;

/// One runtime for the whole test binary: it compiles each component once
/// (an 18 MB Python unit takes seconds) and every test shares the result.
static RUNTIME: LazyLock<Runtime> =
    LazyLock::new(|| Runtime::new(Limits::default()).expect("a runtime with default limits"));

/// The example in `language`, loaded under that language's limits.
fn example_unit(language: Language) -> WasmUnit {
    let bytes = examples::example(language);
    let unit = RUNTIME
        .load(&bytes)
        .unwrap_or_else(|e| panic!("loading the {} example: {e}", language.name()));
    unit.with_limits(limits::for_every_language())
        .expect("valid limits")
}

/// What a unit answered to one call.
#[derive(Debug, PartialEq)]
struct Answer {
    rejections: Vec<Rejection>,
    scores: Scores,
}

fn answer(
    unit: &WasmUnit,
    inventory: &Arc<Inventory>,
    request: &Request,
    candidates: &[u32],
) -> Answer {
    let name = &unit.info().name;
    let rejections = unit
        .filter(inventory, request, candidates)
        .unwrap_or_else(|failed| panic!("{name}: filter failed: {failed} ({:?})", failed.usage))
        .value;
    let scores = unit
        .score(inventory, request, candidates)
        .unwrap_or_else(|failed| panic!("{name}: score failed: {failed} ({:?})", failed.usage))
        .value;
    Answer { rejections, scores }
}

/// Every language answers `calls` over `inventory` exactly as Rust does.
fn assert_identical(inventory: &Arc<Inventory>, calls: &[Call]) {
    let units: Vec<(Language, WasmUnit)> = Language::ALL
        .iter()
        .map(|&language| (language, example_unit(language)))
        .collect();
    for call in calls {
        let reference = answer(&units[0].1, inventory, &call.request, &call.candidates);
        for (language, unit) in &units[1..] {
            let got = answer(unit, inventory, &call.request, &call.candidates);
            assert_eq!(
                got.rejections,
                reference.rejections,
                "{}: rejections differ from Rust's in call `{}`",
                language.name(),
                call.name
            );
            assert_eq!(
                got.scores,
                reference.scores,
                "{}: scores differ from Rust's in call `{}`",
                language.name(),
                call.name
            );
        }
    }
}

#[test]
fn every_language_describes_the_same_unit() {
    let rust_unit = example_unit(Language::Rust);
    assert_eq!(rust_unit.policy_version(), PolicyVersion::V0_3);
    let rust = rust_unit.info().clone();
    assert_eq!(rust.name, "HeadroomAffinityRust");
    assert_eq!(rust.score_order, ScoreOrder::HigherIsBetter);
    for language in &Language::ALL[1..] {
        let unit = example_unit(*language);
        assert_eq!(unit.policy_version(), PolicyVersion::V0_2);
        let exports = unit.exports();
        assert!(exports.filter && exports.score && !exports.balance);
        let info = unit.info();
        assert!(info.name.starts_with("HeadroomAffinity") && info.name != rust.name);
        assert_eq!(info.description, rust.description, "{}", language.name());
        assert_eq!(info.params, rust.params, "{}", language.name());
        assert_eq!(info.score_order, rust.score_order, "{}", language.name());
    }
}

/// The language each component's producers sections tell, as the units
/// API and the console show it (`sandpiper::sandbox::language`).
#[test]
fn every_language_is_told_from_its_component() {
    for language in Language::ALL {
        let expected = match language {
            Language::Js => "javascript",
            other => other.name(),
        };
        assert_eq!(
            sandpiper::sandbox::language::source_language(&examples::example(language)),
            Some(expected),
            "{}",
            language.name()
        );
    }
}

#[test]
fn every_language_answers_identically_on_a_generated_cluster() {
    let hosts = 300;
    let inventory = cluster::inventory(hosts);
    let calls = cluster::calls(hosts);

    // The answers exercise every branch, so agreeing means something.
    let rust = example_unit(Language::Rust);
    let first = answer(&rust, &inventory, &calls[0].request, &calls[0].candidates);
    let reasons: Vec<&str> = first.rejections.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "needs {} MiB, {} MiB free",
            "would leave less than 512 MiB free"
        ]
    );
    assert!(
        first.rejections[0].figures.len() == 2 * first.rejections[0].hosts.len(),
        "two figures per host: {:?}",
        first.rejections[0]
    );
    // The hardware calls reach the new columns (CPU flags, NUMA cells).
    for (name, expected) in [
        (
            "required CPU flags: the first one missing is named",
            &["lacks CPU flag avx512f", "lacks CPU flag ü-flag"][..],
        ),
        (
            "two NUMA cells and a flag every reporting host has",
            &["lacks CPU flag vmx", "has {} NUMA cells, the VM needs {}"][..],
        ),
    ] {
        let call = calls.iter().find(|call| call.name == name).expect(name);
        let got = answer(&rust, &inventory, &call.request, &call.candidates);
        for reason in expected {
            assert!(
                got.rejections.iter().any(|r| r.reason == *reason),
                "{name}: no `{reason}` in {:?}",
                got.rejections
            );
        }
    }
    let matches = first.scores.values.iter().filter(|&&v| v == 1.0).count();
    assert!(
        matches > 0 && matches < hosts,
        "some hosts match the rack, some do not"
    );
    let unreadable = calls
        .iter()
        .find(|call| call.request.params[0].value == "0x10")
        .expect("a call with an unreadable parameter");
    let refused = answer(
        &rust,
        &inventory,
        &unreadable.request,
        &unreadable.candidates,
    );
    assert_eq!(
        refused.rejections,
        [Rejection::new(
            "parameter `HeadroomMib` is \"0x10\", not an unsigned 32-bit integer",
            unreadable.candidates.clone()
        )],
        "an unreadable parameter fails closed, naming itself"
    );

    assert_identical(&inventory, &calls);
}

#[test]
fn every_language_passes_the_example_fixture_through_unit_test() {
    let fixture = std::fs::read_to_string(
        examples::repo().join("policies/examples/cases/headroom_affinity.json"),
    )
    .expect("the example fixture");
    for language in Language::ALL {
        let bytes = examples::example(language);
        let mut report = Vec::new();
        let summary = sandpiper::unit_test::run(
            &RUNTIME,
            &bytes,
            &fixture,
            Some(limits::for_every_language()),
            sandpiper::cli::output::Format::Table,
            &mut report,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", language.name()));
        let report = String::from_utf8(report).expect("a text report");
        assert!(
            summary.all_passed() && summary.passed == 5,
            "{}: {summary:?}\n{report}",
            language.name()
        );
        assert!(
            report.contains("would leave less than 1024 MiB free: h2, h4")
                && report.contains("h5=1")
                && report.contains("/host)"),
            "{}: the report shows verdicts, scores and fuel:\n{report}",
            language.name()
        );

        // `-o json`: the same run as one document a script can read.
        let mut report = Vec::new();
        sandpiper::unit_test::run(
            &RUNTIME,
            &bytes,
            &fixture,
            Some(limits::for_every_language()),
            sandpiper::cli::output::Format::Json,
            &mut report,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", language.name()));
        let report: serde_json::Value = serde_json::from_slice(&report).expect("one JSON document");
        assert_eq!(
            (&report["passed"], &report["failed"]),
            (&5.into(), &0.into())
        );
        let cases = report["cases"].as_array().expect("cases");
        assert!(cases.iter().all(|c| c["passed"] == true), "{report}");
        let rejected: Vec<&serde_json::Value> = cases
            .iter()
            .filter_map(|c| c["filter"]["rejected"].as_array())
            .flatten()
            .collect();
        assert!(
            rejected
                .iter()
                .any(|r| r["reason"] == "would leave less than 1024 MiB free"
                    && r["hosts"] == serde_json::json!(["h2", "h4"])),
            "{}: {report}",
            language.name()
        );
        assert!(
            cases.iter().any(|c| c["score"]["scores"]["h5"] == 1.0),
            "{report}"
        );
        assert!(
            cases
                .iter()
                .all(|c| c["filter"].is_null() || c["filter"]["usage"]["fuel"].is_u64())
        );
    }
}

#[test]
fn every_language_finishes_10k_hosts_under_its_limits_and_still_agrees() {
    let hosts = 10_000;
    let inventory = cluster::inventory(hosts);
    let calls = cluster::calls(hosts);
    assert_identical(&inventory, &calls[..1]);
}

/// A unit that loops forever in `filter` and `score`, in `language`.
fn looping_unit(language: Language) -> WasmUnit {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, source) = match language {
        Language::Python => (
            "spin.py",
            "from wit_world import exports\n\
             from wit_world.imports.types import AppliesTo_EveryRequest, UnitInfo, ScoreOrder\n\
             class Metadata(exports.Metadata):\n\
             \x20   def info(self):\n\
             \x20       return UnitInfo('Spin', 'Never answers.', [], ScoreOrder.LOWER_IS_BETTER,\n\
             \x20                       AppliesTo_EveryRequest(), False)\n\
             class Filter(exports.Filter):\n\
             \x20   def filter(self, request, candidates):\n\
             \x20       n = 0\n\
             \x20       while True:\n\
             \x20           n += 1\n\
             class Score(exports.Score):\n\
             \x20   def score(self, request, candidates):\n\
             \x20       while True:\n\
             \x20           pass\n",
        ),
        Language::Js => (
            "spin.js",
            "export const metadata = { info: () => ({ name: 'Spin', description: 'Never answers.', \
             params: [], scoreOrder: 'lower-is-better', appliesTo: { tag: 'every-request' }, perHost: false }) };\n\
             export const filter = { filter(request, candidates) { let n = 0; for (;;) { n++; } } };\n\
             export const score = { score(request, candidates) { for (;;) {} } };\n",
        ),
        Language::C => (
            "spin.c",
            "#include \"sandpiper.h\"\n\
             static const sp_unit_t UNIT = {\"Spin\", \"Never answers.\", NULL, 0,\n\
             \x20   SANDPIPER_POLICY_TYPES_SCORE_ORDER_LOWER_IS_BETTER, NULL, 0, false};\n\
             void exports_sandpiper_policy_metadata_info(exports_sandpiper_policy_metadata_unit_info_t *ret) {\n\
             \x20 sp_unit_info(&UNIT, ret);\n}\n\
             static volatile unsigned long long spins;\n\
             void exports_sandpiper_policy_filter_filter(exports_sandpiper_policy_filter_request_t *request,\n\
             \x20   bindings_list_u32_t *candidates, exports_sandpiper_policy_filter_list_rejection_t *ret) {\n\
             \x20 (void)request; (void)candidates; (void)ret;\n\
             \x20 for (;;) spins++;\n}\n\
             void exports_sandpiper_policy_score_score(exports_sandpiper_policy_score_request_t *request,\n\
             \x20   bindings_list_u32_t *candidates, exports_sandpiper_policy_score_scores_t *ret) {\n\
             \x20 (void)request; (void)candidates; (void)ret;\n\
             \x20 for (;;) spins++;\n}\n",
        ),
        Language::Rust => unreachable!("the sandbox's own tests cover Rust units that loop"),
    };
    let path = dir.path().join(file);
    std::fs::write(&path, source).expect("write the looping unit");
    let bytes = examples::build_unit(language, examples::EXAMPLE_WORLD, &path);
    RUNTIME
        .load(&bytes)
        .unwrap_or_else(|e| panic!("loading the looping {} unit: {e}", language.name()))
        .with_limits(limits::for_every_language())
        .expect("valid limits")
}

#[test]
fn an_infinite_loop_stops_in_every_language_under_its_limits() {
    // The largest budgets a language gets are those of a 10k-host cluster.
    let inventory = Arc::new(Inventory::new(10_000, 0));
    let candidates: Vec<u32> = (0..10_000).collect();
    let request = Request::default();
    for language in [Language::Python, Language::Js, Language::C] {
        let unit = looping_unit(language);
        let failures = [
            unit.filter(&inventory, &request, &candidates).err(),
            unit.score(&inventory, &request, &candidates).err(),
        ];
        for failed in failures {
            let failed = failed.unwrap_or_else(|| panic!("{}: a loop answered", language.name()));
            assert!(
                matches!(
                    failed.error,
                    UnitError::OutOfFuel { .. }
                        | UnitError::DeadlineExceeded { .. }
                        | UnitError::Overloaded { .. }
                ),
                "{}: stopped by fuel or deadline, not {:?}",
                language.name(),
                failed.error
            );
        }
    }
}
