//! The WASI a unit sees: enough for a language's standard library to start,
//! and no authority. No arguments, environment, files or network; stdin is
//! empty and stdout discarded; stderr is kept (bounded) so a panic message
//! can be reported; clocks are frozen and randomness is a fixed sequence,
//! so a unit's output is a pure function of its input.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime::component::{HasData, HasSelf, Linker, Resource, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream, WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{HostMonotonicClock, HostWallClock, WasiClocks, WasiClocksView};
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random, sync};
use wasmtime_wasi::p2::{DynPollable, OutputStream, Pollable, StreamResult};
use wasmtime_wasi::random::{WasiRandom, WasiRandomView};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiView};

/// Bytes of a unit's stderr kept per call. A Rust panic message is one
/// line; 16 KiB keeps a short backtrace or log too, and the rest of a chatty
/// unit's output is dropped (silently, so logging never makes a unit fail).
pub const STDERR_CAPTURE_BYTES: usize = 16 << 10;

/// Bytes a unit may ask `wasi:random` for in one call. Language runtimes ask
/// for a few dozen bytes to seed hash maps; wasmtime's default of 64 MiB
/// would let a unit make the host allocate that much.
pub const MAX_RANDOM_BYTES: u64 = 64 << 10;

/// What `wasi:clocks/wall-clock` always says: 2000-01-01T00:00:00Z.
pub const FROZEN_WALL_CLOCK_SECONDS: u64 = 946_684_800;

/// What `wasi:random` returns, cycled: fixed, so hash-map iteration order
/// (and so a unit's output) is the same on every call.
const RANDOM_SEED: [u8; 16] = *b"sandpiper-seed-1";

/// A bounded, shared stderr buffer: the unit writes into it through WASI,
/// the host reads it after the call.
#[derive(Clone, Default)]
pub(crate) struct StderrCapture {
    buffer: Arc<Mutex<Vec<u8>>>,
}

impl StderrCapture {
    /// What the unit wrote, lossily decoded.
    pub(crate) fn text(&self) -> String {
        let buffer = self
            .buffer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        String::from_utf8_lossy(&buffer).into_owned()
    }
}

impl IsTerminal for StderrCapture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrCapture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        // Only WASI 0.3 writes through this; we do not link 0.3.
        Box::new(tokio::io::sink())
    }
}

/// How many bytes the guest may write per `write` call. Small, so that the
/// host never allocates much on the guest's behalf.
const STDERR_WRITE_PERMIT: usize = 4096;

#[wasmtime_wasi::async_trait]
impl Pollable for StderrCapture {
    async fn ready(&mut self) {}
}

#[wasmtime_wasi::async_trait]
impl OutputStream for StderrCapture {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let mut buffer = self
            .buffer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let room = STDERR_CAPTURE_BYTES.saturating_sub(buffer.len());
        let kept = bytes.len().min(room);
        buffer.extend_from_slice(&bytes[..kept]);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(STDERR_WRITE_PERMIT)
    }
}

/// A wall clock stopped at [`FROZEN_WALL_CLOCK_SECONDS`].
struct FrozenWallClock;

impl HostWallClock for FrozenWallClock {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }

    fn now(&self) -> std::time::Duration {
        std::time::Duration::from_secs(FROZEN_WALL_CLOCK_SECONDS)
    }
}

/// A monotonic clock that never advances.
struct FrozenMonotonicClock;

impl HostMonotonicClock for FrozenMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        0
    }
}

/// The WASI context of one call.
pub(crate) fn context(stderr: &StderrCapture) -> WasiCtx {
    let mut builder = WasiCtxBuilder::new();
    builder
        .stderr(stderr.clone())
        .wall_clock(FrozenWallClock)
        .monotonic_clock(FrozenMonotonicClock)
        .secure_random(wasmtime_wasi::Deterministic::new(RANDOM_SEED.to_vec()))
        .insecure_random(wasmtime_wasi::Deterministic::new(RANDOM_SEED.to_vec()))
        .insecure_random_seed(u128::from_le_bytes(RANDOM_SEED))
        .max_random_size(MAX_RANDOM_BYTES);
    builder.build()
}

/// `wasi:clocks/monotonic-clock` with a clock that never moves and timers
/// that are due at once.
///
/// wasmtime-wasi's own implementation sleeps on the host's clock, so a unit
/// calling `sleep` would hold the host thread for as long as it asked, out
/// of reach of both fuel and epochs (neither runs while the host blocks).
/// Here a sleep returns immediately, and a unit that busy-waits on the clock
/// spins until its fuel runs out.
struct StoppedTime<'a> {
    table: &'a mut ResourceTable,
}

struct StoppedTimeData;

impl HasData for StoppedTimeData {
    type Data<'a> = StoppedTime<'a>;
}

/// A timer that is always due.
struct Due;

#[wasmtime_wasi::async_trait]
impl Pollable for Due {
    async fn ready(&mut self) {}
}

impl StoppedTime<'_> {
    fn due(&mut self) -> wasmtime::Result<Resource<DynPollable>> {
        let timer = self.table.push(Due)?;
        wasmtime_wasi::p2::subscribe(self.table, timer)
    }
}

impl clocks::monotonic_clock::Host for StoppedTime<'_> {
    fn now(&mut self) -> wasmtime::Result<clocks::monotonic_clock::Instant> {
        Ok(FrozenMonotonicClock.now())
    }

    fn resolution(&mut self) -> wasmtime::Result<clocks::monotonic_clock::Duration> {
        Ok(FrozenMonotonicClock.resolution())
    }

    fn subscribe_instant(
        &mut self,
        _when: clocks::monotonic_clock::Instant,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.due()
    }

    fn subscribe_duration(
        &mut self,
        _duration: clocks::monotonic_clock::Duration,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.due()
    }
}

/// Adds the WASI 0.2 interfaces units may import (see
/// `validate::ALLOWED_IMPORTS`) and nothing else: no sockets, no HTTP.
pub(crate) fn add_to_linker<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    fn table<T: WasiView>(state: &mut T) -> &mut ResourceTable {
        state.ctx().table
    }
    fn stopped_time<T: WasiView>(state: &mut T) -> StoppedTime<'_> {
        StoppedTime {
            table: state.ctx().table,
        }
    }
    fn random<T: WasiView>(state: &mut T) -> &mut wasmtime_wasi::random::WasiRandomCtx {
        state.random()
    }

    let l = linker;
    sync::io::error::add_to_linker::<T, HasSelf<ResourceTable>>(l, table::<T>)?;
    sync::io::poll::add_to_linker::<T, HasSelf<ResourceTable>>(l, table::<T>)?;
    sync::io::streams::add_to_linker::<T, HasSelf<ResourceTable>>(l, table::<T>)?;

    clocks::wall_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    clocks::monotonic_clock::add_to_linker::<T, StoppedTimeData>(l, stopped_time::<T>)?;

    random::random::add_to_linker::<T, WasiRandom>(l, random::<T>)?;
    random::insecure::add_to_linker::<T, WasiRandom>(l, random::<T>)?;
    random::insecure_seed::add_to_linker::<T, WasiRandom>(l, random::<T>)?;

    cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;

    sync::filesystem::types::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    filesystem::preopens::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    Ok(())
}
