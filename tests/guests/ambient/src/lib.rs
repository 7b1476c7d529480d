//! `Ambient`: a test unit that looks at everything a unit could use besides
//! its inputs and reports what it saw, one rejection per observation with
//! reason `key=value` and no hosts. Not shipped.
//!
//! The sandbox must give it nothing: no environment, arguments or files,
//! clocks that do not move, the same "random" numbers every call, no memory
//! of earlier calls (neither its statics nor anything it wrote to its heap
//! or stack), and a `sleep` that returns at once instead of holding the
//! host's thread.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

use sandpiper_guest::prelude::*;

/// Keys of the observations, in the order reported.
pub const CALLS: &str = "calls";
pub const ENV_VARS: &str = "env-vars";
pub const ARGS: &str = "args";
pub const ROOT_DIR: &str = "read-root-dir";
pub const FILE: &str = "read-file";
pub const WALL_CLOCK_SECS: &str = "wall-clock-secs";
pub const SLEPT_NANOS: &str = "monotonic-nanos-across-sleep";
pub const RANDOM_HASH: &str = "random-hash";
pub const LEFTOVERS: &str = "leftover-marker-words";

/// The two halves of the marker word each call leaves in its heap and on
/// its stack: the marker itself (`MARKER_HIGH ^ MARKER_LOW`) is only ever
/// computed at run time, so it is in no data segment, and finding it in a
/// fresh instance's memory means an earlier call's writes survived.
const MARKER_HIGH: u64 = 0x5A4D_1E57_0000_0000;
const MARKER_LOW: u64 = 0x0000_0000_C0DE_F00D;
/// Marker words written per call: 256 KiB of heap and 4 KiB of stack.
const HEAP_MARKER_WORDS: usize = 32 << 10;
const STACK_MARKER_WORDS: usize = 512;
/// Each call grows its memory to this size before looking, and writes
/// markers over what it grew: memory a unit grows into is kept mapped
/// between instances too (up to the sandbox's `KEEP_RESIDENT_BYTES`), so
/// it must be reset like the initial memory.
#[cfg(target_arch = "wasm32")]
const GROWN_TO_BYTES: usize = 8 << 20;

/// How long the unit asks to sleep: far beyond any deadline, so a sleep
/// that really blocked would show as a hung test.
pub const SLEEP: Duration = Duration::from_secs(3600);

/// Counts calls within one instance: a fresh instance per call keeps it 1.
static CALLS_SEEN: AtomicU32 = AtomicU32::new(0);

/// Every observation as `(key, value)`.
pub fn observe() -> Vec<(&'static str, String)> {
    let calls = CALLS_SEEN.fetch_add(1, Ordering::Relaxed) + 1;
    let wall = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let before = Instant::now();
    std::thread::sleep(SLEEP);
    let slept = before.elapsed().as_nanos();
    let random = std::collections::hash_map::RandomState::new().hash_one(42u64);
    let grown = grow_memory();
    let leftovers = leftover_marker_words();
    leave_markers(grown);
    vec![
        (CALLS, calls.to_string()),
        (ENV_VARS, std::env::vars_os().count().to_string()),
        (ARGS, std::env::args_os().count().to_string()),
        (ROOT_DIR, outcome(std::fs::read_dir("/").map(|d| d.count()))),
        (FILE, outcome(std::fs::read("/etc/passwd").map(|b| b.len()))),
        (WALL_CLOCK_SECS, wall.to_string()),
        (SLEPT_NANOS, slept.to_string()),
        (RANDOM_HASH, random.to_string()),
        (LEFTOVERS, leftovers),
    ]
}

/// Marker words anywhere in the unit's linear memory, before this call
/// wrote any: 0 unless an earlier call's memory survived.
#[cfg(target_arch = "wasm32")]
fn leftover_marker_words() -> String {
    let (high, low) = (
        std::hint::black_box(MARKER_HIGH),
        std::hint::black_box(MARKER_LOW),
    );
    let end = core::arch::wasm32::memory_size(0) * 65536;
    let found = (8..end)
        .step_by(8)
        // SAFETY: every address below the memory's size is readable in
        // WebAssembly; the unit only reads its own memory, as words.
        .filter(|&address| unsafe { std::ptr::read_volatile(address as *const u64) } ^ high == low)
        .count();
    found.to_string()
}

/// Natively there is no linear memory to look at.
#[cfg(not(target_arch = "wasm32"))]
fn leftover_marker_words() -> String {
    "n/a".to_owned()
}

/// Grows the unit's memory to [`GROWN_TO_BYTES`], returning the byte
/// range grown (empty when it already was that large, or the grow failed).
/// The allocator only hands out memory it grew itself, so the range is
/// this call's alone.
#[cfg(target_arch = "wasm32")]
fn grow_memory() -> std::ops::Range<usize> {
    let size = core::arch::wasm32::memory_size(0) * 65536;
    if size >= GROWN_TO_BYTES
        || core::arch::wasm32::memory_grow(0, (GROWN_TO_BYTES - size) / 65536) == usize::MAX
    {
        return 0..0;
    }
    size..GROWN_TO_BYTES
}

/// Natively there is no linear memory to grow.
#[cfg(not(target_arch = "wasm32"))]
fn grow_memory() -> std::ops::Range<usize> {
    0..0
}

/// Writes the marker over fresh heap (kept, never freed), stack and the
/// memory `grown` by [`grow_memory`].
fn leave_markers(grown: std::ops::Range<usize>) {
    let marker = std::hint::black_box(MARKER_HIGH) ^ std::hint::black_box(MARKER_LOW);
    std::mem::forget(std::hint::black_box(vec![marker; HEAP_MARKER_WORDS]));
    std::hint::black_box([marker; STACK_MARKER_WORDS]);
    for address in grown.step_by(8) {
        // SAFETY: linear memory this call grew and no allocation owns;
        // natively the range is empty.
        unsafe { std::ptr::write_volatile(address as *mut u64, marker) };
    }
}

fn outcome(result: std::io::Result<usize>) -> String {
    match result {
        Ok(n) => format!("ok({n})"),
        Err(_) => "error".to_owned(),
    }
}

/// The `Ambient` test unit.
pub struct Ambient;

impl Unit for Ambient {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "Ambient",
            "Test unit that reports the environment, files, clocks and randomness it can see. \
             Never use in a policy.",
        )
    }
}

impl Filter for Ambient {
    fn filter(_cx: &Context<'_>, _candidates: &[u32]) -> Vec<Rejection> {
        observe()
            .into_iter()
            .map(|(key, value)| Rejection::new(format!("{key}={value}"), Vec::new()))
            .collect()
    }
}

sandpiper_guest::export_unit!(Ambient: filter);
