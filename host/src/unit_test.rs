//! `sandpiper unit test <module.wasm> <fixture.json>`: runs a unit on a
//! fixture (a snapshot plus cases, the [`crate::unit_cases`] format) exactly
//! as the server would — compiled and sandboxed by the [`Runtime`], under its
//! limits — and prints what it answered and what each call cost, so authors
//! iterate without a server.
//!
//! For every case it prints the filter's rejections grouped by reason and the
//! survivors, the scores by host, or the balance unit's migration; the fuel
//! each call burnt (in total and per host of the snapshot, the figure the
//! limits scale with) and its time; then whether the answers match the
//! case's `expect`, with one line per difference.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use sandpiper_model::{Migration, Rejection, Scores};

use crate::cli::output::Format;
use crate::config::UnitLimitsArgs;
use crate::sandbox::{Limits, LimitsError, LoadError, Runtime, RuntimeError, WasmUnit};
use crate::snapshot::SnapshotError;
use crate::unit::{CallResult, Unit, Usage};
use crate::unit_cases::{Answers, CaseError, Fixture, Prepared};

/// Hosts listed per line group (survivors, one reason's hosts, scores)
/// before the rest are counted instead: a fixture is read by a person, and
/// a 10,000-host one should still fit on a screen.
pub const MAX_LISTED_HOSTS: usize = 40;

/// `sandpiper unit test`.
#[derive(Clone, Debug, clap::Args)]
pub struct UnitTestArgs {
    /// The unit: a WebAssembly component, as it would be uploaded.
    pub module: PathBuf,
    /// The fixture: hosts, running VMs and cases (see
    /// policies/examples/cases/ and docs/authoring.md).
    pub fixture: PathBuf,
    /// The limits each call runs under; the same flags and defaults as
    /// `sandpiper serve`.
    #[command(flatten)]
    pub limits: UnitLimitsArgs,
}

/// Exit status when every case passed.
const EXIT_PASSED: u8 = 0;
/// Exit status when a case's answers differ from its expectation.
const EXIT_FAILED: u8 = 1;
/// Exit status when the unit or the fixture could not be run at all.
const EXIT_ERROR: u8 = 2;

/// Runs `sandpiper unit test`: the report on stdout (text, or one JSON
/// document with `-o json`), errors on stderr.
pub fn main(args: &UnitTestArgs, format: Format) -> ExitCode {
    let result = read_inputs(args).and_then(|(wasm, fixture)| {
        let runtime = Runtime::new(args.limits.limits())?;
        run(
            &runtime,
            &wasm,
            &fixture,
            None,
            format,
            &mut std::io::stdout().lock(),
        )
    });
    match result {
        Ok(summary) if summary.all_passed() => ExitCode::from(EXIT_PASSED),
        Ok(_) => ExitCode::from(EXIT_FAILED),
        Err(error) => {
            eprintln!("sandpiper unit test: {error}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn read_inputs(args: &UnitTestArgs) -> Result<(Vec<u8>, String), UnitTestError> {
    let read = |path: &PathBuf| {
        std::fs::read(path).map_err(|source| UnitTestError::Read {
            path: path.clone(),
            source,
        })
    };
    let wasm = read(&args.module)?;
    let fixture = String::from_utf8(read(&args.fixture)?).map_err(|_| UnitTestError::Read {
        path: args.fixture.clone(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
    })?;
    Ok((wasm, fixture))
}

/// Why the fixture could not be run (a case whose answers differ from its
/// expectation is not an error: it is reported and counted).
#[derive(Debug, thiserror::Error)]
pub enum UnitTestError {
    #[error("could not read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("could not start the sandbox: {0}")]
    Runtime(#[from] RuntimeError),
    #[error("the module is not a usable unit: {0}")]
    Load(#[from] LoadError),
    #[error("the limits are not usable: {0}")]
    Limits(#[from] LimitsError),
    #[error("the fixture is not valid: {0}")]
    Fixture(#[from] SnapshotError),
    #[error("{0}")]
    Case(#[from] CaseError),
    #[error("could not write the report: {0}")]
    Output(#[from] std::io::Error),
}

/// How many cases matched their expectation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
}

impl Summary {
    /// True when every case matched (the command's exit status).
    pub fn all_passed(&self) -> bool {
        self.failed == 0
    }
}

/// Loads `wasm` into `runtime` (under `limits`, or the runtime's own), runs
/// every case of `fixture_json` and writes the report to `out` in
/// `format`.
pub fn run(
    runtime: &Runtime,
    wasm: &[u8],
    fixture_json: &str,
    limits: Option<Limits>,
    format: Format,
    out: &mut dyn Write,
) -> Result<Summary, UnitTestError> {
    let fixture = Fixture::from_json(fixture_json)?;
    let started = Instant::now();
    let loaded = runtime.load(wasm)?;
    let compile_time = started.elapsed();
    let unit: WasmUnit = loaded.with_limits(limits.unwrap_or_else(|| loaded.limits()))?;
    let prepared = fixture.prepare()?;

    let text = format == Format::Table;
    if text {
        write_header(out, &unit, compile_time, prepared.hosts.len())?;
    }
    let mut summary = Summary::default();
    let mut cases = Vec::new();
    for index in 0..prepared.fixture.cases.len() {
        let answers = prepared.run(&unit, index)?;
        let diffs = prepared.check(index, &answers);
        if text {
            write_case(out, &prepared, index, &answers, &diffs)?;
        } else {
            cases.push(json::case(&prepared, index, &answers, &diffs));
        }
        if diffs.is_empty() {
            summary.passed += 1;
        } else {
            summary.failed += 1;
        }
    }
    if !text {
        let report = json::report(&unit, compile_time, prepared.hosts.len(), cases, summary);
        serde_json::to_writer_pretty(&mut *out, &report).map_err(std::io::Error::from)?;
        writeln!(out)?;
        return Ok(summary);
    }
    writeln!(
        out,
        "{} case{}: {} passed, {} failed",
        summary.passed + summary.failed,
        plural(summary.passed + summary.failed),
        summary.passed,
        summary.failed
    )?;
    Ok(summary)
}

fn write_header(
    out: &mut dyn Write,
    unit: &WasmUnit,
    compile_time: Duration,
    hosts: usize,
) -> std::io::Result<()> {
    let info = unit.info();
    let roles: Vec<String> = unit
        .exports()
        .roles()
        .iter()
        .map(ToString::to_string)
        .collect();
    let limits = unit.limits();
    writeln!(
        out,
        "unit {} ({}), sha256 {}",
        info.name,
        roles.join(", "),
        crate::sandbox::hex(&unit.sha256())
    )?;
    writeln!(out, "  loaded in {}", millis(compile_time))?;
    writeln!(
        out,
        "  limits over {hosts} host{}: fuel {}, deadline {}, memory {} MiB",
        plural(hosts),
        thousands(limits.fuel_budget(hosts)),
        millis(limits.deadline(hosts)),
        limits.memory_bytes >> 20
    )
}

fn write_case(
    out: &mut dyn Write,
    prepared: &Prepared,
    index: usize,
    answers: &Answers,
    diffs: &[String],
) -> std::io::Result<()> {
    let case = &prepared.fixture.cases[index];
    let verdict = if diffs.is_empty() { "pass" } else { "FAIL" };
    writeln!(out, "case `{}`: {verdict}", case.name)?;
    let hosts = prepared.hosts.len();
    let id = |host: u32| prepared.host_id(host).to_owned();

    if let Some(result) = &answers.rejected {
        write_call(
            out,
            "filter",
            result,
            hosts,
            |out, rejections: &Vec<Rejection>| {
                write_rejections(out, rejections, &answers.candidates, &id)
            },
        )?;
    }
    if let Some(result) = &answers.scores {
        write_call(out, "score", result, hosts, |out, scores: &Scores| {
            write_scores(out, scores, &answers.candidates, &id)
        })?;
    }
    if let Some(result) = &answers.migration {
        write_call(
            out,
            "balance",
            result,
            hosts,
            |out, migration: &Option<Migration>| match migration {
                None => writeln!(out, "    no migration"),
                Some(m) => {
                    let by_id = prepared.migration_by_id(m);
                    writeln!(
                        out,
                        "    move VM {} to one of {}",
                        by_id.vm,
                        by_id.destinations.join(", ")
                    )
                }
            },
        )?;
    }
    for diff in diffs {
        writeln!(out, "  - {diff}")?;
    }
    Ok(())
}

/// One call's cost line, then its answer (or its failure).
fn write_call<T>(
    out: &mut dyn Write,
    role: &str,
    result: &CallResult<T>,
    hosts: usize,
    answer: impl FnOnce(&mut dyn Write, &T) -> std::io::Result<()>,
) -> std::io::Result<()> {
    match result {
        Ok(called) => {
            writeln!(out, "  {role}: {}", cost(&called.usage, hosts))?;
            answer(out, &called.value)
        }
        Err(failed) => writeln!(
            out,
            "  {role}: failed ({}): {}; {}",
            failed.error.code(),
            failed.error,
            cost(&failed.usage, hosts)
        ),
    }
}

fn write_rejections(
    out: &mut dyn Write,
    rejections: &[Rejection],
    candidates: &[u32],
    id: &dyn Fn(u32) -> String,
) -> std::io::Result<()> {
    let rejected: std::collections::HashSet<u32> = rejections
        .iter()
        .flat_map(|r| r.hosts.iter().copied())
        .collect();
    writeln!(
        out,
        "    {} of {} rejected",
        rejected.len(),
        candidates.len()
    )?;
    for rejection in rejections {
        let hosts: Vec<String> = rejection.hosts.iter().map(|&h| id(h)).collect();
        writeln!(out, "    {}: {}", rejection.reason, listed(&hosts))?;
    }
    let survivors: Vec<String> = candidates
        .iter()
        .filter(|h| !rejected.contains(h))
        .map(|&h| id(h))
        .collect();
    writeln!(out, "    survivors: {}", listed(&survivors))
}

fn write_scores(
    out: &mut dyn Write,
    scores: &Scores,
    candidates: &[u32],
    id: &dyn Fn(u32) -> String,
) -> std::io::Result<()> {
    let pairs: Vec<String> = candidates
        .iter()
        .zip(&scores.values)
        .map(|(&h, value)| format!("{}={value}", id(h)))
        .collect();
    writeln!(out, "    {}", listed(&pairs))?;
    if scores.floor.is_some() || scores.ceiling.is_some() {
        writeln!(
            out,
            "    clamped to [{}, {}]",
            scores.floor.map_or("-".to_owned(), |f| f.to_string()),
            scores.ceiling.map_or("-".to_owned(), |c| c.to_string())
        )?;
    }
    Ok(())
}

/// "fuel 1,234,567 (123/host), 1.23 ms".
fn cost(usage: &Usage, hosts: usize) -> String {
    let mut text = String::new();
    match usage.fuel {
        Some(fuel) => {
            let _ = write!(text, "fuel {}", thousands(fuel));
            if hosts > 0 {
                let _ = write!(text, " ({}/host)", thousands(fuel / hosts as u64));
            }
        }
        None => text.push_str("fuel not metered"),
    }
    let _ = write!(text, ", {}", millis(usage.elapsed));
    text
}

/// The first [`MAX_LISTED_HOSTS`] items, then how many more.
fn listed(items: &[String]) -> String {
    if items.is_empty() {
        return "none".to_owned();
    }
    let mut text = items
        .iter()
        .take(MAX_LISTED_HOSTS)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > MAX_LISTED_HOSTS {
        let _ = write!(text, " and {} more", items.len() - MAX_LISTED_HOSTS);
    }
    text
}

fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The report of `-o json`: one document, for scripts and CI.
mod json {
    use std::collections::HashSet;
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::Summary;
    use crate::sandbox::WasmUnit;
    use crate::unit::{CallResult, Unit};
    use crate::unit_cases::{Answers, Prepared};

    pub fn report(
        unit: &WasmUnit,
        loaded: Duration,
        hosts: usize,
        cases: Vec<Value>,
        summary: Summary,
    ) -> Value {
        let limits = unit.limits();
        json!({
            "unit": {
                "name": unit.info().name,
                "roles": unit.exports().roles(),
                "sha256": crate::sandbox::hex(&unit.sha256()),
                "loaded_us": loaded.as_micros() as u64,
                "limits": {
                    "hosts": hosts,
                    "fuel": limits.fuel_budget(hosts),
                    "deadline_us": limits.deadline(hosts).as_micros() as u64,
                    "memory_bytes": limits.memory_bytes,
                },
            },
            "cases": cases,
            "passed": summary.passed,
            "failed": summary.failed,
        })
    }

    /// One case: its verdict, the differences, and each call's answer by
    /// host id with what it cost (`usage`), or its typed failure.
    pub fn case(prepared: &Prepared, index: usize, answers: &Answers, diffs: &[String]) -> Value {
        let id = |host: u32| prepared.host_id(host).to_owned();
        let mut case = json!({
            "name": prepared.fixture.cases[index].name,
            "passed": diffs.is_empty(),
            "differences": diffs,
        });
        if let Some(result) = &answers.rejected {
            case["filter"] = call(result, |rejections| {
                let rejected: HashSet<u32> = rejections
                    .iter()
                    .flat_map(|r| r.hosts.iter().copied())
                    .collect();
                let survivors: Vec<String> = answers
                    .candidates
                    .iter()
                    .filter(|h| !rejected.contains(h))
                    .map(|&h| id(h))
                    .collect();
                let rejections: Vec<Value> = rejections
                    .iter()
                    .map(|r| {
                        let hosts: Vec<String> = r.hosts.iter().map(|&h| id(h)).collect();
                        json!({ "reason": r.reason, "hosts": hosts })
                    })
                    .collect();
                json!({ "rejected": rejections, "survivors": survivors })
            });
        }
        if let Some(result) = &answers.scores {
            case["score"] = call(result, |scores| {
                let by_host: serde_json::Map<String, Value> = answers
                    .candidates
                    .iter()
                    .zip(&scores.values)
                    .map(|(&h, &value)| (id(h), json!(value)))
                    .collect();
                json!({ "scores": by_host, "floor": scores.floor, "ceiling": scores.ceiling })
            });
        }
        if let Some(result) = &answers.migration {
            case["balance"] = call(result, |migration| {
                let migration = migration.as_ref().map(|m| prepared.migration_by_id(m));
                json!({ "migration": migration })
            });
        }
        case
    }

    fn call<T>(result: &CallResult<T>, answer: impl FnOnce(&T) -> Value) -> Value {
        match result {
            Ok(called) => {
                let mut value = answer(&called.value);
                value["usage"] = json!(called.usage);
                value
            }
            Err(failed) => json!({
                "failed": { "code": failed.error.code(), "message": failed.error.to_string() },
                "usage": failed.usage,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_easily() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(27_000_000), "27,000,000");
        let many: Vec<String> = (0..MAX_LISTED_HOSTS + 3).map(|i| format!("h{i}")).collect();
        assert!(listed(&many).ends_with(" and 3 more"));
        assert_eq!(listed(&[]), "none");
    }
}
