//! The queue's semantics as data: every file under tests/cases/ is a table
//! of inputs and the answers Ganeti's predictive queue gives them.
//!
//! Golden files under tests/cases/locks/: `NAME.json` is a declaration as
//! an engine sends it; `NAME.out` is what it parses to (written back
//! pretty), or `NAME.err` why it is refused. `BLESS=1` writes a missing
//! expected file instead of failing; review it before committing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sandpiper_queue::{
    Candidate, Config, Lock, Locks, Order, Running, aged_weight, compare, conflicts, next,
};
use serde::Deserialize;

fn cases(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cases")
        .join(name)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows of a `|`-separated text table: comments and blank lines
/// skipped, each row with its line number and exactly `columns` cells.
fn rows(name: &str, columns: usize) -> Vec<(usize, Vec<String>)> {
    let text = read(&cases(name));
    let rows: Vec<_> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|(number, line)| {
            let cells: Vec<String> = line.split(" | ").map(|c| c.trim().to_owned()).collect();
            assert_eq!(cells.len(), columns, "{name}:{}: {line}", number + 1);
            (number + 1, cells)
        })
        .collect();
    assert!(!rows.is_empty(), "{name} has no rows");
    rows
}

fn json<T: for<'de> Deserialize<'de>>(text: &str, at: &str) -> T {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{at}: {text}: {e}"))
}

fn number(text: &str, at: &str) -> f64 {
    text.parse().unwrap_or_else(|e| panic!("{at}: {text}: {e}"))
}

/// The table's row or column of a lock (its variant), and its names.
fn variant(lock: &Lock) -> usize {
    match lock {
        Lock::None => 0,
        Lock::Shared(_) => 1,
        Lock::UnknownShared => 2,
        Lock::AllShared => 3,
        Lock::Exclusive(_) => 4,
        Lock::UnknownExclusive => 5,
        Lock::AllExclusive => 6,
    }
}

#[test]
fn compare_is_the_seeds_table() {
    // (pending variant, running variant, sets meet) seen so far.
    let mut seen = std::collections::BTreeSet::new();
    for (line, cells) in rows("compare.txt", 3) {
        let at = format!("compare.txt:{line}");
        let pending: Lock = json(&cells[0], &at);
        let running: Lock = json(&cells[1], &at);
        let expect = number(&cells[2], &at);
        assert_eq!(
            compare(&pending, &running),
            expect,
            "{at}: {pending:?} against {running:?}"
        );
        let meet = match (pending.names(), running.names()) {
            (Some(a), Some(b)) => Some(a.intersection(b).next().is_some()),
            _ => None,
        };
        seen.insert((variant(&pending), variant(&running), meet));
    }
    for pending in 0..7 {
        for running in 0..7 {
            let named = |v| v == 1 || v == 4;
            let wanted: &[Option<bool>] = if named(pending) && named(running) {
                &[Some(true), Some(false)]
            } else {
                &[None]
            };
            for meet in wanted {
                assert!(
                    seen.contains(&(pending, running, *meet)),
                    "compare.txt lacks cell {pending}x{running} {meet:?}"
                );
            }
        }
    }
}

#[test]
fn conflicts_follow_the_rule() {
    for (line, cells) in rows("conflicts.txt", 3) {
        let at = format!("conflicts.txt:{line}");
        let a: Locks = json(&cells[0], &at);
        let b: Locks = json(&cells[1], &at);
        let expect: bool = json(&cells[2], &at);
        assert_eq!(conflicts(&a, &b), expect, "{at}");
        assert_eq!(conflicts(&b, &a), expect, "{at}, the other way round");
        // The aggregate says the same with `b` alone running.
        let mut running = Running::new();
        running.add(&b);
        assert_eq!(running.blocks(&a), expect, "{at}, Running::blocks");
    }
}

#[test]
fn aging_is_linear_to_zero_at_k() {
    let config = Config::default();
    for (line, cells) in rows("aging.txt", 3) {
        let at = format!("aging.txt:{line}");
        let (spv, age, expect) = (
            number(&cells[0], &at),
            number(&cells[1], &at),
            number(&cells[2], &at),
        );
        let weight = aged_weight(spv, Duration::from_secs_f64(age), &config);
        assert!(
            (weight - expect).abs() < 1e-12,
            "{at}: {weight} != {expect}"
        );
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StaticCase {
    name: String,
    running: Vec<Locks>,
    pending: Locks,
    expect: f64,
}

#[test]
fn static_value_is_the_seeds_heuristic() {
    let path = cases("static_value.json");
    let cases: Vec<StaticCase> = json(&read(&path), "static_value.json");
    for case in cases {
        let mut running = Running::new();
        for locks in &case.running {
            running.add(locks);
        }
        let value = running.static_value(&case.pending, &Config::default());
        assert!(
            (value - case.expect).abs() < 1e-12,
            "{}: {value} != {}",
            case.name,
            case.expect
        );
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NextCase {
    name: String,
    running: Vec<Locks>,
    candidates: Vec<QueuedCase>,
    fifo: Option<usize>,
    predictive: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueuedCase {
    priority: i32,
    seq: u64,
    age_secs: u64,
    locks: Locks,
}

#[test]
fn next_orders_by_priority_weight_then_seq() {
    let cases: Vec<NextCase> = json(&read(&cases("next.json")), "next.json");
    for case in cases {
        let mut running = Running::new();
        for locks in &case.running {
            running.add(locks);
        }
        let candidates: Vec<Candidate<'_>> = case
            .candidates
            .iter()
            .map(|c| Candidate {
                priority: c.priority,
                seq: c.seq,
                age: Duration::from_secs(c.age_secs),
                locks: &c.locks,
            })
            .collect();
        let config = Config::default();
        assert_eq!(
            next(&candidates, &running, Order::Fifo, &config),
            case.fifo,
            "{}: FIFO",
            case.name
        );
        assert_eq!(
            next(&candidates, &running, Order::Predictive, &config),
            case.predictive,
            "{}: predictive",
            case.name
        );
        // The answer does not depend on where a candidate sits in the slice.
        let reversed: Vec<_> = candidates.iter().rev().copied().collect();
        let back = |picked: Option<usize>| picked.map(|i| candidates.len() - 1 - i);
        assert_eq!(
            back(next(&reversed, &running, Order::Fifo, &config)),
            case.fifo,
            "{}: FIFO reversed",
            case.name
        );
        assert_eq!(
            back(next(&reversed, &running, Order::Predictive, &config)),
            case.predictive,
            "{}: predictive reversed",
            case.name
        );
    }
}

/// Parses and validates as the host will: serde, then `validate`.
fn accept(text: &str) -> Result<Locks, String> {
    let locks: Locks = serde_json::from_str(text).map_err(|e| e.to_string())?;
    locks.validate().map_err(|e| e.to_string())?;
    Ok(locks)
}

#[test]
fn declarations_parse_or_are_refused_as_golden_files_say() {
    let bless = std::env::var_os("BLESS").is_some();
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(cases("locks"))
        .expect("tests/cases/locks")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 10, "golden declarations missing");
    let mut refused = 0;
    for input in inputs {
        let (out, err) = (input.with_extension("out"), input.with_extension("err"));
        let (path, got) = match accept(&read(&input)) {
            Ok(locks) => {
                let written = serde_json::to_string_pretty(&locks).expect("Locks serialize") + "\n";
                // The round trip: what we write reads back the same.
                assert_eq!(accept(&written), Ok(locks), "{}", input.display());
                (out, written)
            }
            Err(message) => {
                refused += 1;
                (err, message + "\n")
            }
        };
        if bless && !path.exists() {
            std::fs::write(&path, &got).expect("write a blessed file");
        }
        assert_eq!(read(&path), got, "{}", input.display());
    }
    assert!(refused >= 5, "too few refusals covered");
}
