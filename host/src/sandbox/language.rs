//! The language a component was written in, as far as its `producers`
//! custom sections tell (the tool-conventions "producers" section that
//! compilers and component tools fill in): shown with each unit so an
//! administrator can tell a Rust unit from a Python one at a glance.
//!
//! No field says it outright for every toolchain, so the sections of the
//! component and of every module nested in it are read together, and the
//! first rule that matches decides. The order matters: a JavaScript
//! component embeds an engine written in C++ and Rust, a C unit carries
//! WASI's adapter (written in Rust, and saying so), and a Rust unit's
//! adapter was built with wit-bindgen-c:
//!
//! | seen                                                        | language     |
//! |-------------------------------------------------------------|--------------|
//! | `processed-by` ComponentizeJS, or `language` JavaScript     | `javascript` |
//! | `processed-by` componentize-py or component-init-transform  | `python`     |
//! | `processed-by` wit-bindgen-rust                             | `rust`       |
//! | `processed-by` wit-bindgen-c                                | `c`          |
//! | else the first `language` a module declares: Rust, or C (C99, C11, ...) | `rust`, `c` |
//! | none of these                                               | unknown      |
//!
//! Unknown is an answer too: producers sections are optional and strippable.

use wasmparser::{KnownCustom, Parser, Payload};

/// What the producers sections of `wasm` (a component, or a core module)
/// say about its source language; `None` when they say nothing we know.
/// Unparsable input says nothing: validation reports it, not this.
pub fn source_language(wasm: &[u8]) -> Option<&'static str> {
    let mut processed_by = Vec::new();
    let mut languages = Vec::new();
    for payload in Parser::new(0).parse_all(wasm) {
        let Ok(Payload::CustomSection(section)) = payload else {
            continue;
        };
        let KnownCustom::Producers(producers) = section.as_known() else {
            continue;
        };
        for field in producers.into_iter().flatten() {
            let into = match field.name {
                "processed-by" => &mut processed_by,
                "language" => &mut languages,
                _ => continue,
            };
            into.extend(field.values.into_iter().flatten().map(|v| v.name));
        }
    }
    let tool = |name: &str| processed_by.iter().any(|t| t.eq_ignore_ascii_case(name));
    let language = |prefix: &str| languages.iter().any(|l| l.starts_with(prefix));
    if tool("ComponentizeJS") || language("JavaScript") {
        Some("javascript")
    } else if tool("componentize-py") || tool("component-init-transform") {
        Some("python")
    } else if tool("wit-bindgen-rust") {
        Some("rust")
    } else if tool("wit-bindgen-c") {
        Some("c")
    } else {
        match languages.first() {
            Some(&"Rust") => Some("rust"),
            Some(first) if is_c(first) => Some("c"),
            _ => None,
        }
    }
}

/// `C`, `C99`, `C11`, ... but not `C_plus_plus_14`.
fn is_c(language: &str) -> bool {
    language
        .strip_prefix('C')
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_in_unit_is_rust() {
        let unit = crate::builtin::UNITS.first().expect("a built-in unit");
        assert_eq!(source_language(unit.wasm), Some("rust"));
    }

    #[test]
    fn c_is_told_from_cpp_and_nothing_is_unknown() {
        assert!(is_c("C11") && is_c("C") && !is_c("C_plus_plus_14"));
        assert_eq!(source_language(b"not wasm"), None);
        assert_eq!(source_language(&wat_free_empty_component()), None);
    }

    /// The smallest component: its preamble alone.
    fn wat_free_empty_component() -> Vec<u8> {
        vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]
    }
}
