//! Runs the operator-grammar table in `extra_specs_ops.json`: Nova's own
//! test cases for `extra_specs_ops.match` plus the quirks our reference
//! notes checked against a running Nova.

use sandpiper_nova_ops::extra_specs::{Requirement, matches};
use serde_json::Value;

/// Loads the table: (name, value, requirement, expected outcome) per case,
/// where the outcome is a boolean or the text the error must contain.
fn table() -> Vec<(String, String, String, Result<bool, String>)> {
    let text = include_str!("extra_specs_ops.json");
    let doc: Value = serde_json::from_str(text).expect("the table is valid JSON");
    let field = |case: &Value, key: &str| case[key].as_str().map(str::to_owned);
    doc["cases"]
        .as_array()
        .expect("`cases` is a list")
        .iter()
        .map(|case| {
            let name = field(case, "name").expect("every case has a name");
            let value = field(case, "value").expect("every case has a value");
            let req = field(case, "req").expect("every case has a req");
            let expected = match (case["matches"].as_bool(), field(case, "error")) {
                (Some(b), None) => Ok(b),
                (None, Some(e)) => Err(e),
                _ => panic!("case {name}: give exactly one of `matches` and `error`"),
            };
            (name, value, req, expected)
        })
        .collect()
}

#[test]
fn every_case_of_the_table_holds() {
    let cases = table();
    assert!(cases.len() >= 70, "the table lost cases: {}", cases.len());
    let mut failures = Vec::new();
    for (name, value, req, expected) in &cases {
        let got = matches(value, req);
        let ok = match (&got, expected) {
            (Ok(g), Ok(e)) => g == e,
            (Err(g), Err(e)) => g.to_string().contains(e.as_str()),
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "{name}: match({value:?}, {req:?}) = {got:?}, expected {expected:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn numbers_match_as_their_python_text_would() {
    for (value, req) in [
        (1024.0, ">= 300"),
        (1024.0, "s== 1024"),
        (2.5, "<in> .5"),
        (9000000.0, ">= 9000000"),
        (1.0, "s== 1"),
        (0.1, "== 0.1"),
    ] {
        let printed = sandpiper_nova_ops::python::number_str(value);
        let requirement = Requirement::parse(req);
        assert_eq!(
            requirement.matches_number(value),
            requirement.matches(&printed),
            "{value} against {req:?}"
        );
    }
}
