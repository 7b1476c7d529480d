//! Keeps `docs/units.md` honest: every built-in unit has an entry there
//! (a `#### `Name`` heading) giving its kind, its crate and every parameter
//! it declares with the declared pattern and default, and every entry and
//! parameter line there belongs to a built-in unit; and that its per-host
//! table has one row per built-in unit agreeing with the unit's `per_host`
//! declaration. A failure lists every difference.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use sandpiper::builtin;
use sandpiper_guest::model::ScoreOrder;
use sandpiper_guest::native::NativeUnit;

/// Opens an entry: `#### `Name``.
const ENTRY_PREFIX: &str = "#### `";
/// The entry line naming the unit's roles, then `; <score order>`.
const KIND_PREFIX: &str = "- **Kind**: ";
/// The entry line naming the unit's crate directory.
const CRATE_PREFIX: &str = "- **Crate**: ";
/// Opens a parameter line: `  - `Name`: pattern `...`, default ...`.
const PARAM_PREFIX: &str = "  - `";
/// The heading of the per-host table.
const PER_HOST_HEADING: &str = "## Per-host units";
/// Opens a row of that table: `| `Name` | yes | |`.
const ROW_PREFIX: &str = "| `";

fn units_doc() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/units.md");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()))
}

/// Each entry's name and lines, up to the next heading, in page order.
fn entries(doc: &str) -> Vec<(String, Vec<&str>)> {
    let mut entries: Vec<(String, Vec<&str>)> = Vec::new();
    let mut open = false;
    for line in doc.lines() {
        if line.starts_with('#') {
            open = false;
            if let Some(name) = line
                .strip_prefix(ENTRY_PREFIX)
                .and_then(|rest| rest.strip_suffix('`'))
            {
                entries.push((name.to_owned(), Vec::new()));
                open = true;
            }
        } else if open && let Some((_, lines)) = entries.last_mut() {
            lines.push(line);
        }
    }
    entries
}

/// Every built-in unit's native build (its `info()` and roles), keyed by
/// the unit's registered name, with its crate's folder (`policies/...`).
fn builtin_units() -> BTreeMap<String, (&'static str, NativeUnit)> {
    builtin::UNITS
        .iter()
        .map(|builtin| {
            let native = builtin.native();
            (native.info.name.clone(), (builtin.dir, native))
        })
        .collect()
}

/// What the unit's `- **Kind**:` line must say.
fn expected_kind(native: &NativeUnit) -> String {
    let roles: Vec<&str> = [
        (native.filter.is_some(), "filter"),
        (native.score.is_some(), "score"),
        (native.balance.is_some(), "balance"),
    ]
    .into_iter()
    .filter_map(|(has, role)| has.then_some(role))
    .collect();
    let mut kind = roles.join(", ");
    if native.score.is_some() {
        kind.push_str(match native.info.score_order {
            ScoreOrder::LowerIsBetter => "; lower is better",
            ScoreOrder::HigherIsBetter => "; higher is better",
        });
    }
    kind
}

/// The differences between one unit and its entry.
fn check_entry(name: &str, dir: &str, native: &NativeUnit, lines: &[&str]) -> Vec<String> {
    let mut failures = Vec::new();
    let kind = expected_kind(native);
    match lines.iter().find_map(|line| line.strip_prefix(KIND_PREFIX)) {
        Some(found) if found == kind => {}
        Some(found) => failures.push(format!(
            "{name}: kind is `{kind}`, the entry says `{found}`"
        )),
        None => failures.push(format!("{name}: no `{KIND_PREFIX}{kind}` line")),
    }
    let crate_line = format!("{CRATE_PREFIX}`{dir}`");
    if !lines.contains(&crate_line.as_str()) {
        failures.push(format!("{name}: no `{crate_line}` line"));
    }
    // The entry's parameter lines, by parameter name.
    let documented: BTreeMap<&str, &str> = lines
        .iter()
        .filter_map(|line| {
            let rest = line.strip_prefix(PARAM_PREFIX)?;
            let (param, rest) = rest.split_once("`: ")?;
            Some((param, rest))
        })
        .collect();
    for param in &native.info.params {
        let Some(rest) = documented.get(param.name.as_str()) else {
            failures.push(format!(
                "{name}: parameter `{}` has no `{PARAM_PREFIX}{}`: pattern ...` line",
                param.name, param.name
            ));
            continue;
        };
        let default = if param.default_value.is_empty() {
            "empty".to_owned()
        } else {
            format!("`{}`", param.default_value)
        };
        let expected = format!("pattern `{}`, default {default}", param.pattern);
        if !rest.starts_with(&expected) {
            failures.push(format!(
                "{name}: parameter `{}` is declared `{expected}`, the entry says `{rest}`",
                param.name
            ));
        }
    }
    for param in documented.keys() {
        if !native.info.params.iter().any(|p| p.name == *param) {
            failures.push(format!(
                "{name}: the entry lists parameter `{param}`, which the unit does not declare"
            ));
        }
    }
    failures
}

#[test]
fn units_doc_has_an_entry_for_every_builtin_unit_with_its_kind_and_parameters() {
    let doc = units_doc();
    let entries = entries(&doc);
    let mut failures = Vec::new();
    let units = builtin_units();
    assert!(!units.is_empty(), "no built-in units found");

    let mut seen = BTreeSet::new();
    for (name, _) in &entries {
        if !seen.insert(name.as_str()) {
            failures.push(format!("{name}: more than one entry"));
        }
        if !units.contains_key(name) {
            failures.push(format!(
                "{name}: an entry, but no built-in unit of that name"
            ));
        }
    }
    for (name, (dir, native)) in &units {
        match entries.iter().find(|(entry, _)| entry == name) {
            Some((_, lines)) => failures.extend(check_entry(name, dir, native, lines)),
            None => failures.push(format!("{name} ({dir}): no `{ENTRY_PREFIX}{name}`` entry")),
        }
    }
    assert!(
        failures.is_empty(),
        "docs/units.md disagrees with the built-in units ({} entries, {} units):\n{}",
        entries.len(),
        units.len(),
        failures.join("\n")
    );
}

/// The per-host table's rows, `(name, per-host)`, in page order; a row
/// whose second cell is neither `yes` nor `no` reads as `None`.
fn per_host_rows(doc: &str) -> Vec<(String, Option<bool>)> {
    doc.lines()
        .skip_while(|line| *line != PER_HOST_HEADING)
        .skip(1)
        .take_while(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix(ROW_PREFIX)?.split_once('`')?;
            let cell = rest
                .trim_start_matches([' ', '|'])
                .split('|')
                .next()?
                .trim();
            let per_host = match cell {
                "yes" => Some(true),
                "no" => Some(false),
                _ => None,
            };
            Some((name.to_owned(), per_host))
        })
        .collect()
}

#[test]
fn units_doc_per_host_table_agrees_with_every_builtin_unit() {
    let doc = units_doc();
    let rows = per_host_rows(&doc);
    let units = builtin_units();
    let mut failures = Vec::new();
    let mut seen = BTreeSet::new();
    for (name, per_host) in &rows {
        if !seen.insert(name.as_str()) {
            failures.push(format!("{name}: more than one per-host row"));
        }
        match (units.get(name), per_host) {
            (None, _) => failures.push(format!("{name}: a per-host row, but no such unit")),
            (Some(_), None) => failures.push(format!("{name}: per-host is neither yes nor no")),
            (Some((_, native)), Some(documented)) if native.info.per_host != *documented => {
                failures.push(format!(
                    "{name}: declares per_host {}, the table says {}",
                    native.info.per_host,
                    if *documented { "yes" } else { "no" }
                ))
            }
            _ => {}
        }
    }
    for name in units.keys() {
        if !seen.contains(name.as_str()) {
            failures.push(format!("{name}: no row in `{PER_HOST_HEADING}`"));
        }
    }
    assert!(
        failures.is_empty(),
        "docs/units.md's per-host table disagrees with the built-in units:\n{}",
        failures.join("\n")
    );
}
