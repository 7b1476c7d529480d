//! `Hostile`: a unit that misbehaves on request, so tests can prove the host
//! survives every way a unit can go wrong. Not shipped.
//!
//! The parameter `mode` picks the misbehaviour; `ok` (the default) is a
//! well-behaved unit. In every role:
//!
//! | mode | filter | score | balance |
//! |---|---|---|---|
//! | `ok` | rejects nothing | 1.0 for every candidate | `None` |
//! | `loop` | spins forever | same | same |
//! | `memory-bomb` | allocates until memory runs out | same | same |
//! | `recursion` | recurses without end (stack overflow) | same | same |
//! | `panic` | panics: "hostile unit panicked on purpose" | same | same |
//! | `wrong-length` | as `ok` | one value more than candidates | as `ok` |
//! | `bad-index` | rejects host `host_count` | as `ok` | moves VM `vm_count` to host `host_count` |
//! | `duplicate-index` | rejects the first candidate twice | as `ok` | first VM to the first candidate, listed twice |
//! | `nan` | as `ok` | first value NaN | as `ok` |
//! | `infinite` | as `ok` | first value +infinity | as `ok` |
//! | `huge-output` | one rejection of [`HUGE_OUTPUT_ITEMS`] hosts | that many values | that many destinations |
//! | `huge-reason` | rejects the first candidate with a [`HUGE_REASON_BYTES`] reason | as `ok` | as `ok` |
//!
//! Run only `ok` and the invalid-output modes natively (`native_unit()`):
//! natively nothing stops a loop, a memory bomb or a stack overflow.
//!
//! A trap during instantiation needs a different component, not a mode:
//! see `sandpiper-test-instantiate-trap`.

use sandpiper_guest::prelude::*;

/// Parameter: which misbehaviour to show.
pub const MODE: &str = "mode";

/// Entries in a `huge-output` answer: far more than any snapshot in tests
/// has hosts, yet only 4 MiB of indices (8 MiB of scores), so the output
/// checks fire rather than a guest memory limit.
pub const HUGE_OUTPUT_ITEMS: usize = 1 << 20;

/// Bytes in a `huge-reason` reason: far beyond any sensible sentence, yet
/// small enough to build under a guest memory limit.
pub const HUGE_REASON_BYTES: usize = 4 << 20;

/// Allocation step of `memory-bomb`: small, so the failing allocation comes
/// close to whatever limit the host sets.
pub const MEMORY_BOMB_CHUNK_BYTES: usize = 1 << 20;

/// Page size of WebAssembly memory: `memory-bomb` touches one byte per page
/// so every page it reserves is really used.
const WASM_PAGE_BYTES: usize = 64 << 10;

/// The message of `panic`, which tests look for in the host's report.
pub const PANIC_MESSAGE: &str = "hostile unit panicked on purpose";

/// The misbehaviours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Ok,
    Loop,
    MemoryBomb,
    Recursion,
    Panic,
    WrongLength,
    BadIndex,
    DuplicateIndex,
    Nan,
    Infinite,
    HugeOutput,
    HugeReason,
}

impl Mode {
    /// Every mode with its parameter value.
    pub const ALL: &[(Mode, &str)] = &[
        (Mode::Ok, "ok"),
        (Mode::Loop, "loop"),
        (Mode::MemoryBomb, "memory-bomb"),
        (Mode::Recursion, "recursion"),
        (Mode::Panic, "panic"),
        (Mode::WrongLength, "wrong-length"),
        (Mode::BadIndex, "bad-index"),
        (Mode::DuplicateIndex, "duplicate-index"),
        (Mode::Nan, "nan"),
        (Mode::Infinite, "infinite"),
        (Mode::HugeOutput, "huge-output"),
        (Mode::HugeReason, "huge-reason"),
    ];

    fn of(params: Params<'_>) -> Mode {
        let value = params.str(MODE).unwrap_or("ok");
        Mode::ALL
            .iter()
            .find(|(_, name)| *name == value)
            .map_or(Mode::Ok, |&(mode, _)| mode)
    }

    /// Runs the misbehaviours every role shares; returns for the others.
    fn misbehave_anywhere(self) {
        match self {
            Mode::Loop => spin_forever(),
            Mode::MemoryBomb => exhaust_memory(),
            Mode::Recursion => {
                std::hint::black_box(recurse(0));
            }
            Mode::Panic => panic!("{PANIC_MESSAGE}"),
            _ => {}
        }
    }
}

/// The `mode` pattern, built from [`Mode::ALL`] so the two cannot disagree.
fn mode_pattern() -> String {
    let names: Vec<&str> = Mode::ALL.iter().map(|&(_, name)| name).collect();
    format!("^({})$", names.join("|"))
}

fn spin_forever() -> ! {
    let mut turns = 0u64;
    loop {
        turns = std::hint::black_box(turns.wrapping_add(1));
    }
}

/// Reserves memory chunk after chunk, writing one byte per page rather than
/// filling it, so it reaches a memory limit long before a fuel budget.
fn exhaust_memory() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk = Vec::with_capacity(MEMORY_BOMB_CHUNK_BYTES);
        chunk.extend((0..MEMORY_BOMB_CHUNK_BYTES / WASM_PAGE_BYTES).map(|page| page as u8));
        hoard.push(std::hint::black_box(chunk));
    }
}

/// Never returns: the test `depth == u64::MAX` is hidden from the compiler
/// so it cannot prove that, and the work after the call keeps the
/// recursion from becoming a loop.
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    if depth == std::hint::black_box(u64::MAX) {
        return depth;
    }
    std::hint::black_box(recurse(depth + 1)).wrapping_add(depth)
}

/// The `Hostile` test unit.
pub struct Hostile;

impl Unit for Hostile {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "Hostile",
            "Test unit that misbehaves as its `mode` parameter says. Never use in a policy.",
        )
        .with_param(ParamSpec::new(
            MODE,
            "The misbehaviour: ok, loop, memory-bomb, recursion, panic, wrong-length, \
             bad-index, duplicate-index, nan, infinite, huge-output or huge-reason.",
            "ok",
            mode_pattern(),
        ))
    }
}

impl Filter for Hostile {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mode = Mode::of(cx.params());
        mode.misbehave_anywhere();
        let first = candidates.first().copied();
        match (mode, first) {
            (Mode::BadIndex, _) => vec![Rejection::new("bad index", vec![cx.hosts().len() as u32])],
            (Mode::DuplicateIndex, Some(first)) => vec![
                Rejection::new("first", vec![first]),
                Rejection::new("again", vec![first]),
            ],
            (Mode::HugeOutput, _) => vec![Rejection::new(
                "huge output",
                repeat_first(candidates, HUGE_OUTPUT_ITEMS),
            )],
            (Mode::HugeReason, Some(first)) => {
                vec![Rejection::new("x".repeat(HUGE_REASON_BYTES), vec![first])]
            }
            _ => Vec::new(),
        }
    }
}

impl Score for Hostile {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let mode = Mode::of(cx.params());
        mode.misbehave_anywhere();
        let mut values = vec![1.0; candidates.len()];
        match mode {
            Mode::WrongLength => values.push(1.0),
            Mode::Nan => set_first(&mut values, f64::NAN),
            Mode::Infinite => set_first(&mut values, f64::INFINITY),
            Mode::HugeOutput => values = vec![1.0; HUGE_OUTPUT_ITEMS],
            _ => {}
        }
        Scores::new(values)
    }
}

impl Balance for Hostile {
    fn balance(cx: &BalanceContext<'_>) -> Option<Migration> {
        let mode = Mode::of(cx.params());
        mode.misbehave_anywhere();
        let first = cx.candidates().first().copied();
        match (mode, first) {
            (Mode::BadIndex, _) => Some(Migration {
                vm: cx.vms().len() as u32,
                destinations: vec![cx.hosts().len() as u32],
            }),
            (Mode::DuplicateIndex, Some(first)) => Some(Migration {
                vm: 0,
                destinations: vec![first, first],
            }),
            (Mode::HugeOutput, _) => Some(Migration {
                vm: 0,
                destinations: repeat_first(cx.candidates(), HUGE_OUTPUT_ITEMS),
            }),
            _ => None,
        }
    }
}

fn set_first(values: &mut [f64], value: f64) {
    if let Some(first) = values.first_mut() {
        *first = value;
    }
}

/// `len` copies of the first of `hosts` (host 0 when there are none): a
/// fill is cheap, so the answer's size, not the fuel spent building it, is
/// what the host meets.
fn repeat_first(hosts: &[u32], len: usize) -> Vec<u32> {
    vec![hosts.first().copied().unwrap_or(0); len]
}

sandpiper_guest::export_unit!(Hostile: filter, score, balance);

#[cfg(test)]
mod tests {
    use super::*;
    use sandpiper_guest::model::KeyValue;

    fn request(mode: &str) -> Request {
        Request {
            params: vec![KeyValue::new(MODE, mode)],
            ..Request::default()
        }
    }

    #[test]
    fn the_pattern_admits_every_mode_and_the_default_is_ok() {
        let unit = native_unit();
        let mode = unit.info.param(MODE).expect("declares mode");
        assert_eq!(mode.default_value, "ok");
        for (_, name) in Mode::ALL {
            assert!(mode.pattern.contains(name), "{name}");
        }
    }

    #[test]
    fn invalid_output_modes_misbehave_natively() {
        let unit = native_unit();
        let inventory = Inventory::new(3, 1);
        let (filter, score, balance) = (
            unit.filter.expect("filter"),
            unit.score.expect("score"),
            unit.balance.expect("balance"),
        );
        assert!(filter(&inventory, &request("ok"), &[0, 1]).is_empty());
        assert_eq!(
            score(&inventory, &request("wrong-length"), &[0, 1])
                .values
                .len(),
            3
        );
        assert!(score(&inventory, &request("nan"), &[0, 1]).values[0].is_nan());
        assert_eq!(
            filter(&inventory, &request("bad-index"), &[0])[0].hosts,
            [3]
        );
        let huge = balance(
            &inventory,
            &BalanceRequest {
                params: vec![KeyValue::new(MODE, "huge-output")],
                candidates: vec![0, 2],
            },
        );
        assert_eq!(huge.map(|m| m.destinations.len()), Some(HUGE_OUTPUT_ITEMS));
    }
}
