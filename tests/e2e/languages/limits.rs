//! Per-language limits (provisional, being measured).

use std::time::Duration;

use sandpiper::sandbox::Limits;

use super::examples::Language;

pub fn for_language(language: Language) -> Limits {
    match language {
        Language::Rust | Language::C => Limits::default(),
        Language::Python | Language::Js => Limits {
            fuel_base: 2_000_000_000,
            fuel_per_host: 300_000,
            deadline_base: Duration::from_secs(2),
            deadline_per_host: Duration::from_micros(100),
            memory_bytes: 256 << 20,
        },
    }
}
