//! Turns a failed call into a typed [`UnitError`]: by wasmtime's trap code,
//! the limiter's recorded refusal and the WASI exit type, never by message
//! text.

use std::time::Duration;

use wasmtime::Trap;
use wasmtime_wasi::I32Exit;

use super::limits::{MemoryRefusal, STARVED_CPU_PERCENT};
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
    /// CPU time the call's thread got, and the wall-clock time that passed,
    /// from the start of the call to the failure.
    pub cpu: Duration,
    pub elapsed: Duration,
}

/// Whether a call that got `cpu` of CPU time in `elapsed` of wall-clock
/// time was starved: see [`STARVED_CPU_PERCENT`].
pub(crate) fn starved(cpu: Duration, elapsed: Duration) -> bool {
    cpu.as_nanos() * 100 < elapsed.as_nanos() * u128::from(STARVED_CPU_PERCENT)
}

/// CPU time the calling thread has used so far. The call runs on one thread
/// from start to end (`wasm_unit::blocking`), so the difference of two
/// readings is what the call got.
pub(crate) fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
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
        Some(Trap::Interrupt) if starved(evidence.cpu, evidence.elapsed) => {
            return UnitError::Overloaded {
                deadline: evidence.deadline,
                cpu: evidence.cpu,
                elapsed: evidence.elapsed,
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
            cpu: Duration::from_millis(3),
            elapsed: Duration::from_millis(3),
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
        let starved = Evidence {
            cpu: Duration::from_millis(1),
            elapsed: Duration::from_millis(40),
            ..evidence(None)
        };
        assert_eq!(
            classify(&e(Trap::Interrupt), &starved),
            UnitError::Overloaded {
                deadline: Duration::from_millis(3),
                cpu: Duration::from_millis(1),
                elapsed: Duration::from_millis(40),
            }
        );
        // Only a deadline is ever blamed on the machine.
        assert_eq!(
            classify(&e(Trap::OutOfFuel), &starved),
            UnitError::OutOfFuel { budget: 7 }
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

    #[test]
    fn starvation_is_under_half_the_wall_clock_time_on_cpu() {
        let ms = Duration::from_millis;
        assert!(starved(ms(0), ms(10)));
        assert!(starved(ms(4), ms(10)));
        assert!(!starved(ms(5), ms(10)), "exactly half had the CPU");
        assert!(!starved(ms(10), ms(10)));
        assert!(!starved(ms(0), ms(0)));
        // Several threads' worth can never read as starved.
        assert!(!starved(ms(30), ms(10)));
    }

    #[test]
    fn the_thread_clock_counts_this_threads_work_only() {
        let start = thread_cpu_time();
        let wall = std::time::Instant::now();
        std::thread::sleep(ms_of(30));
        let slept = thread_cpu_time() - start;
        assert!(
            starved(slept, wall.elapsed()),
            "sleeping used {slept:?} of CPU"
        );
        let start = thread_cpu_time();
        let mut x = 0u64;
        while thread_cpu_time() - start < ms_of(5) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(thread_cpu_time() - start >= ms_of(5));
    }

    fn ms_of(n: u64) -> Duration {
        Duration::from_millis(n)
    }
}
