//! Turns a failed call into a typed [`UnitError`]: by wasmtime's trap code,
//! the limiter's recorded refusal and the WASI exit type, never by message
//! text.

use std::time::Duration;

use wasmtime::Trap;
use wasmtime_wasi::I32Exit;

use super::limits::MemoryRefusal;
use crate::unit::UnitError;

/// Where in a call the failure happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Creating the instance (including the unit's start-up code).
    Instantiate,
    /// Running the exported function and copying its answer out.
    Call,
}

/// What the call was allowed and what it left behind, for classifying.
pub(crate) struct Evidence<'a> {
    pub phase: Phase,
    pub fuel_budget: u64,
    pub deadline: Duration,
    pub refusal: Option<MemoryRefusal>,
    pub stderr: &'a str,
}

/// Classifies `error` from a call.
pub(crate) fn classify(error: &wasmtime::Error, evidence: &Evidence<'_>) -> UnitError {
    let trap = error.downcast_ref::<Trap>().copied();
    match trap {
        Some(Trap::OutOfFuel) => {
            return UnitError::OutOfFuel {
                budget: evidence.fuel_budget,
            };
        }
        Some(Trap::Interrupt) => {
            return UnitError::DeadlineExceeded {
                deadline: evidence.deadline,
            };
        }
        Some(Trap::StackOverflow) => return UnitError::StackOverflow,
        _ => {}
    }
    // A refused growth explains whatever the unit did next: Rust aborts with
    // `unreachable`, a C unit may dereference the null it got back.
    if let Some(refusal) = evidence.refusal {
        return UnitError::MemoryLimit {
            limit_bytes: refusal.limit_bytes,
        };
    }
    let panic = panic_text(evidence.stderr);
    if let Some(trap) = trap {
        return UnitError::Trap {
            trap: trap_code(trap),
            panic,
        };
    }
    if let Some(exit) = error.downcast_ref::<I32Exit>() {
        return UnitError::Trap {
            trap: format!("exit({})", exit.0),
            panic,
        };
    }
    match evidence.phase {
        Phase::Instantiate => UnitError::Instantiate(format!("{error:#}")),
        // Not a trap: a host function refused the unit's arguments, or the
        // answer broke the canonical ABI (bad pointer, invalid UTF-8, more
        // than `MAX_TRANSFER_BYTES`).
        Phase::Call => UnitError::Trap {
            trap: format!("{error:#}"),
            panic,
        },
    }
}

/// A trap's code in snake case, e.g. `unreachable_code_reached`: stable,
/// short, and derived from wasmtime's own enum.
pub(crate) fn trap_code(trap: Trap) -> String {
    let name = format!("{trap:?}");
    let mut code = String::with_capacity(name.len() + 4);
    for (i, c) in name.char_indices() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                code.push('_');
            }
            code.push(c.to_ascii_lowercase());
        } else {
            code.push(c);
        }
    }
    code
}

/// What the unit printed to stderr before failing (a Rust unit prints
/// "panicked at src/lib.rs:1:2:\nmessage"), without the hint lines Rust
/// adds for terminals.
fn panic_text(stderr: &str) -> Option<String> {
    let text: Vec<&str> = stderr
        .lines()
        .filter(|line| !line.starts_with("note: run with `RUST_BACKTRACE=1`"))
        .collect();
    let text = text.join("\n");
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(refusal: Option<MemoryRefusal>) -> Evidence<'static> {
        Evidence {
            phase: Phase::Call,
            fuel_budget: 7,
            deadline: Duration::from_millis(3),
            refusal,
            stderr: "\nthread '<unnamed>' panicked at src/lib.rs:1:2:\nboom\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
        }
    }

    #[test]
    fn traps_are_classified_by_code() {
        let e = |t: Trap| wasmtime::Error::from(t);
        assert_eq!(
            classify(&e(Trap::OutOfFuel), &evidence(None)),
            UnitError::OutOfFuel { budget: 7 }
        );
        assert_eq!(
            classify(&e(Trap::Interrupt), &evidence(None)),
            UnitError::DeadlineExceeded {
                deadline: Duration::from_millis(3)
            }
        );
        assert_eq!(
            classify(&e(Trap::StackOverflow), &evidence(None)),
            UnitError::StackOverflow
        );
        assert_eq!(
            classify(
                &e(Trap::UnreachableCodeReached),
                &evidence(Some(MemoryRefusal { limit_bytes: 9 }))
            ),
            UnitError::MemoryLimit { limit_bytes: 9 }
        );
        assert_eq!(
            classify(&e(Trap::UnreachableCodeReached), &evidence(None)),
            UnitError::Trap {
                trap: "unreachable_code_reached".to_owned(),
                panic: Some("thread '<unnamed>' panicked at src/lib.rs:1:2:\nboom".to_owned()),
            }
        );
    }
}
