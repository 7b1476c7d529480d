//! Every built-in unit's cases (`policies/<family>/<unit>/cases/*.json`),
//! run twice: natively from the unit's source and sandboxed from its
//! embedded component. Each case must match its expectation in both, and the
//! two builds must answer identically. A failure names the file, the case
//! and every difference.

use std::path::{Path, PathBuf};

use sandpiper::builtin;
use sandpiper::unit::Unit;
use sandpiper::unit_cases::Fixture;

/// The workspace root, which each built-in unit's `dir` is relative to.
fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The fixture files of the unit in `dir`, sorted.
fn fixtures(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir.join("cases")) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_builtin_unit_case_passes_natively_and_sandboxed_alike() {
    let runtime = sandpiper_tests::shared_runtime();
    let mut failures: Vec<String> = Vec::new();
    let mut cases = 0;
    for builtin in builtin::UNITS {
        let native = builtin.native();
        let wasm = match runtime.load(builtin.wasm) {
            Ok(unit) => unit,
            Err(error) => {
                failures.push(format!("{}: does not load: {error}", builtin.package));
                continue;
            }
        };
        for file in fixtures(&workspace_root().join(builtin.dir)) {
            let shown = file.display();
            let fixture = std::fs::read_to_string(&file)
                .map_err(|e| e.to_string())
                .and_then(|text| Fixture::from_json(&text).map_err(|e| e.to_string()))
                .and_then(|fixture| fixture.prepare().map_err(|e| e.to_string()));
            let prepared = match fixture {
                Ok(prepared) => prepared,
                Err(error) => {
                    failures.push(format!("{shown}: {error}"));
                    continue;
                }
            };
            for (index, case) in prepared.fixture.cases.iter().enumerate() {
                cases += 1;
                let mut diffs = Vec::new();
                let native_answers = prepared.run(&native, index);
                let wasm_answers = prepared.run(wasm.as_ref() as &dyn Unit, index);
                match (&native_answers, &wasm_answers) {
                    (Ok(native_answers), Ok(wasm_answers)) => {
                        let native_diffs = prepared.check(index, native_answers);
                        let wasm_diffs = prepared.check(index, wasm_answers);
                        diffs.extend(native_diffs.iter().map(|d| format!("native: {d}")));
                        diffs.extend(wasm_diffs.iter().map(|d| format!("wasm: {d}")));
                        diffs.extend(
                            prepared
                                .compare(native_answers, wasm_answers)
                                .into_iter()
                                .map(|d| format!("native vs wasm: {d}")),
                        );
                    }
                    (Err(error), _) | (_, Err(error)) => diffs.push(error.to_string()),
                }
                if !diffs.is_empty() {
                    failures.push(format!(
                        "{shown}: case {index} \"{}\":\n    {}",
                        case.name,
                        diffs.join("\n    ")
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} unit cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(cases > 0, "no unit case found under policies/");
}
