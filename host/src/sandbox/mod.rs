//! The sandboxed runtime: policy units are WebAssembly components run by
//! wasmtime, each call in a fresh instance under hard limits.
//!
//! * [`Runtime`] (one per process) compiles a component once, keyed by the
//!   sha256 of its bytes, after checking it is a component that imports
//!   only what the sandbox provides and exports `metadata` plus at least
//!   one role; it then calls `info()` once and keeps the answer.
//! * Every version of the WIT package is served side by side
//!   ([`PolicyVersion`]: `sandpiper:policy@0.1.0`, `@0.2.0` and `@0.3.0`): a unit
//!   uses exactly one, read from its imports and exports at load, and each
//!   call goes through that version's bindings.
//! * [`WasmUnit`] implements [`crate::unit::Unit`]: every call gets a new
//!   `Store` and instance (microseconds with the pooling allocator), a fuel
//!   budget and an epoch deadline that grow with the host count, a memory
//!   cap, and a WASI with no authority (frozen clocks, fixed randomness, no
//!   files, environment or network).
//! * Failures come back typed ([`crate::unit::UnitError`]): out of fuel,
//!   deadline, memory limit, stack overflow, or a trap with the unit's own
//!   panic message read from its stderr. A deadline hit by a call whose
//!   thread was starved of CPU is `Overloaded`, not the unit's fault
//!   ([`STARVED_CPU_PERCENT`]).
//!
//! Calls block the calling thread for their duration. From async code, run
//! them with `tokio::task::spawn_blocking`; on a multi-threaded runtime's
//! worker they still work (they step aside with `block_in_place`), but hold
//! the thread all the same.

mod bindings;
mod call_state;
pub mod code_cache;
mod engine;
mod failure;
pub mod language;
mod limits;
mod module_limits;
mod output;
mod runtime;
mod validate;
mod wasi;
mod wasm_unit;

pub use bindings::PolicyVersion;
pub use engine::{
    EPOCH_TICK, KEEP_RESIDENT_BYTES, KEEP_RESIDENT_WITHOUT_SCAN_BYTES, MAX_WASM_STACK_BYTES,
    POOL_CONCURRENT_CALLS, POOL_CORE_INSTANCES, POOL_MEMORIES, POOL_TABLES,
    TABLE_KEEP_RESIDENT_BYTES,
};
pub use limits::{
    DEFAULT_DEADLINE_BASE, DEFAULT_DEADLINE_PER_HOST, DEFAULT_FUEL_BASE, DEFAULT_FUEL_PER_HOST,
    DEFAULT_MEMORY_BYTES, Limits, LimitsError, MAX_INSTANCES_PER_CALL, MAX_MEMORIES_PER_CALL,
    MAX_MEMORY_BYTES, MAX_TABLE_ELEMENTS, MAX_TABLES_PER_CALL, STARVED_CPU_PERCENT,
};
pub use module_limits::{
    MAX_DATA_SEGMENTS, MAX_ELEMENT_SEGMENTS, MAX_EXPORTS, MAX_FUNCTION_BODY_BYTES,
    MAX_FUNCTION_LOCALS, MAX_FUNCTIONS, MAX_GLOBALS, MAX_IMPORTS, MAX_MEMORIES, MAX_TABLES,
    MAX_TYPES, ModuleLimit,
};
pub use output::{
    MAX_REASON_BYTES, MAX_TRANSFER_BYTES, OUTPUT_BASE_BYTES, OUTPUT_BYTES_PER_CANDIDATE,
    max_output_bytes,
};
pub use runtime::{LoadError, Runtime, RuntimeError, sha256};
pub use validate::{
    ALLOWED_IMPORTS, BALANCE_EXPORT, FILTER_EXPORT, MAX_COMPONENT_BYTES, MAX_INFO_BYTES,
    METADATA_EXPORT, SCORE_EXPORT,
};
pub use wasi::{FROZEN_WALL_CLOCK_SECONDS, MAX_RANDOM_BYTES, STDERR_CAPTURE_BYTES};
pub use wasm_unit::WasmUnit;

/// Lower-case hex of a digest, for logs and debug output.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
