//! Validated module upload: from uploaded bytes to a loaded unit.
//!
//! Compiling untrusted WebAssembly is not something wasmtime defends
//! against (a module can make Cranelift take minutes or gigabytes, and
//! wasmtime does not count that as a vulnerability), so uploads are
//! validated and compiled **in a child process** — the same binary, run as
//! the hidden `sandpiper compile-unit` — with a wall-clock timeout, a
//! memory rlimit and a lower CPU priority, while the server's own threads
//! keep answering. The child reads the `.wasm` on stdin and writes the
//! module's language on a first line and then the compiled artifact to
//! stdout ([`Compiled`]), or a typed rejection. The server then loads
//! the artifact in process; it is trusted because our own compile step
//! produced it.
//!
//! An upload's body is never held in memory: it is streamed into an
//! unlinked temporary file ([`Spooled`]), hashed and size-checked as it
//! arrives, and that file is the child's stdin and then, a chunk at a
//! time, the store's source (`Db::insert_module`). Compiles run a few at a
//! time in a [`CompileQueue`] that is fair between uploaders (one compile
//! per uploader at a time, a bounded number waiting), and a compile whose
//! request is dropped (its client went away) kills its child.
//!
//! Artifacts are stored keyed by (module sha256, engine compatibility
//! hash), so a wasmtime upgrade or a changed engine configuration
//! recompiles from the stored `.wasm` instead of loading stale code.

use std::collections::HashMap;
use std::io::{Read, Seek, Write};
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

use crate::pipeline::SpecError;
use crate::sandbox::{LoadError, Runtime};
use crate::store::{Store, StoreError};
use crate::unit::Unit;

/// Name of the hidden subcommand that compiles one module.
pub const COMPILE_SUBCOMMAND: &str = "compile-unit";

/// Niceness of the compile process: a compile must never delay a decision,
/// so it gets the CPU only when the server does not need it.
pub const COMPILE_NICENESS: i32 = 10;

/// Largest artifact the server accepts back from the child, as a multiple
/// of the module's size plus a floor. Measured: compiled code is about 2-3
/// times the `.wasm` (18 MB Python → 33 MB); 16 times bounds a confused
/// child without refusing any real unit.
pub const MAX_ARTIFACT_GROWTH: usize = 16;

/// Floor of the artifact bound, bytes: tiny modules still compile to a
/// few hundred kilobytes of code and metadata.
pub const MIN_ARTIFACT_BOUND_BYTES: usize = 64 * 1024 * 1024;

/// What an uploader refused by a full compile queue is told to wait,
/// seconds: a typical unit compiles in well under a second and a large
/// interpreter in under ten, so a slot is usually free again by then.
pub const COMPILE_QUEUE_RETRY_AFTER_SECS: u64 = 10;

/// Bytes gathered from the body before each write to the spool file: large
/// enough that a 64 MiB upload is a few dozen writes, not thousands of
/// small ones through the blocking pool.
const SPOOL_BUFFER_BYTES: usize = 1 << 20;

/// What the child answers for a module it compiled: the language its
/// producers sections tell (`crate::sandbox::language`, read here because
/// only the child holds the whole module) and the compiled code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    pub language: Option<String>,
    pub artifact: Vec<u8>,
}

/// Longest first line of a compile answer: a language name and its newline.
const MAX_LANGUAGE_LINE_BYTES: usize = 64;

impl Compiled {
    /// The child's stdout: the language line (empty when unknown), then the
    /// artifact.
    fn encode(&self) -> Vec<u8> {
        let language = self.language.as_deref().unwrap_or("");
        let mut out = Vec::with_capacity(language.len() + 1 + self.artifact.len());
        out.extend_from_slice(language.as_bytes());
        out.push(b'\n');
        out.extend_from_slice(&self.artifact);
        out
    }

    /// Reads what [`Compiled::encode`] wrote.
    fn decode(mut out: Vec<u8>) -> Result<Compiled, UploadError> {
        let newline = out
            .iter()
            .take(MAX_LANGUAGE_LINE_BYTES)
            .position(|&b| b == b'\n')
            .ok_or_else(|| {
                UploadError::Internal("the compiler's answer has no language line".to_owned())
            })?;
        let artifact = out.split_off(newline + 1);
        out.truncate(newline);
        let language = String::from_utf8(out).map_err(|_| {
            UploadError::Internal("the compiler's language line is not UTF-8".to_owned())
        })?;
        Ok(Compiled {
            language: (!language.is_empty()).then_some(language),
            artifact,
        })
    }
}

/// Exit code of the child when it refused the module (stdout then holds a
/// JSON [`Rejection`]), as opposed to crashing or running out of limits.
const REJECTED_EXIT_CODE: u8 = 3;

/// Limits of the compile step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompileLimits {
    pub timeout: Duration,
    pub memory_bytes: u64,
    pub max_module_bytes: usize,
    /// Compiles that run at once.
    pub slots: usize,
    /// Uploads that may wait for a slot, across all uploaders.
    pub queue: usize,
    /// Uploads one uploader may have compiling or waiting.
    pub per_uploader: usize,
}

/// Why a module was not accepted. `code` values are part of the API's
/// stable error codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{message}")]
pub struct Rejection {
    pub code: String,
    pub message: String,
}

/// The upload could not become a unit.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The module itself is unacceptable (the client's fault).
    #[error(transparent)]
    Rejected(Rejection),
    /// The compile step ran out of time.
    #[error("compiling the module took longer than {} s", .0.as_secs())]
    Timeout(Duration),
    /// The compile step died (memory limit, crash) without an answer.
    #[error("compiling the module failed: {0}")]
    CompileFailed(String),
    /// The compile step hit one of its resource limits (memory, CPU time).
    #[error(
        "compiling the module needed more than the compiler may use ({0}); \
         make the module smaller or simpler (fewer or smaller functions)"
    )]
    ResourceLimit(String),
    /// Too many uploads are compiling or waiting (for this uploader or in
    /// all).
    #[error("{message}")]
    QueueFull { message: String },
    /// The body is larger than the upload limit.
    #[error("the module is larger than the {limit_bytes}-byte upload limit")]
    TooLarge { limit_bytes: usize },
    /// Reading the request body failed (the client stalled or went away).
    #[error("reading the upload failed: {0}")]
    Body(axum::BoxError),
    /// Something on our side failed (spawning, pipes, the spool file).
    #[error("{0}")]
    Internal(String),
}

impl Rejection {
    fn new(code: &str, message: impl Into<String>) -> Self {
        Rejection {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

/// The sha256 of a module, hex: its identity in the store.
pub fn module_sha256(wasm: &[u8]) -> String {
    crate::sandbox::hex(&crate::sandbox::sha256(wasm))
}

/// The digest a hex sha256 (as stored) stands for.
pub fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

/// An uploaded module on disk: an unlinked temporary file (gone with the
/// last handle, even if the server dies), its size and its sha256.
#[derive(Debug)]
pub struct Spooled {
    file: std::fs::File,
    len: u64,
    sha256: String,
}

impl Spooled {
    /// Streams `body` into a temporary file, hashing it on the way and
    /// refusing it as soon as it passes `limit` bytes.
    pub async fn receive<B>(body: B, limit: usize) -> Result<Spooled, UploadError>
    where
        B: http_body::Body<Data = Bytes> + Unpin,
        B::Error: Into<axum::BoxError>,
    {
        use http_body_util::BodyExt;
        let internal = spool_error;
        let file = tempfile::tempfile().map_err(internal)?;
        let mut writer = tokio::io::BufWriter::with_capacity(
            SPOOL_BUFFER_BYTES,
            tokio::fs::File::from_std(file.try_clone().map_err(internal)?),
        );
        let mut hasher = sha2::Sha256::new();
        let mut len: u64 = 0;
        let mut body = body;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| UploadError::Body(e.into()))?;
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            len += data.len() as u64;
            if len > limit as u64 {
                return Err(UploadError::TooLarge { limit_bytes: limit });
            }
            hasher.update(&data);
            writer.write_all(&data).await.map_err(internal)?;
        }
        writer.flush().await.map_err(internal)?;
        Ok(Spooled {
            file,
            len,
            sha256: crate::sandbox::hex(&hasher.finalize()),
        })
    }

    /// An unlinked temporary file to copy a stored module into, and a
    /// handle to write it with; [`Spooled::verified`] then makes it a
    /// `Spooled` (recompiling stored modules after an engine change).
    pub fn scratch() -> Result<(std::fs::File, tokio::fs::File), UploadError> {
        let file = tempfile::tempfile().map_err(spool_error)?;
        let writer = tokio::fs::File::from_std(file.try_clone().map_err(spool_error)?);
        Ok((file, writer))
    }

    /// The module written to `file` (from [`Spooled::scratch`]), checked
    /// against the sha256 it was stored under: bytes that changed in the
    /// store are never compiled under another module's name.
    pub async fn verified(file: std::fs::File, sha256: &str) -> Result<Spooled, UploadError> {
        let expected = sha256.to_owned();
        tokio::task::spawn_blocking(move || {
            use std::os::unix::fs::FileExt;
            let mut hasher = sha2::Sha256::new();
            let mut buffer = vec![0; SPOOL_BUFFER_BYTES];
            let mut len: u64 = 0;
            loop {
                let n = file.read_at(&mut buffer, len)?;
                if n == 0 {
                    break;
                }
                hasher.update(&buffer[..n]);
                len += n as u64;
            }
            let sha256 = crate::sandbox::hex(&hasher.finalize());
            if sha256 != expected {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("the stored module {expected} has the sha256 {sha256}"),
                ));
            }
            Ok(Spooled { file, len, sha256 })
        })
        .await
        .map_err(|e| UploadError::Internal(format!("spool task failed: {e}")))?
        .map_err(spool_error)
    }

    /// The module's hex sha256.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The module's size, bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the module is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A reader of the module from its start, to store it a chunk at a
    /// time (never read back whole).
    pub fn reader(&self) -> Result<tokio::fs::File, UploadError> {
        Ok(tokio::fs::File::from_std(
            self.stdin().map_err(spool_error)?,
        ))
    }

    /// A handle on the file positioned at its start, for the child's stdin.
    fn stdin(&self) -> std::io::Result<std::fs::File> {
        let mut file = self.file.try_clone()?;
        file.rewind()?;
        Ok(file)
    }
}

fn spool_error(e: std::io::Error) -> UploadError {
    UploadError::Internal(format!("upload spool: {e}"))
}

/// Compiles running and waiting, fair between uploaders.
///
/// A compile needs a global slot (`slots` of them) and, for an upload, its
/// uploader's own single permit first: an uploader's second upload waits
/// on its own permit rather than in the global line, so the line holds at
/// most one upload per uploader and a slow (hostile) module cannot put
/// several ahead of anyone else's. Uploads are counted from reservation
/// (before their body is read) until they finish; past `per_uploader` for
/// one uploader or `slots + queue` in all, new ones are refused at once.
/// Waiting is cancel-safe: a request dropped while it waits leaves the line.
pub struct CompileQueue {
    slots: Arc<Semaphore>,
    capacity: usize,
    per_uploader: usize,
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    total: usize,
    by_uploader: HashMap<Uuid, (Arc<Semaphore>, usize)>,
}

/// An upload's place in the [`CompileQueue`], held from before its body is
/// read until it is done; dropping it gives the place back.
pub struct Ticket {
    queue: Arc<CompileQueue>,
    uploader: Uuid,
    own: Arc<Semaphore>,
}

impl CompileQueue {
    fn new(limits: &CompileLimits) -> Arc<CompileQueue> {
        Arc::new(CompileQueue {
            slots: Arc::new(Semaphore::new(limits.slots.max(1))),
            capacity: limits.slots.max(1).saturating_add(limits.queue),
            per_uploader: limits.per_uploader.max(1),
            pending: Mutex::new(Pending::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn reserve(self: &Arc<Self>, uploader: Uuid) -> Result<Ticket, UploadError> {
        let mut pending = self.lock();
        let mine = pending.by_uploader.get(&uploader).map_or(0, |(_, n)| *n);
        if mine >= self.per_uploader {
            return Err(UploadError::QueueFull {
                message: format!(
                    "this token already has {mine} uploads compiling or waiting; \
                     wait for them to finish"
                ),
            });
        }
        if pending.total >= self.capacity {
            return Err(UploadError::QueueFull {
                message: "too many uploads are compiling or waiting; try again later".to_owned(),
            });
        }
        pending.total += 1;
        let entry = pending
            .by_uploader
            .entry(uploader)
            .or_insert_with(|| (Arc::new(Semaphore::new(1)), 0));
        entry.1 += 1;
        Ok(Ticket {
            queue: Arc::clone(self),
            uploader,
            own: Arc::clone(&entry.0),
        })
    }

    /// A global slot, FIFO among those waiting.
    async fn slot(&self) -> Result<OwnedSemaphorePermit, UploadError> {
        Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|_| UploadError::Internal("compile queue closed".to_owned()))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut pending = self.queue.lock();
        pending.total = pending.total.saturating_sub(1);
        if let Some((_, n)) = pending.by_uploader.get_mut(&self.uploader) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                pending.by_uploader.remove(&self.uploader);
            }
        }
    }
}

/// Compiles modules in the child and loads the results.
pub struct Modules {
    runtime: Arc<Runtime>,
    limits: CompileLimits,
    queue: Arc<CompileQueue>,
    exe: std::path::PathBuf,
}

impl Modules {
    /// `exe` is the `sandpiper` binary to run as the compile child
    /// (normally `std::env::current_exe()`).
    pub fn new(runtime: Arc<Runtime>, limits: CompileLimits, exe: std::path::PathBuf) -> Self {
        Modules {
            runtime,
            queue: CompileQueue::new(&limits),
            limits,
            exe,
        }
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Identifies the engine configuration compiled code is valid for.
    pub fn engine_hash(&self) -> String {
        self.runtime.compatibility_hash()
    }

    /// Reserves a place in the compile queue for an upload by `uploader`
    /// (a token id), before its body is read; refused at once when the
    /// uploader or the queue has no room.
    pub fn reserve(&self, uploader: Uuid) -> Result<Ticket, UploadError> {
        self.queue.reserve(uploader)
    }

    /// Validates and compiles a stored module in the child process
    /// (startup recompiles after an engine change); waits for a slot like
    /// uploads.
    pub async fn compile(&self, wasm: &Spooled) -> Result<Vec<u8>, UploadError> {
        let _slot = self.queue.slot().await?;
        self.run_child(wasm).await.map(|compiled| compiled.artifact)
    }

    /// Validates and compiles an upload in the child process, once its
    /// uploader's turn and a slot come. Dropping the future (the client
    /// went away) leaves the queue or kills the child.
    pub async fn compile_upload(
        &self,
        ticket: &Ticket,
        wasm: &Spooled,
    ) -> Result<Compiled, UploadError> {
        let _own = Arc::clone(&ticket.own)
            .acquire_owned()
            .await
            .map_err(|_| UploadError::Internal("compile queue closed".to_owned()))?;
        let _slot = self.queue.slot().await?;
        self.run_child(wasm).await
    }

    /// Runs the compile child on `wasm`, under the timeout.
    async fn run_child(&self, wasm: &Spooled) -> Result<Compiled, UploadError> {
        let stdin = wasm
            .stdin()
            .map_err(|e| UploadError::Internal(format!("upload spool: {e}")))?;
        let mut child = tokio::process::Command::new(&self.exe)
            .arg(COMPILE_SUBCOMMAND)
            .arg("--memory-bytes")
            .arg(self.limits.memory_bytes.to_string())
            .arg("--cpu-seconds")
            .arg(cpu_seconds(self.limits.timeout).to_string())
            .arg("--max-module-bytes")
            .arg(self.limits.max_module_bytes.to_string())
            .arg("--max-memory-bytes")
            .arg(self.runtime.limits().memory_bytes.to_string())
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| UploadError::Internal(format!("could not start the compiler: {e}")))?;
        let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take())
        else {
            return Err(UploadError::Internal("compiler pipes missing".to_owned()));
        };
        let bound = usize::try_from(wasm.len())
            .unwrap_or(usize::MAX)
            .saturating_mul(MAX_ARTIFACT_GROWTH)
            .max(MIN_ARTIFACT_BOUND_BYTES);
        let exchange = async {
            let mut out = Vec::new();
            let mut err = Vec::new();
            let read_out = async {
                (&mut stdout)
                    .take(bound as u64 + 1)
                    .read_to_end(&mut out)
                    .await
            };
            let read_err = async {
                (&mut stderr)
                    .take(MAX_CHILD_STDERR_BYTES as u64)
                    .read_to_end(&mut err)
                    .await
            };
            let (out_result, err_result) = tokio::join!(read_out, read_err);
            out_result.map_err(|e| UploadError::Internal(format!("compiler stdout: {e}")))?;
            err_result.map_err(|e| UploadError::Internal(format!("compiler stderr: {e}")))?;
            let status = child
                .wait()
                .await
                .map_err(|e| UploadError::Internal(format!("compiler wait: {e}")))?;
            Ok::<_, UploadError>((status, out, err))
        };
        let (status, out, err) = match tokio::time::timeout(self.limits.timeout, exchange).await {
            Ok(result) => result?,
            // Dropping the future drops the child, which kills it.
            Err(_) => return Err(UploadError::Timeout(self.limits.timeout)),
        };
        if out.len() > bound {
            return Err(UploadError::CompileFailed(format!(
                "the compiled code exceeds {bound} bytes"
            )));
        }
        match status.code() {
            Some(0) => Compiled::decode(out),
            Some(code) if code == i32::from(REJECTED_EXIT_CODE) => {
                let rejection: Rejection = serde_json::from_slice(&out).map_err(|e| {
                    UploadError::Internal(format!("unreadable answer from the compiler: {e}"))
                })?;
                Err(UploadError::Rejected(rejection))
            }
            _ => Err(describe_failure(status, &err)),
        }
    }

    /// Loads compiled code as the unit of the module whose hex sha256 is
    /// `sha256`: instantiates it once to read its `info()`.
    ///
    /// `artifact` must come from [`Modules::compile`] or from the store,
    /// which holds only what `compile` (or the built-ins' in-process
    /// compile) produced; never from a request.
    pub async fn load(
        &self,
        sha256: &str,
        artifact: impl Into<Bytes>,
    ) -> Result<Arc<dyn Unit>, UploadError> {
        let artifact: Bytes = artifact.into();
        let digest = parse_sha256(sha256)
            .ok_or_else(|| UploadError::Internal(format!("`{sha256}` is not a sha256")))?;
        let runtime = Arc::clone(&self.runtime);
        let loaded = tokio::task::spawn_blocking(move || {
            // SAFETY: `artifact` is the unmodified output of
            // `Runtime::precompile`, run by our own compile step (the child
            // process or the built-ins' registration) and stored where only
            // this server writes (see the caller contract above); it is never
            // bytes a client sent.
            unsafe { runtime.load_precompiled(digest, &artifact) }
        })
        .await
        .map_err(|e| UploadError::Internal(format!("loading task failed: {e}")))?
        .map_err(|e| UploadError::Rejected(rejection_of(&e)))?;
        Ok(loaded)
    }

    /// The stored module `sha256` as a loaded unit: from the compiled code
    /// stored for this engine, else recompiled from the stored `.wasm`
    /// (after a wasmtime upgrade, or for a kept version whose code went
    /// with an older engine) through the same out-of-process compile step
    /// as an upload, and that code stored. Used at start for every
    /// uploaded unit and by a rollback for the version it restores.
    pub async fn load_stored(
        &self,
        store: &Store,
        sha256: &str,
    ) -> Result<Arc<dyn Unit>, StoredLoadError> {
        let engine_hash = self.engine_hash();
        let stored = {
            let mut conn = store.read().await?;
            conn.artifact(sha256, &engine_hash).await?
        };
        let artifact = match stored {
            Some(artifact) => artifact,
            None => {
                let wasm = stored_module(store, sha256).await?;
                tracing::info!(%sha256, "recompiling a stored module for this engine");
                let artifact = self.compile(&wasm).await?;
                let mut tx = store.write().await?;
                tx.insert_artifact(sha256, &engine_hash, &artifact).await?;
                tx.commit().await?;
                artifact
            }
        };
        Ok(self.load(sha256, artifact).await?)
    }

    /// Lets the runtime forget the compiled module with hex `sha256`
    /// (units already handed out keep working).
    pub fn unload(&self, sha256: &str) {
        if let Some(digest) = parse_sha256(sha256) {
            self.runtime.unload(&digest);
        }
    }
}

/// Why a stored module is not a loaded unit.
#[derive(Debug, thiserror::Error)]
pub enum StoredLoadError {
    /// The store could not be read or written (no connection, busy).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The module's bytes are gone, incomplete, or not what their sha256
    /// says.
    #[error("stored module {sha256} is unreadable: {message}")]
    Unreadable { sha256: String, message: String },
    /// The module no longer compiles or loads.
    #[error(transparent)]
    Module(#[from] UploadError),
}

/// The stored module `sha256` copied chunk by chunk into a temporary file
/// for the compile child, and checked against its sha256.
async fn stored_module(store: &Store, sha256: &str) -> Result<Spooled, StoredLoadError> {
    let unreadable = |message: String| StoredLoadError::Unreadable {
        sha256: sha256.to_owned(),
        message,
    };
    let (file, mut writer) = Spooled::scratch()?;
    let copied = {
        let mut conn = store.read().await?;
        conn.copy_module_to(sha256, &mut writer).await
    };
    match copied {
        Ok(Some(_)) => Spooled::verified(file, sha256)
            .await
            .map_err(|e| unreadable(e.to_string())),
        Ok(None) => Err(unreadable("missing from the store".to_owned())),
        Err(e) => Err(unreadable(e.to_string())),
    }
}

/// How much of the child's stderr is kept for the log: enough for a panic
/// message and a backtrace's first frames.
const MAX_CHILD_STDERR_BYTES: usize = 64 * 1024;

/// CPU seconds the child may use per second of the wall-clock timeout.
/// The CPU limit is a backstop for when the server is gone and nobody
/// enforces the timeout; compilation runs on every core, so CPU time runs
/// faster than the clock, and four cores' worth never cuts a compile the
/// timeout would have allowed on the machines we target.
pub const COMPILE_CPU_SECONDS_PER_SECOND: u64 = 4;

/// The child's CPU-time limit for a wall-clock `timeout`.
fn cpu_seconds(timeout: Duration) -> u64 {
    timeout
        .as_secs()
        .saturating_mul(COMPILE_CPU_SECONDS_PER_SECOND)
        .max(1)
}

/// What a child that died without an answer means. A signal is one of its
/// resource limits: SIGXCPU is the CPU-time limit; an allocation refused
/// under the memory limit aborts (SIGABRT) or faults (SIGSEGV); SIGKILL is
/// the kernel's last word on either.
fn describe_failure(status: std::process::ExitStatus, stderr: &[u8]) -> UploadError {
    use std::os::unix::process::ExitStatusExt;
    let text = String::from_utf8_lossy(stderr);
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    tracing::warn!(?status, stderr = %text, "module compile process failed");
    match status.signal() {
        Some(signal) if signal == rustix::process::Signal::XCPU.as_raw() => {
            UploadError::ResourceLimit("the CPU-time limit".to_owned())
        }
        Some(_) => UploadError::ResourceLimit("the memory limit".to_owned()),
        None if last.is_empty() => {
            UploadError::CompileFailed(format!("the compiler exited with {status}"))
        }
        None => UploadError::CompileFailed(format!("the compiler exited with {status}: {last}")),
    }
}

/// The stable code and message of a sandbox load error.
pub fn rejection_of(e: &LoadError) -> Rejection {
    Rejection::new(rejection_code(e), e.to_string())
}

/// The API's stable error code for each way a module is refused.
fn rejection_code(e: &LoadError) -> &'static str {
    match e {
        LoadError::TooLarge { .. } => "module_too_large",
        LoadError::Precompiled => "module_precompiled",
        LoadError::CoreModule => "module_is_core_module",
        LoadError::NotWasm => "module_not_wasm",
        LoadError::Invalid(_) | LoadError::Link(_) => "module_invalid",
        LoadError::CompilerLimit { .. } => "module_compiler_limit",
        LoadError::ForbiddenImport { .. } => "module_forbidden_import",
        // Two versions of sandpiper:policy in one component: its imports
        // and exports do not form one unit.
        LoadError::MissingMetadata { .. }
        | LoadError::NoRole { .. }
        | LoadError::MixedVersions { .. }
        | LoadError::WrongExportType { .. } => "module_exports",
        LoadError::Info(_) => "module_unit_failed",
        // A name declared twice made the info unusable before the check
        // was shared with the pipeline: the code stays.
        LoadError::InvalidInfo(_) | LoadError::Params(SpecError::DuplicateKey { .. }) => {
            "module_info_invalid"
        }
        LoadError::Params(_) => "unit_params_invalid",
        LoadError::Artifact(_) => "module_compile_failed",
    }
}

// ---- the child ----

/// Arguments of the hidden `compile-unit` subcommand.
#[derive(Clone, Debug, clap::Args)]
pub struct CompileArgs {
    /// Address-space-independent memory cap (RLIMIT_DATA), bytes.
    #[arg(long)]
    pub memory_bytes: u64,
    /// CPU time cap (RLIMIT_CPU), seconds.
    #[arg(long)]
    pub cpu_seconds: u64,
    /// Largest module read from stdin, bytes.
    #[arg(long)]
    pub max_module_bytes: usize,
    /// Linear memory a unit call may hold (the server's unit limit), bytes:
    /// a module whose memory starts larger can never run.
    #[arg(long)]
    pub max_memory_bytes: u64,
}

/// The child's main: limits itself, reads the module from stdin, validates
/// and compiles it with the server's engine configuration, and writes the
/// artifact (exit 0) or a JSON rejection (exit 3) to stdout.
pub fn compile_child(args: &CompileArgs) -> ExitCode {
    if let Err(e) = limit_self(args) {
        eprintln!("could not limit the compile process: {e}");
        return ExitCode::FAILURE;
    }
    let mut wasm = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(args.max_module_bytes as u64 + 1)
        .read_to_end(&mut wasm);
    if let Err(e) = read {
        eprintln!("could not read the module: {e}");
        return ExitCode::FAILURE;
    }
    let answer = if wasm.len() > args.max_module_bytes {
        Err(Rejection::new(
            "module_too_large",
            format!("the module is larger than {} bytes", args.max_module_bytes),
        ))
    } else if let Some(rejection) = memory_too_large(&wasm, args.max_memory_bytes) {
        Err(rejection)
    } else {
        // Default limits: they govern only the one `info()` call made while
        // validating; the server loads the result under its own limits.
        Runtime::new(crate::sandbox::Limits::default())
            .map_err(|e| Rejection::new("module_compile_failed", e.to_string()))
            .and_then(|runtime| runtime.precompile(&wasm).map_err(|e| rejection_of(&e)))
            .map(|artifact| Compiled {
                language: crate::sandbox::language::source_language(&wasm).map(str::to_owned),
                artifact,
            })
    };
    let mut stdout = std::io::stdout().lock();
    let (bytes, code) = match answer {
        Ok(compiled) => (compiled.encode(), ExitCode::SUCCESS),
        Err(rejection) => match serde_json::to_vec(&rejection) {
            Ok(json) => (json, ExitCode::from(REJECTED_EXIT_CODE)),
            Err(e) => {
                eprintln!("could not encode the rejection: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    if let Err(e) = stdout.write_all(&bytes).and_then(|()| stdout.flush()) {
        eprintln!("could not write the answer: {e}");
        return ExitCode::FAILURE;
    }
    code
}

/// Refuses a module with a linear memory whose *initial* size is over
/// `max_bytes`, before compiling: it could never be instantiated under the
/// unit memory limit, and wasmtime would otherwise refuse it later in its
/// own terms (a minimum "exceeds memory limits" in pages). Modules nested
/// in the component are checked too; unparsable input is left to the
/// validator, which explains it better.
fn memory_too_large(wasm: &[u8], max_bytes: u64) -> Option<Rejection> {
    const MIB: u64 = 1024 * 1024;
    let mut largest: u64 = 0;
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        let Ok(wasmparser::Payload::MemorySection(memories)) = payload else {
            continue;
        };
        for memory in memories.into_iter().flatten() {
            let page_bytes = 1u64 << memory.page_size_log2.unwrap_or(16);
            largest = largest.max(memory.initial.saturating_mul(page_bytes));
        }
    }
    (largest > max_bytes).then(|| {
        Rejection::new(
            "module_memory_too_large",
            format!(
                "the module's linear memory starts at {} MiB, but a unit may use at most {} MiB \
                 (the server's --unit-memory-mib); build it with a smaller initial memory \
                 (for Rust, the linker's --initial-memory)",
                largest.div_ceil(MIB),
                max_bytes / MIB
            ),
        )
    })
}

/// Caps the child's memory and CPU time and lowers its priority. Memory is
/// capped with RLIMIT_DATA (heap and writable private mappings), not
/// RLIMIT_AS, because wasmtime reserves large address ranges it never
/// touches; what a compile can actually consume is what RLIMIT_DATA counts.
fn limit_self(args: &CompileArgs) -> rustix::io::Result<()> {
    use rustix::process::{Resource, Rlimit, setpriority_process, setrlimit};
    setrlimit(
        Resource::Data,
        Rlimit {
            current: Some(args.memory_bytes),
            maximum: Some(args.memory_bytes),
        },
    )?;
    setrlimit(
        Resource::Cpu,
        Rlimit {
            current: Some(args.cpu_seconds),
            maximum: Some(args.cpu_seconds),
        },
    )?;
    setpriority_process(None, COMPILE_NICENESS)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sha256_is_hex_and_parses_back() {
        let hex = module_sha256(b"");
        assert_eq!(
            hex,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(parse_sha256(&hex), Some(crate::sandbox::sha256(b"")));
        assert_eq!(parse_sha256("xyz"), None);
    }

    #[test]
    fn every_rejection_code_is_an_api_error_code() {
        let samples = [
            LoadError::TooLarge { bytes: 1 },
            LoadError::Precompiled,
            LoadError::CoreModule,
            LoadError::NotWasm,
            LoadError::Invalid(String::new()),
            LoadError::CompilerLimit {
                limit: crate::sandbox::ModuleLimit::Functions,
                found: 0,
                function: None,
            },
            LoadError::ForbiddenImport {
                import: String::new(),
            },
            LoadError::NoRole {
                exports: Vec::new(),
            },
            LoadError::InvalidInfo(String::new()),
            LoadError::Params(SpecError::DuplicateKey {
                unit: String::new(),
                key: String::new(),
            }),
            LoadError::Params(SpecError::BadDefault {
                unit: String::new(),
                key: String::new(),
                value: String::new(),
                pattern: String::new(),
            }),
            LoadError::Artifact(String::new()),
        ];
        for e in samples {
            let code = rejection_code(&e);
            assert!(
                crate::api::error::ERROR_CODES.contains(&code),
                "{code} is not listed"
            );
        }
    }
}

#[cfg(test)]
mod compiled_tests {
    use super::*;

    #[test]
    fn a_compile_answer_reads_back() {
        for language in [Some("python".to_owned()), None] {
            let compiled = Compiled {
                language,
                artifact: b"\x7fELF\nwith a newline".to_vec(),
            };
            assert_eq!(
                Compiled::decode(compiled.encode()).expect("reads"),
                compiled
            );
        }
        assert!(
            Compiled::decode(vec![b'x'; 100]).is_err(),
            "no language line"
        );
    }
}
