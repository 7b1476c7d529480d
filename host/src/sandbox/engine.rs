//! The one wasmtime `Engine` of a process and the thread that ticks its
//! epoch: how units are compiled, metered and laid out in memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::limits::{
    MAX_INSTANCES_PER_CALL, MAX_MEMORIES_PER_CALL, MAX_MEMORY_BYTES, MAX_TABLES_PER_CALL,
};

/// How often the epoch advances. Deadlines are counted in ticks, so this is
/// their resolution; 1 ms keeps a runaway unit's overshoot well under the
/// smallest deadline while costing the ticker thread next to nothing.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Component instances alive at once across all units, i.e. concurrent
/// calls. Each call holds one instance only while it runs; 256 is far more
/// than two cores can keep busy, and a call beyond it fails to instantiate
/// rather than queueing.
pub const POOL_CONCURRENT_CALLS: u32 = 256;

/// Core instances alive at once across all calls: a Rust component uses a
/// handful per call, componentize-py's at least 17.
pub const POOL_CORE_INSTANCES: u32 = POOL_CONCURRENT_CALLS * 8;

/// Linear memories alive at once across all calls. Each slot reserves
/// address space (not memory) for its largest size plus guard pages.
pub const POOL_MEMORIES: u32 = POOL_CONCURRENT_CALLS * 2;

/// Tables alive at once across all calls.
pub const POOL_TABLES: u32 = POOL_CONCURRENT_CALLS * 8;

/// Bytes of each pooled linear memory that may stay mapped when its
/// instance ends, reset in place instead of returned to the kernel, so the
/// next instance in the slot takes no first-touch page faults there.
///
/// With [`PAGEMAP_SCAN`](wasmtime::PoolingAllocationConfig::pagemap_scan)
/// on (where it is usable: no swap, Linux 6.7+) only the pages an
/// instance actually wrote are reset (`memset`, or copied back from the
/// data image), so a unit that touches 100 KiB pays for 100 KiB, whatever
/// this says. A unit that writes more than this pays page faults for the
/// rest on its next call instead: units reading 10,000 hosts' hardware
/// columns write 8–10 MiB, and with 4 MiB kept `NUMATopologyFilter` took
/// 12.5 ms a call instead of 11.6 (`cargo bench --bench nova_units --
/// numa-topology`, docs/performance.md). What a slot keeps is at most what
/// its last unit wrote, for wasmtime's warm slots only; the start-up
/// benchmark's resident set (10,000 hosts, 50 policies) was 153, 151 and
/// 153 MiB with 4, 8 and 16 MiB kept.
pub const KEEP_RESIDENT_BYTES: usize = 16 << 20;

/// [`KEEP_RESIDENT_BYTES`] without the scan: wasmtime then `memset`s the
/// whole kept part on every drop, so it stays at a Rust unit's initial
/// memory (before the scan was turned on, a Rust unit's whole 1.06 MiB,
/// 1 MiB stack region included, was most of each call's fixed cost).
pub const KEEP_RESIDENT_WITHOUT_SCAN_BYTES: usize = 4 << 20;

/// Bytes of each pooled table kept mapped and reset in place when its
/// instance ends, as [`KEEP_RESIDENT_BYTES`] for memories. A component's
/// tables hold a few dozen function references, so 64 KiB keeps all of
/// them; with none, every call ended in an `madvise` per table.
pub const TABLE_KEEP_RESIDENT_BYTES: usize = 64 << 10;

/// Set (to anything) to have the engine write `/tmp/perf-<pid>.map`, so
/// that `perf report` names the units' functions instead of `[JIT]`
/// addresses: how to find where a unit's time goes in the sandbox
/// (docs/performance.md). Off by default: the map grows with every unit
/// compiled or loaded.
pub const PERF_MAP_ENV: &str = "SANDPIPER_PERF_MAP";

/// Native stack a unit may use (defined with the compile settings).
pub use sandpiper_compile::MAX_WASM_STACK_BYTES;

/// Builds the engine every unit is compiled for and run in.
///
/// Artifacts from `precompile` embed the compile settings: one compiled for
/// a differently configured engine (say, without fuel) is refused by
/// wasmtime when loaded, never run.
pub(crate) fn build() -> wasmtime::Result<Engine> {
    let scan = page_scan_usable();
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(POOL_CONCURRENT_CALLS)
        .total_core_instances(POOL_CORE_INSTANCES)
        .total_memories(POOL_MEMORIES)
        .total_tables(POOL_TABLES)
        .max_core_instances_per_component(u32::try_from(MAX_INSTANCES_PER_CALL)?)
        .max_memories_per_component(u32::try_from(MAX_MEMORIES_PER_CALL)?)
        .max_tables_per_component(u32::try_from(MAX_TABLES_PER_CALL)?)
        .max_memory_size(usize::try_from(MAX_MEMORY_BYTES)?)
        .linear_memory_keep_resident(if scan {
            KEEP_RESIDENT_BYTES
        } else {
            KEEP_RESIDENT_WITHOUT_SCAN_BYTES
        })
        .table_keep_resident(TABLE_KEEP_RESIDENT_BYTES)
        .pagemap_scan(if scan { Enabled::Yes } else { Enabled::No });

    // What compiled code depends on, shared with the build step that
    // compiles the built-in units ahead of time.
    let mut config = sandpiper_compile::config();
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    if std::env::var_os(PERF_MAP_ENV).is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    Engine::new(&config)
}

/// Whether pooled memories are reset with `PAGEMAP_SCAN` (Linux 6.7+): only
/// the pages an instance wrote, instead of the whole kept-resident part.
///
/// The scan resets only *present* pages: a page the unit wrote that the
/// kernel swapped out before the instance ended would not be reset, and the
/// next instance in the slot could read it. So the scan is used only when
/// no swap is configured when the engine is built (`/proc/swaps` lists
/// none), as on our servers, and the kernel has the ioctl. Enabling swap on
/// a running server is not supported.
///
/// Without the scan every drop resets the whole kept-resident part, which
/// with Rust units' 4 MiB initial memory is all of it: measured
/// (`cargo bench -p sandpiper-tests --bench sandbox`, scan forced off) a
/// fresh instance costs ~37 µs instead of ~7, a call over 10,000
/// candidates ~40 µs instead of ~9, the CPU filter over 10,000 hosts 98 µs
/// instead of 66. Keeping only 1 MiB resident there was worse for real
/// calls (46 µs and 143 µs: page faults on the rest).
fn page_scan_usable() -> bool {
    !swap_configured() && PoolingAllocationConfig::is_pagemap_scan_available()
}

/// True when `/proc/swaps` lists a swap area, or cannot be read.
fn swap_configured() -> bool {
    match std::fs::read_to_string("/proc/swaps") {
        // The first line is the column header.
        Ok(swaps) => swaps.lines().skip(1).any(|line| !line.trim().is_empty()),
        Err(_) => true,
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`] while calls run, until
/// dropped.
///
/// Only a running call reads the epoch, so after [`IDLE_TICKS`] ticks
/// without one the ticker sleeps until the next call starts
/// ([`EpochTicker::running`]): an idle server does not wake a thousand
/// times a second (ticking, an idle server used 28–32 ms of CPU a second
/// on the two-core machine of docs/performance.md, `cargo bench --bench
/// startup`). A call that starts while it sleeps wakes it, and its
/// deadline, counted from the epoch when it starts, runs from the first
/// tick after.
pub(crate) struct EpochTicker {
    state: Arc<TickerState>,
    /// The ticker's thread: woken by a call that starts while it sleeps,
    /// taken to be joined when this is dropped.
    thread: Option<JoinHandle<()>>,
}

/// Ticks without a running call before the ticker sleeps: a server
/// deciding steadily leaves gaps of a few milliseconds between calls, and
/// waking the ticker after each would cost more than ticking through them.
pub const IDLE_TICKS: u32 = 100;

#[derive(Default)]
struct TickerState {
    /// Calls running now.
    running: AtomicUsize,
    /// The ticker is asleep, or about to be: a call that starts wakes it.
    asleep: AtomicBool,
    stop: AtomicBool,
}

/// A call running: the ticker keeps ticking while one lives.
pub(crate) struct Running {
    state: Arc<TickerState>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.state.running.fetch_sub(1, Ordering::SeqCst);
    }
}

impl EpochTicker {
    pub(crate) fn start(engine: Engine) -> std::io::Result<Self> {
        let state = Arc::new(TickerState::default());
        let ticking = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name("sandpiper-epoch".to_owned())
            .spawn(move || tick(&engine, &ticking))?;
        Ok(EpochTicker {
            state,
            thread: Some(thread),
        })
    }

    /// Says a call is starting: the epoch advances until the returned
    /// guard is dropped.
    pub(crate) fn running(&self) -> Running {
        self.state.running.fetch_add(1, Ordering::SeqCst);
        // After the count: either the ticker sees this call before it
        // sleeps, or this sees it asleep (both `SeqCst`), and an unpark
        // before its park is not lost.
        if self.state.asleep.load(Ordering::SeqCst)
            && let Some(thread) = &self.thread
        {
            thread.thread().unpark();
        }
        Running {
            state: Arc::clone(&self.state),
        }
    }
}

/// The ticker's loop: a tick every [`EPOCH_TICK`], asleep while no call
/// has run for [`IDLE_TICKS`] ticks.
fn tick(engine: &Engine, state: &TickerState) {
    let mut idle = 0;
    while !state.stop.load(Ordering::SeqCst) {
        std::thread::park_timeout(EPOCH_TICK);
        engine.increment_epoch();
        if state.running.load(Ordering::SeqCst) > 0 {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle >= IDLE_TICKS {
            state.asleep.store(true, Ordering::SeqCst);
            if state.running.load(Ordering::SeqCst) == 0 && !state.stop.load(Ordering::SeqCst) {
                std::thread::park();
            }
            state.asleep.store(false, Ordering::SeqCst);
            idle = 0;
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            // The loop cannot panic; a join error would only repeat that.
            let _ = thread.join();
        }
    }
}

/// Ticks to allow for `deadline`: rounded up, plus one because the current
/// tick may be about to end.
pub(crate) fn deadline_ticks(deadline: Duration) -> u64 {
    let tick = EPOCH_TICK.as_nanos().max(1);
    let ticks = deadline.as_nanos().div_ceil(tick);
    u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits up to ten seconds for the ticker to be asleep or awake.
    fn wait_until_asleep(ticker: &EpochTicker, asleep: bool) {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while ticker.state.asleep.load(Ordering::SeqCst) != asleep {
            assert!(
                std::time::Instant::now() < until,
                "the ticker is still {}",
                if asleep { "ticking" } else { "asleep" }
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_ticker_sleeps_while_no_call_runs_and_a_call_wakes_it() {
        let ticker = EpochTicker::start(build().expect("engine")).expect("ticker");
        wait_until_asleep(&ticker, true);
        let running = ticker.running();
        wait_until_asleep(&ticker, false);
        // Awake for as long as the call runs, well past the idle ticks.
        std::thread::sleep(EPOCH_TICK * IDLE_TICKS * 3);
        assert!(!ticker.state.asleep.load(Ordering::SeqCst));
        drop(running);
        wait_until_asleep(&ticker, true);
    }

    #[test]
    fn a_call_started_while_the_ticker_sleeps_still_meets_its_deadline() {
        let engine = build().expect("engine");
        let ticker = EpochTicker::start(engine.clone()).expect("ticker");
        wait_until_asleep(&ticker, true);
        let spin = wasmtime::Module::new(
            &engine,
            wat::parse_str(r#"(module (func (export "spin") (loop (br 0))))"#).expect("wat"),
        )
        .expect("module");
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _running = ticker.running();
            let mut store = wasmtime::Store::new(&engine, ());
            store.set_fuel(u64::MAX).expect("fuel");
            store.set_epoch_deadline(deadline_ticks(Duration::from_millis(10)));
            store.epoch_deadline_trap();
            let result = wasmtime::Instance::new(&mut store, &spin, &[])
                .and_then(|instance| instance.get_typed_func::<(), ()>(&mut store, "spin"))
                .and_then(|spin| spin.call(&mut store, ()));
            let _ = done.send(result.map_err(|e| e.downcast::<wasmtime::Trap>()));
        });
        // Without the wake-up the loop would spin on: the epoch would never
        // reach its deadline.
        let result = finished
            .recv_timeout(Duration::from_secs(30))
            .expect("the endless loop is stopped");
        assert!(
            matches!(result, Err(Ok(wasmtime::Trap::Interrupt))),
            "stopped by its deadline: {result:?}"
        );
    }

    #[test]
    fn deadlines_round_up_to_whole_ticks() {
        assert_eq!(deadline_ticks(Duration::ZERO), 1);
        assert_eq!(deadline_ticks(EPOCH_TICK), 2);
        assert_eq!(
            deadline_ticks(EPOCH_TICK * 10 + Duration::from_nanos(1)),
            12
        );
        assert!(deadline_ticks(Duration::MAX) > 1 << 40);
    }
}
