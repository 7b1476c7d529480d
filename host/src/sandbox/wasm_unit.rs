//! A loaded unit and its calls: each call builds a fresh `Store` and
//! instance with the unit's limits, runs one export and drops everything,
//! so nothing a unit does survives into the next call.

use std::sync::Arc;
use std::time::Instant;

use sandpiper_model::Inventory;
use sandpiper_model::{BalanceRequest, Migration, Rejection, Request, Scores, UnitInfo};
use wasmtime::component::{Instance, InstancePre};
use wasmtime::{Engine, Store};

use super::bindings::{Guests, PolicyVersion};
use super::call_state::{CallState, InventoryImport};
use super::engine::{EpochTicker, Running, deadline_ticks};
use super::failure::{Evidence, Phase, classify, thread_cpu_time};
use super::limits::{Limits, LimitsError};
use super::output::{self, MAX_TRANSFER_BYTES};
use crate::unit::{CallResult, Called, Exports, Failed, Role, Unit, UnitError, Usage};

/// The process-wide parts every unit needs to run: the engine and the
/// ticker driving its epochs. Units keep it alive, so their deadlines hold
/// even if the `Runtime` that loaded them is gone.
pub(crate) struct Shared {
    pub(crate) engine: Engine,
    pub(crate) ticker: EpochTicker,
}

/// A compiled, validated unit: shared by every `WasmUnit` made from the same
/// bytes, whatever their limits.
pub(crate) struct Compiled {
    pub(crate) shared: Arc<Shared>,
    pub(crate) sha256: [u8; 32],
    pub(crate) pre: InstancePre<CallState>,
    /// The unit's exports in the version of the WIT it was built against,
    /// which every call goes through.
    pub(crate) guests: Box<dyn Guests>,
    pub(crate) info: UnitInfo,
}

/// A unit running sandboxed in WebAssembly.
pub struct WasmUnit {
    compiled: Arc<Compiled>,
    limits: Limits,
}

impl std::fmt::Debug for WasmUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmUnit")
            .field("name", &self.compiled.info.name)
            .field("sha256", &super::hex(&self.compiled.sha256))
            .field("limits", &self.limits)
            .finish()
    }
}

impl WasmUnit {
    pub(crate) fn new(compiled: Arc<Compiled>, limits: Limits) -> Self {
        WasmUnit { compiled, limits }
    }

    /// The sha256 of the component's bytes: its identity.
    pub fn sha256(&self) -> [u8; 32] {
        self.compiled.sha256
    }

    /// The version of `sandpiper:policy` the unit was built against.
    pub fn policy_version(&self) -> PolicyVersion {
        self.compiled.guests.version()
    }

    /// The limits each call of this unit runs under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The same unit (same compiled code) with other limits, e.g. a larger
    /// fuel budget for an interpreted unit.
    pub fn with_limits(&self, limits: Limits) -> Result<WasmUnit, LimitsError> {
        limits.validate()?;
        Ok(WasmUnit {
            compiled: Arc::clone(&self.compiled),
            limits,
        })
    }

    /// Creates an instance over `inventory` under this unit's limits and
    /// drops it, calling nothing: what every call costs before the unit's
    /// own work, for benchmarks and for a smoke test of a new unit.
    pub fn probe(&self, inventory: &Arc<Inventory>) -> Result<Usage, Failed> {
        blocking(|| {
            let session = Session::open(
                &self.compiled.shared,
                &self.compiled.pre,
                &self.limits,
                inventory,
            )?;
            Ok(session.usage())
        })
    }

    /// Runs `body` against a fresh instance over `inventory` under this
    /// unit's limits, and classifies any failure.
    fn call<R>(
        &self,
        inventory: &Arc<Inventory>,
        body: impl FnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<R>,
    ) -> CallResult<R> {
        call(&self.compiled, &self.limits, inventory, body)
    }
}

/// One call's store and instance, with what is needed to classify a failure.
pub(crate) struct Session {
    pub(crate) store: Store<CallState>,
    pub(crate) instance: Instance,
    fuel_budget: u64,
    deadline: std::time::Duration,
    started: Instant,
    /// The thread's CPU time when the call started.
    cpu_started: std::time::Duration,
    /// Keeps the epoch advancing, so the deadline holds.
    _running: Running,
}

impl Session {
    /// A fresh store with `limits` applied, and `pre` instantiated in it.
    pub(crate) fn open(
        shared: &Shared,
        pre: &InstancePre<CallState>,
        limits: &Limits,
        inventory: &Arc<Inventory>,
    ) -> Result<Session, Failed> {
        let running = shared.ticker.running();
        let started = Instant::now();
        let cpu_started = thread_cpu_time();
        let hosts = inventory.host_count();
        let fuel_budget = limits.fuel_budget(hosts);
        let deadline = limits.deadline(hosts);
        let state = CallState::new(
            InventoryImport::new(Arc::clone(inventory)),
            limits.memory_bytes,
        );
        let mut store = Store::new(&shared.engine, state);
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(deadline_ticks(deadline));
        store.epoch_deadline_trap();
        store.set_hostcall_fuel(MAX_TRANSFER_BYTES);
        let instantiated = store
            .set_fuel(fuel_budget)
            .and_then(|()| pre.instantiate(&mut store));
        let instance = match instantiated {
            Ok(instance) => instance,
            Err(error) => {
                let evidence = Evidence {
                    phase: Phase::Instantiate,
                    fuel_budget,
                    deadline,
                    refusal: store.data().limiter.refusal(),
                    stderr: &store.data().stderr.text(),
                    cpu: thread_cpu_time().saturating_sub(cpu_started),
                    elapsed: started.elapsed(),
                };
                return Err(Failed {
                    error: classify(&error, &evidence),
                    usage: usage(&store, fuel_budget, started),
                });
            }
        };
        Ok(Session {
            store,
            instance,
            fuel_budget,
            deadline,
            started,
            cpu_started,
            _running: running,
        })
    }

    /// The failure `error` stands for, with what the call cost.
    pub(crate) fn fail(&self, error: &wasmtime::Error) -> Failed {
        let evidence = Evidence {
            phase: Phase::Call,
            fuel_budget: self.fuel_budget,
            deadline: self.deadline,
            refusal: self.store.data().limiter.refusal(),
            stderr: &self.store.data().stderr.text(),
            cpu: thread_cpu_time().saturating_sub(self.cpu_started),
            elapsed: self.started.elapsed(),
        };
        Failed {
            error: classify(error, &evidence),
            usage: self.usage(),
        }
    }

    /// What the call cost so far.
    pub(crate) fn usage(&self) -> Usage {
        usage(&self.store, self.fuel_budget, self.started)
    }
}

/// Runs `body` against a fresh instance of `compiled`; see [`WasmUnit::call`].
pub(crate) fn call<R>(
    compiled: &Compiled,
    limits: &Limits,
    inventory: &Arc<Inventory>,
    body: impl FnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<R>,
) -> CallResult<R> {
    blocking(|| {
        let mut session = Session::open(&compiled.shared, &compiled.pre, limits, inventory)?;
        let instance = session.instance;
        match body(&mut session.store, &instance) {
            Ok(value) => Ok(Called {
                value,
                usage: session.usage(),
                read: session.store.data().inventory.read,
            }),
            Err(error) => Err(session.fail(&error)),
        }
    })
}

/// Runs `f`, which blocks its thread while the unit runs.
///
/// wasmtime-wasi implements WASI's blocking calls (a unit writing its panic
/// message, say) with tokio's `block_on`, which panics on a thread that is
/// running async tasks. On a worker of a multi-threaded runtime,
/// `block_in_place` first hands that worker's other tasks to another thread;
/// anywhere else (a plain thread, tokio's blocking pool) `f` simply runs.
/// A current-thread runtime cannot lend its only thread: call units from
/// `spawn_blocking` there.
pub(crate) fn blocking<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// What a call cost so far.
fn usage(store: &Store<CallState>, fuel_budget: u64, started: Instant) -> Usage {
    Usage {
        fuel: Some(fuel_budget.saturating_sub(store.get_fuel().unwrap_or(0))),
        elapsed: started.elapsed(),
    }
}

/// Applies an output check to a successful call.
fn checked<T>(
    result: CallResult<T>,
    check: impl FnOnce(&T) -> Result<(), String>,
) -> CallResult<T> {
    let called = result?;
    match check(&called.value) {
        Ok(()) => Ok(called),
        Err(reason) => Err(Failed {
            error: UnitError::InvalidOutput(reason),
            usage: called.usage,
        }),
    }
}

/// A role's call, which the unit was checked to export before calling.
fn exported<T>(call: Option<wasmtime::Result<T>>) -> wasmtime::Result<T> {
    call.unwrap_or_else(|| Err(wasmtime::Error::msg("the role is not exported")))
}

fn not_exported<T>(role: Role) -> CallResult<T> {
    Err(Failed {
        error: UnitError::NotExported(role),
        usage: Usage::default(),
    })
}

impl Unit for WasmUnit {
    fn info(&self) -> &UnitInfo {
        &self.compiled.info
    }

    fn exports(&self) -> Exports {
        self.compiled.guests.exports()
    }

    fn filter(
        &self,
        inventory: &Arc<Inventory>,
        request: &Request,
        candidates: &[u32],
    ) -> CallResult<Vec<Rejection>> {
        let guests = &self.compiled.guests;
        if !guests.exports().filter {
            return not_exported(Role::Filter);
        }
        let request = guests.lower(request);
        let result = self.call(inventory, |store, instance| {
            exported(guests.filter(store, instance, &request, candidates))
        });
        checked(result, |r| output::check_rejections(r, candidates.len()))
    }

    fn score(
        &self,
        inventory: &Arc<Inventory>,
        request: &Request,
        candidates: &[u32],
    ) -> CallResult<Scores> {
        let guests = &self.compiled.guests;
        if !guests.exports().score {
            return not_exported(Role::Score);
        }
        let request = guests.lower(request);
        let result = self.call(inventory, |store, instance| {
            exported(guests.score(store, instance, &request, candidates))
        });
        checked(result, |s| output::check_scores(s, candidates.len()))
    }

    fn balance(
        &self,
        inventory: &Arc<Inventory>,
        request: &BalanceRequest,
    ) -> CallResult<Option<Migration>> {
        let guests = &self.compiled.guests;
        if !guests.exports().balance {
            return not_exported(Role::Balance);
        }
        let candidates = request.candidates.len();
        let result = self.call(inventory, |store, instance| {
            exported(guests.balance(store, instance, request))
        });
        checked(result, |m| output::check_migration(m, candidates))
    }
}

#[cfg(test)]
mod tests {
    use sandpiper_model::{HostMetric, KeyValue};

    use super::*;
    use crate::sandbox::Runtime;

    /// Twenty hosts, half of which lack the memory a 4 GiB VM needs, so a
    /// filter rejects some and a score unit has figures to weigh.
    fn cluster() -> Arc<Inventory> {
        let mut inventory = Inventory::new(20, 0);
        let columns: [(HostMetric, Vec<f64>); 4] = [
            (HostMetric::MemoryTotalMib, vec![65536.0; 20]),
            (
                HostMetric::MemoryFreeMib,
                (0..20).map(|i| f64::from(i % 2) * 8192.0).collect(),
            ),
            (HostMetric::CpuCores, vec![16.0; 20]),
            (
                HostMetric::CpuUsagePercent,
                (0..20).map(|i| f64::from(i * 5)).collect(),
            ),
        ];
        for (metric, values) in columns {
            inventory
                .set_host_metric(metric, values)
                .expect("a column per host");
        }
        Arc::new(inventory)
    }

    /// The built-in units, and the SDK's rejection builder in every
    /// filter, make no WASI call in an ordinary call, so the call never
    /// builds its WASI (`CallState::ctx`): each role of each unit, over a
    /// cluster where filters reject and scores differ.
    #[test]
    fn built_in_units_call_without_building_wasi() {
        let runtime = Runtime::new(Limits::default()).expect("the runtime starts");
        let inventory = cluster();
        let candidates: Vec<u32> = (0..20).collect();
        for builtin in crate::builtin::UNITS {
            let unit = runtime.load(builtin.wasm).expect("the built-in unit loads");
            let params: Vec<KeyValue> = (unit.info().params.iter())
                .map(|p| KeyValue::new(p.name.clone(), p.default_value.clone()))
                .collect();
            let mut request = Request {
                params: params.clone(),
                ..Request::default()
            };
            request.vm.memory_mib = 4096.0;
            request.vm.vcpus = 2;
            let balance = BalanceRequest {
                params,
                candidates: candidates.clone(),
            };
            let guests = &unit.compiled.guests;
            let lowered = guests.lower(&request);
            let exports = guests.exports();
            let roles = [
                (exports.filter, Role::Filter),
                (exports.score, Role::Score),
                (exports.balance, Role::Balance),
            ];
            for (_, role) in roles.into_iter().filter(|(exported, _)| *exported) {
                let built = unit.call(&inventory, |store, instance| {
                    match role {
                        Role::Filter => {
                            exported(guests.filter(store, instance, &lowered, &candidates))?;
                        }
                        Role::Score => {
                            exported(guests.score(store, instance, &lowered, &candidates))?;
                        }
                        Role::Balance => {
                            exported(guests.balance(store, instance, &balance))?;
                        }
                    }
                    Ok(store.data().wasi_built())
                });
                let name = &unit.info().name;
                let built =
                    built.unwrap_or_else(|failed| panic!("{name} {role:?}: {}", failed.error));
                assert!(!built.value, "{name} {role:?} built its WASI");
            }
        }
    }
}
