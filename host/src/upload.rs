//! Validated module upload: from uploaded bytes to a loaded unit.
//!
//! Compiling untrusted WebAssembly is not something wasmtime defends
//! against (a module can make Cranelift take minutes or gigabytes, and
//! wasmtime does not count that as a vulnerability), so uploads are
//! validated and compiled **in a child process** — the same binary, run as
//! the hidden `sandpiper compile-unit` — with a wall-clock timeout, a
//! memory rlimit and a lower CPU priority, while the server's own threads
//! keep answering. The child reads the `.wasm` on stdin and writes the
//! compiled artifact to stdout, or a typed rejection. The server then loads
//! the artifact in process; it is trusted because our own compile step
//! produced it.
//!
//! Artifacts are stored keyed by (module sha256, engine compatibility
//! hash), so a wasmtime upgrade or a changed engine configuration
//! recompiles from the stored `.wasm` instead of loading stale code.

use std::io::{Read, Write};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

use crate::pipeline::SpecError;
use crate::sandbox::{LoadError, Runtime};
use crate::unit::Unit;

/// Name of the hidden subcommand that compiles one module.
pub const COMPILE_SUBCOMMAND: &str = "compile-unit";

/// Compiles at a time. Cranelift already compiles one module on every core;
/// running two would only make both slower and starve decisions of CPU.
pub const MAX_CONCURRENT_COMPILES: usize = 1;

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

/// Exit code of the child when it refused the module (stdout then holds a
/// JSON [`Rejection`]), as opposed to crashing or running out of limits.
const REJECTED_EXIT_CODE: u8 = 3;

/// Limits of the compile step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompileLimits {
    pub timeout: Duration,
    pub memory_bytes: u64,
    pub max_module_bytes: usize,
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
    /// Something on our side failed (spawning, pipes).
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

/// Compiles modules in the child and loads the results.
pub struct Modules {
    runtime: Arc<Runtime>,
    limits: CompileLimits,
    permits: Semaphore,
    exe: std::path::PathBuf,
}

impl Modules {
    /// `exe` is the `sandpiper` binary to run as the compile child
    /// (normally `std::env::current_exe()`).
    pub fn new(runtime: Arc<Runtime>, limits: CompileLimits, exe: std::path::PathBuf) -> Self {
        Modules {
            runtime,
            limits,
            permits: Semaphore::new(MAX_CONCURRENT_COMPILES),
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

    /// Validates and compiles `wasm` in the child process.
    pub async fn compile(&self, wasm: &[u8]) -> Result<Vec<u8>, UploadError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| UploadError::Internal("compile queue closed".to_owned()))?;
        let mut child = tokio::process::Command::new(&self.exe)
            .arg(COMPILE_SUBCOMMAND)
            .arg("--memory-bytes")
            .arg(self.limits.memory_bytes.to_string())
            .arg("--cpu-seconds")
            .arg(cpu_seconds(self.limits.timeout).to_string())
            .arg("--max-module-bytes")
            .arg(self.limits.max_module_bytes.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| UploadError::Internal(format!("could not start the compiler: {e}")))?;
        let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(UploadError::Internal("compiler pipes missing".to_owned()));
        };
        let bound = wasm
            .len()
            .saturating_mul(MAX_ARTIFACT_GROWTH)
            .max(MIN_ARTIFACT_BOUND_BYTES);
        let exchange = async {
            // Write and read at once: a child that answers before reading
            // everything must not deadlock us on a full pipe.
            let write = async {
                // The child may exit early (a rejection); a broken pipe is
                // then expected and its answer says why.
                let _ = stdin.write_all(wasm).await;
                drop(stdin);
            };
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
            let ((), out_result, err_result) = tokio::join!(write, read_out, read_err);
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
            Some(0) => Ok(out),
            Some(code) if code == i32::from(REJECTED_EXIT_CODE) => {
                let rejection: Rejection = serde_json::from_slice(&out).map_err(|e| {
                    UploadError::Internal(format!("unreadable answer from the compiler: {e}"))
                })?;
                Err(UploadError::Rejected(rejection))
            }
            _ => Err(UploadError::CompileFailed(describe_failure(status, &err))),
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
        artifact: Vec<u8>,
    ) -> Result<Arc<dyn Unit>, UploadError> {
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

    /// Lets the runtime forget the compiled module with hex `sha256`
    /// (units already handed out keep working).
    pub fn unload(&self, sha256: &str) {
        if let Some(digest) = parse_sha256(sha256) {
            self.runtime.unload(&digest);
        }
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

fn describe_failure(status: std::process::ExitStatus, stderr: &[u8]) -> String {
    use std::os::unix::process::ExitStatusExt;
    let text = String::from_utf8_lossy(stderr);
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    tracing::warn!(?status, stderr = %text, "module compile process failed");
    match status.signal() {
        // SIGKILL/SIGXCPU: the CPU limit; SIGSEGV/SIGABRT after a failed
        // allocation: the memory limit.
        Some(signal) => format!("the compiler was stopped by signal {signal} (a resource limit)"),
        None if last.is_empty() => format!("the compiler exited with {status}"),
        None => format!("the compiler exited with {status}: {last}"),
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
        LoadError::ForbiddenImport { .. } => "module_forbidden_import",
        LoadError::MissingMetadata { .. }
        | LoadError::NoRole { .. }
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
            "module_invalid",
            format!("the module is larger than {} bytes", args.max_module_bytes),
        ))
    } else {
        // Default limits: they govern only the one `info()` call made while
        // validating; the server loads the result under its own limits.
        Runtime::new(crate::sandbox::Limits::default())
            .map_err(|e| Rejection::new("module_compile_failed", e.to_string()))
            .and_then(|runtime| runtime.precompile(&wasm).map_err(|e| rejection_of(&e)))
    };
    let mut stdout = std::io::stdout().lock();
    let (bytes, code) = match answer {
        Ok(artifact) => (artifact, ExitCode::SUCCESS),
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
