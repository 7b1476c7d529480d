//! How units are compiled: the wasmtime settings compiled code depends on.
//!
//! The server's engine (`host/src/sandbox/engine.rs`) starts from
//! [`config`] and adds how instances are laid out in memory, which the
//! code does not depend on. The build step that compiles the built-in
//! units ahead of time (`sandpiper-precompile`, run by
//! `policies/builtins/build.rs` in release builds) uses [`config`] alone.
//! It is a crate of its own so that step builds wasmtime and this file,
//! not the whole server: the one place both read these settings from, so
//! code compiled at build time is code the server would have compiled.
//! Wasmtime refuses, safely, compiled code whose settings differ (its
//! compatibility hash covers them), and the server then compiles the
//! unit itself.

use wasmtime::{Config, Engine, Strategy};

/// Native stack a unit may use. Calls run on the caller's thread, so this
/// must fit inside the smallest host thread stack (2 MiB for Rust threads)
/// with room for the host's own frames.
pub const MAX_WASM_STACK_BYTES: usize = 512 << 10;

/// The settings every unit is compiled with.
pub fn config() -> Config {
    let mut config = Config::new();
    // Cranelift is wasmtime's Tier 1 compiler on x86_64, fuzzed continuously;
    // the baseline compiler (Winch) is not even built in.
    config.strategy(Strategy::Cranelift);
    config.wasm_component_model(true);
    // Fuel gives each call a deterministic budget; epochs bound its wall
    // clock, including time fuel does not see.
    config.consume_fuel(true);
    config.epoch_interruption(true);
    config.max_wasm_stack(MAX_WASM_STACK_BYTES);
    // A unit's output must be a pure function of its input, on any CPU.
    config.cranelift_nan_canonicalization(true);
    config.relaxed_simd_deterministic(true);
    config
}

/// An engine with [`config`] and nothing else, for compiling ahead of time.
pub fn compiling_engine() -> wasmtime::Result<Engine> {
    Engine::new(&config())
}
