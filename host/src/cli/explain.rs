//! `sandpiper explain`: one decision's explain record, readable. The
//! record comes in two shapes, and both render: the full record of a
//! decision over inline hosts (every rejected host, the cost table of
//! every score unit per host), and the bounded summary a decision over the
//! held inventory keeps per instance (reasons with counts and examples,
//! the best-ranked hosts).

use std::fmt::Write;

use serde_json::Value;

use super::output::{Table, cell};

/// A logged decision (`GET .../decisions/{id}`), rendered.
pub fn render(entry: &Value) -> String {
    let mut out = format!(
        "decision {}  ({} of VM {}, {})\n",
        cell(&entry["id"]),
        cell(&entry["kind"]),
        cell(&entry["vm_id"]),
        cell(&entry["created_at"]),
    );
    out.push_str(&answer(&entry["answer"]));
    out
}

/// A schedule or balance answer: where the VM (each instance) went, and
/// why, from its explain records.
pub fn answer(reply: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "chosen host: {}", cell(&reply["chosen_host"]));
    if let Some(reason) = reply["reason"].as_str() {
        let _ = writeln!(out, "reason: {reason}");
    }
    if let Some(instances) = reply["instances"].as_array() {
        for instance in instances {
            let _ = writeln!(
                out,
                "\ninstance {} -> {}",
                cell(&instance["vm_id"]),
                cell(&instance["host"])
            );
            out.push_str(&explain(&instance["explain"]));
        }
    } else if reply["explain"].is_object() {
        out.push('\n');
        out.push_str(&explain(&reply["explain"]));
    }
    if let Some(proposal) = reply.get("migration").filter(|m| !m.is_null()) {
        let _ = writeln!(out, "proposed migration: {}", cell(proposal));
    }
    out
}

/// One explain record (full or summary), rendered.
pub fn explain(record: &Value) -> String {
    let mut out = String::new();
    if let Some(considered) = record["considered"].as_str() {
        let _ = writeln!(out, "{considered}");
    }
    let _ = writeln!(out, "filters ({} candidates)", cell(&record["candidates"]));
    let mut filters = Table::new(["  UNIT", "IN", "OUT", "REJECTED"]);
    for f in record["filters"].as_array().into_iter().flatten() {
        let mut reasons = rejections(f);
        if let Some(reused) = f["reused"].as_u64().filter(|&n| n > 0) {
            reasons.push(format!("{reused} verdicts reused from earlier decisions"));
        }
        if let Some(why) = f["skipped"].as_str() {
            reasons.insert(0, format!("skipped: {why}"));
        }
        if let Some(failure) = f["failure"].as_object() {
            reasons.insert(
                0,
                format!(
                    "unit failed: {} ({})",
                    cell(&failure["message"]),
                    cell(&failure["code"])
                ),
            );
        }
        let first = reasons.first().cloned().unwrap_or_default();
        filters.row(vec![
            format!("  {}", cell(&f["unit"])),
            cell(&f["input"]),
            cell(&f["survivors"]),
            first,
        ]);
        for more in reasons.iter().skip(1) {
            filters.row(vec![
                String::new(),
                String::new(),
                String::new(),
                more.clone(),
            ]);
        }
    }
    out.push_str(&filters.render());

    let scores = record["scores"].as_array().cloned().unwrap_or_default();
    if scores.iter().any(|s| s["hosts"].is_array()) {
        out.push_str(&cost_table(record, &scores));
    } else if !scores.is_empty() {
        let _ = writeln!(out, "scores");
        for s in &scores {
            let state = match (&s["failure"], s["called"].as_bool()) {
                (Value::Object(f), _) => format!("failed: {}", cell(&f["message"])),
                _ if s["skipped"].is_string() => format!("skipped: {}", cell(&s["skipped"])),
                (_, Some(false)) => "not called (one candidate left)".to_owned(),
                _ => match s["reused"].as_u64().filter(|&n| n > 0) {
                    Some(reused) => format!("called, {reused} scores reused"),
                    None => "called".to_owned(),
                },
            };
            let _ = writeln!(
                out,
                "  {} x{}: {state}",
                cell(&s["unit"]),
                cell(&s["factor"])
            );
        }
        if let Some(ranked) = record["ranked"].as_array() {
            let best: Vec<String> = ranked
                .iter()
                .map(|r| format!("{} ({})", cell(&r["host"]), number(&r["total"])))
                .collect();
            let _ = writeln!(out, "best ranked: {}", best.join(", "));
        }
    }
    let _ = writeln!(
        out,
        "outcome: {}; winner: {}{}",
        cell(&record["outcome"]),
        cell(&record["winner"]),
        tie(record)
    );
    out
}

/// A filter's rejections, one line each.
fn rejections(filter: &Value) -> Vec<String> {
    let mut lines: Vec<String> = filter["rejected"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| match &r["hosts"] {
            Value::Array(hosts) => {
                let ids: Vec<String> = hosts.iter().map(cell).collect();
                format!("{}: {}", ids.join(", "), cell(&r["reason"]))
            }
            count => {
                let examples: Vec<String> = r["examples"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(cell)
                    .collect();
                format!(
                    "{} hosts (e.g. {}): {}",
                    cell(count),
                    examples.join(", "),
                    cell(&r["reason"])
                )
            }
        })
        .collect();
    if let Some(n) = filter["other_reasons"].as_u64().filter(|&n| n > 0) {
        lines.push(format!(
            "{n} more reasons, {} more hosts",
            cell(&filter["other_hosts"])
        ));
    }
    lines
}

/// The full record's cost table: per host, each score unit's points (and
/// raw score), and the total; the winner marked.
fn cost_table(record: &Value, scores: &[Value]) -> String {
    let mut header: Vec<String> = vec!["  HOST".to_owned()];
    header.extend(
        scores
            .iter()
            .map(|s| format!("{} x{}", cell(&s["unit"]), cell(&s["factor"]))),
    );
    header.push("TOTAL".to_owned());
    let mut table = Table::new(header);
    let winner = record["winner"].as_str();
    for total in record["totals"].as_array().into_iter().flatten() {
        let host = total["host"].as_str().unwrap_or_default();
        let mut row = vec![format!("  {host}")];
        for s in scores {
            let point = s["hosts"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|h| h["host"].as_str() == Some(host));
            // A skipped unit has points (its promised equal answer) but no
            // raw score: say so rather than print a bare dash.
            let raw = |p: &Value| match &s["skipped"] {
                Value::String(_) => "skipped".to_owned(),
                _ => number(&p["raw"]),
            };
            row.push(point.map_or("-".to_owned(), |p| {
                format!("{} ({})", number(&p["points"]), raw(p))
            }));
        }
        let mark = if winner == Some(host) {
            "  <- winner"
        } else {
            ""
        };
        row.push(format!("{}{mark}", number(&total["total"])));
        table.row(row);
    }
    let order = if record["combination"] == "normalised" {
        "normalised scores times factors"
    } else {
        "rank points times factors"
    };
    format!(
        "cost table ({order}; points (raw score); the highest total wins)\n{}",
        table.render()
    )
}

/// How a tie for the win was broken, if there was one.
fn tie(record: &Value) -> String {
    match &record["tied_with"] {
        Value::Array(hosts) if !hosts.is_empty() => {
            let ids: Vec<String> = hosts.iter().map(cell).collect();
            format!(
                " (tied with {}, broken by {})",
                ids.join(", "),
                cell(&record["tie_break"]).replace('_', " ")
            )
        }
        Value::Number(n) if n.as_u64().is_some_and(|n| n > 0) => {
            format!(" (tied with {n} more, broken by candidate order)")
        }
        _ => String::new(),
    }
}

/// A score as people read it: at most three decimals, no trailing zeros.
fn number(value: &Value) -> String {
    match value.as_f64() {
        Some(x) if x.fract() != 0.0 => {
            let text = format!("{x:.3}");
            text.trim_end_matches('0').trim_end_matches('.').to_owned()
        }
        Some(x) => format!("{x:.0}"),
        None => cell(value),
    }
}
