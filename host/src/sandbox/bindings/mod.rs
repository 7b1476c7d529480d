//! The host side of the WIT contract, every version side by side: one
//! `bindgen!` per version of `sandpiper:policy` (`v0_1` and `v0_2` over
//! the frozen `wit/0.1.0/` and `wit/0.2.0/`, `v0_3` over the current
//! `wit/`), every inventory served from the call's snapshot, and each
//! version's conversions to and from `sandpiper_model`, which holds
//! everything every version can say.
//!
//! Why one module per version and not one `bindgen!` over a host world
//! including both (as Spin does): each version's generated types stay in a
//! module named for it, so a 0.1.0 type can never be passed where a 0.2.0
//! one is meant, and freezing a version is leaving its module alone. What
//! the versions share is written once, here, as macros each version module
//! expands over its own generated types: the conversions of the types
//! whose shape did not change ([`shared_conversions!`]), the inventory
//! functions both have ([`shared_inventory!`]) and the calls into a
//! unit's exports ([`guest_calls!`]); what 0.2.0 added and 0.3.0 kept is
//! in `since_v0_2`. What differs (the new cases of an enum, the string
//! tables, columns of codes) is written in the version's own module.

use sandpiper_model::{BalanceRequest, Migration, Rejection, Request, Scores, UnitInfo};
use wasmtime::Store;
use wasmtime::component::{
    ComponentExportIndex, ComponentNamedList, Func, Instance, InstancePre, Lift, Lower, TypedFunc,
};

use super::call_state::CallState;
use crate::unit::Exports;

pub(crate) mod columns;
mod since_v0_2;
pub(crate) mod v0_1;
pub(crate) mod v0_2;
pub(crate) mod v0_3;

/// A version of `sandpiper:policy` the host serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum PolicyVersion {
    /// `0.1.x`: the first contract, frozen in `wit/0.1.0/`.
    #[serde(rename = "0.1")]
    V0_1,
    /// `0.2.x`: hardware data, `applies-to`, reasons with figures, string
    /// tables as one text (frozen in `wit/0.2.0/`).
    #[serde(rename = "0.2")]
    V0_2,
    /// `0.3.x`: enum columns as codes, device pools a column at a time,
    /// set-like columns without values, `applies-to` by parameter
    /// (`wit/policy.wit`).
    #[serde(rename = "0.3")]
    V0_3,
}

impl PolicyVersion {
    /// Every version served, oldest first.
    pub const ALL: [PolicyVersion; 3] = [
        PolicyVersion::V0_1,
        PolicyVersion::V0_2,
        PolicyVersion::V0_3,
    ];

    /// The version a `sandpiper:policy` name's `@version` belongs to:
    /// `0.1.x`, `0.2.x` or `0.3.x` (semver-compatible with what the host
    /// implements), `None` for any other.
    pub fn of(version: &str) -> Option<PolicyVersion> {
        PolicyVersion::ALL.into_iter().find(|served| {
            let package = served.package_version();
            let minor = &package[..package.len() - 1];
            version.starts_with(minor)
        })
    }

    /// The version the host implements, as written in the WIT package.
    pub fn package_version(self) -> &'static str {
        match self {
            PolicyVersion::V0_1 => "0.1.0",
            PolicyVersion::V0_2 => "0.2.0",
            PolicyVersion::V0_3 => "0.3.0",
        }
    }
}

impl std::fmt::Display for PolicyVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sandpiper:policy@{}", self.package_version())
    }
}

/// A count as the WIT's `u32`. Snapshots are far smaller than 4 billion
/// rows; saturating keeps an impossible one from wrapping.
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A yes/no column as the WIT sends it: one byte per row, 1 or 0 (a
/// `list<u8>` crosses in one copy, a `list<bool>` value by value).
fn flag_bytes(column: &[bool]) -> Vec<u8> {
    column.iter().map(|&flag| u8::from(flag)).collect()
}

/// The statuses as a list of the version's enum (0.1.0, 0.2.0).
fn status_cases<T: From<sandpiper_model::HostStatus>>(
    column: &[sandpiper_model::HostStatus],
) -> Vec<T> {
    column.iter().map(|&status| status.into()).collect()
}

/// The statuses as codes (0.3.0): a `list<u8>` crosses in one copy, a
/// list of an enum value by value.
fn status_codes(column: &[sandpiper_model::HostStatus]) -> Vec<u8> {
    column.iter().map(|status| status.code()).collect()
}

/// The calls into a unit's exports, whatever its version: the pipeline's
/// side of the dispatch by version. Each version module implements it
/// with [`guest_calls!`]; a role the unit does not export answers `None`.
pub(crate) trait Guests: Send + Sync {
    fn version(&self) -> PolicyVersion;
    fn exports(&self) -> Exports;
    /// Type-checks every export the unit has against the version's WIT,
    /// naming (as `ns:pkg/interface@version`) the first that does not match.
    fn check_types(
        &self,
        store: &mut Store<CallState>,
        instance: &Instance,
    ) -> Result<(), (String, wasmtime::Error)>;
    /// `metadata.info`, converted to the model; call after `check_types`.
    fn info(&self, store: &mut Store<CallState>, instance: &Instance)
    -> wasmtime::Result<UnitInfo>;
    /// Lowers the request once, before the call's clock starts.
    fn lower(&self, request: &Request) -> Lowered;
    fn filter(
        &self,
        store: &mut Store<CallState>,
        instance: &Instance,
        request: &Lowered,
        candidates: &[u32],
    ) -> Option<wasmtime::Result<Vec<Rejection>>>;
    fn score(
        &self,
        store: &mut Store<CallState>,
        instance: &Instance,
        request: &Lowered,
        candidates: &[u32],
    ) -> Option<wasmtime::Result<Scores>>;
    fn balance(
        &self,
        store: &mut Store<CallState>,
        instance: &Instance,
        request: &BalanceRequest,
    ) -> Option<wasmtime::Result<Option<Migration>>>;
}

/// One role a unit exports (`filter`, `score` or `balance`): its function,
/// found by index once, type-checked once when the unit is loaded
/// ([`Role::check`]) and called without checking after that
/// ([`Role::typed`]).
///
/// Why not the generated `GuestIndices::load` per call: it type-checks the
/// export on every call, walking the whole `request` record (0.2.0's
/// carries the hardware) and comparing its field names. That was 3 % of a
/// decision's samples outside the units' own code, and about a fifth of
/// what a unit with nothing to do cost inside a decision
/// (docs/performance.md, "Calls without a type check per call").
pub(crate) struct Role {
    function: ComponentExportIndex,
}

impl Role {
    /// Function `name` of the exported instance `interface`
    /// (`sandpiper:policy/filter@0.2.0`), when the component exports both.
    fn find(pre: &InstancePre<CallState>, interface: &str, name: &str) -> Option<Role> {
        let component = pre.component();
        let exported = component.get_export_index(None, interface)?;
        let function = component.get_export_index(Some(&exported), name)?;
        Some(Role { function })
    }

    /// Checks that the role's function in `instance` has the type `Params
    /// -> Return`: what makes [`Role::typed`] sound for every later
    /// instance of the same component.
    fn check<Params, Return>(
        &self,
        store: &mut Store<CallState>,
        instance: &Instance,
    ) -> wasmtime::Result<()>
    where
        Params: ComponentNamedList + Lower,
        Return: ComponentNamedList + Lift,
    {
        let function = self.function(store, instance)?;
        function.typed::<Params, Return>(&*store)?;
        Ok(())
    }

    /// The role's function in `instance`, typed as `Params -> Return`
    /// without checking again.
    ///
    /// # Safety
    ///
    /// [`Role::check`] with the same `Params` and `Return` must have passed
    /// for an instance of the same component. A component's export types
    /// are the component's, the same in every instance of it, so what
    /// passed then holds now; a wrong type would have wasmtime read the
    /// unit's memory in the wrong layout.
    unsafe fn typed<Params, Return>(
        &self,
        store: &mut Store<CallState>,
        instance: &Instance,
    ) -> wasmtime::Result<TypedFunc<Params, Return>>
    where
        Params: ComponentNamedList + Lower,
        Return: ComponentNamedList + Lift,
    {
        let function = self.function(store, instance)?;
        // SAFETY: the caller guarantees `check` passed for these types.
        Ok(unsafe { TypedFunc::new_unchecked(function) })
    }

    fn function(
        &self,
        store: &mut Store<CallState>,
        instance: &Instance,
    ) -> wasmtime::Result<Func> {
        instance
            .get_func(&mut *store, self.function)
            .ok_or_else(|| wasmtime::Error::msg("the role's function is not in the instance"))
    }
}

/// A request lowered to one version's generated type; one lives on the
/// stack per call, unboxed (boxing would allocate per call for nothing).
pub(crate) enum Lowered {
    V0_1(v0_1::types::Request),
    V0_2(v0_2::types::Request),
    V0_3(v0_3::types::Request),
}

/// `From` between a generated enum and its `model` twin, case by case: the
/// compiler checks both lists are complete, so the two cannot drift.
macro_rules! same_enum {
    ($from:ty => $to:ty { $($case:ident),+ $(,)? }) => {
        impl From<$from> for $to {
            fn from(value: $from) -> Self {
                match value {
                    $(<$from>::$case => <$to>::$case,)+
                }
            }
        }
    };
}
pub(crate) use same_enum;

/// The conversions of the types every version has in the same shape,
/// expanded in each version module over its own `types`.
macro_rules! shared_conversions {
    () => {

        // Enums a unit sends.
        same_enum!(types::VmMetric => model::VmMetric {
            MemoryMib, MemoryGuaranteedMib, Vcpus, CpuUsagePercent,
        });
        same_enum!(types::VmFlag => model::VmFlag { Migratable, HighlyAvailable, HostedEngine, Pending });
        same_enum!(types::VmText => model::VmText { Id, Name });
        same_enum!(types::ScoreOrder => model::ScoreOrder { LowerIsBetter, HigherIsBetter });

        // Enums the host sends.
        same_enum!(model::HostStatus => types::HostStatus {
            Up, Disabled, Maintenance, Down, NonOperational,
        });
        same_enum!(model::GroupScope => types::GroupScope { Vms, Hosts });

        fn key_values(pairs: &[model::KeyValue]) -> Vec<types::KeyValue> {
            pairs
                .iter()
                .map(|kv| types::KeyValue {
                    key: kv.key.clone(),
                    value: kv.value.clone(),
                })
                .collect()
        }

        impl From<&model::VmGroup> for types::VmGroup {
            fn from(group: &model::VmGroup) -> Self {
                types::VmGroup {
                    id: group.id.clone(),
                    name: group.name.clone(),
                    scope: group.scope.into(),
                    positive: group.positive,
                    enforcing: group.enforcing,
                    priority: group.priority,
                    hosts: group.hosts.clone(),
                }
            }
        }

        impl From<&model::Request> for types::Request {
            fn from(request: &model::Request) -> Self {
                types::Request {
                    vm: (&request.vm).into(),
                    params: key_values(&request.params),
                    hints: key_values(&request.hints),
                }
            }
        }

        impl From<&model::BalanceRequest> for types::BalanceRequest {
            fn from(request: &model::BalanceRequest) -> Self {
                types::BalanceRequest {
                    params: key_values(&request.params),
                    candidates: request.candidates.clone(),
                }
            }
        }

        impl From<types::Scores> for model::Scores {
            fn from(scores: types::Scores) -> Self {
                model::Scores {
                    values: scores.values,
                    floor: scores.floor,
                    ceiling: scores.ceiling,
                }
            }
        }

        impl From<types::Migration> for model::Migration {
            fn from(migration: types::Migration) -> Self {
                model::Migration {
                    vm: migration.vm,
                    destinations: migration.destinations,
                }
            }
        }

        fn param_specs(params: Vec<types::ParamSpec>) -> Vec<model::ParamSpec> {
            params
                .into_iter()
                .map(|p| model::ParamSpec {
                    name: p.name,
                    description: p.description,
                    default_value: p.default_value,
                    pattern: p.pattern,
                })
                .collect()
        }

        /// `types` has no functions; the linker still needs an instance for it.
        impl types::Host for $crate::sandbox::call_state::InventoryImport {}
    };
}
pub(crate) use shared_conversions;

/// A version's `types::Vm` from the model's: the fields every version
/// has, plus the version's own (expanded where `types`, `model` and
/// `key_values` are the version's).
macro_rules! lower_vm {
    ($vm:expr, { $($field:ident: $value:expr),* $(,)? }) => {{
        let vm: &model::Vm = $vm;
        types::Vm {
            id: vm.id.clone(),
            name: vm.name.clone(),
            memory_mib: vm.memory_mib,
            memory_guaranteed_mib: vm.memory_guaranteed_mib,
            vcpus: vm.vcpus,
            cpu_sockets: vm.cpu_sockets,
            cpu_cores_per_socket: vm.cpu_cores_per_socket,
            cpu_threads_per_core: vm.cpu_threads_per_core,
            cpu_usage_percent: vm.cpu_usage_percent,
            disk_gib: vm.disk_gib,
            current_host: vm.current_host,
            dedicated_hosts: vm.dedicated_hosts.clone(),
            pinned: vm.pinned,
            networks: vm.networks.clone(),
            extra_specs: key_values(&vm.extra_specs),
            image_properties: key_values(&vm.image_properties),
            tenant: vm.tenant.clone(),
            instance_type: vm.instance_type.clone(),
            highly_available: vm.highly_available,
            hosted_engine: vm.hosted_engine,
            groups: vm.groups.iter().map(types::VmGroup::from).collect(),
            $($field: $value,)*
        }
    }};
}
pub(crate) use lower_vm;

/// The `inventory` functions every version has, as items of the version's
/// `inventory::Host` impl; the version module provides `interned` and
/// `labels`, which lower the string columns in its own shape.
macro_rules! shared_inventory {
    () => {
        fn host_count(&mut self) -> u32 {
            $crate::sandbox::bindings::count(self.inventory.host_count())
        }

        // The linker serves these four from `columns.rs` without this
        // copy; they are here because the generated trait asks for them.
        fn host_metrics(&mut self, metric: types::HostMetric) -> Vec<f64> {
            std::sync::Arc::unwrap_or_clone(self.host_metric_column(metric.into()))
        }

        // `StatusColumn` and `statuses` are the version module's.
        fn host_statuses(&mut self) -> StatusColumn {
            statuses(self.inventory.host_statuses())
        }

        fn host_flags(&mut self, flag: types::HostFlag) -> Vec<u8> {
            $crate::sandbox::bindings::flag_bytes(self.inventory.host_flag(flag.into()))
        }

        fn host_texts(&mut self, text: types::HostText) -> types::Interned {
            interned(self.inventory.host_text(text.into()))
        }

        fn host_labels(&mut self, kind: types::HostLabelKind) -> types::Labels {
            labels(self.inventory.host_labels(kind.into()))
        }

        fn host_named_metric(&mut self, name: String) -> Vec<f64> {
            std::sync::Arc::unwrap_or_clone(self.host_named_metric_column(&name))
        }

        // Every call reads the count (the guest's snapshot is sized by
        // it); it is not a VM column (`ColumnsRead`).
        fn vm_count(&mut self) -> u32 {
            $crate::sandbox::bindings::count(self.inventory.vm_count())
        }

        fn vm_hosts(&mut self) -> Vec<u32> {
            std::sync::Arc::unwrap_or_clone(self.vm_host_column())
        }

        fn vm_metrics(&mut self, metric: types::VmMetric) -> Vec<f64> {
            std::sync::Arc::unwrap_or_clone(self.vm_metric_column(metric.into()))
        }

        fn vm_flags(&mut self, flag: types::VmFlag) -> Vec<u8> {
            self.read.vms();
            $crate::sandbox::bindings::flag_bytes(self.inventory.vm_flag(flag.into()))
        }

        fn vm_texts(&mut self, text: types::VmText) -> types::Interned {
            self.read.vms();
            interned(self.inventory.vm_text(text.into()))
        }
    };
}
pub(crate) use shared_inventory;

/// The version's [`Guests`]: export indices found once at load, and the
/// calls. `$version` is the version's [`PolicyVersion`] and [`Lowered`]
/// case; the module's `unit_info` converts its `unit-info`.
macro_rules! guest_calls {
    ($version:ident) => {
        use wasmtime::Store;
        use wasmtime::component::{Instance, InstancePre};
        use $crate::sandbox::bindings::{Lowered, PolicyVersion};
        use $crate::sandbox::call_state::CallState;
        use $crate::unit::Exports;

        use exports::sandpiper::policy::metadata;
        use $crate::sandbox::bindings::Role;

        // Each role's signature, spelled once: `check_types` checks exactly
        // what the calls below then use unchecked (`Role::typed`).
        type FilterParams<'a> = (&'a types::Request, &'a [u32]);
        type FilterReturn = (Vec<types::Rejection>,);
        type ScoreParams<'a> = (&'a types::Request, &'a [u32]);
        type ScoreReturn = (types::Scores,);
        type BalanceParams<'a> = (&'a types::BalanceRequest,);
        type BalanceReturn = (Option<types::Migration>,);

        /// The exports a unit of this version has.
        pub(crate) struct Guests {
            metadata: metadata::GuestIndices,
            filter: Option<Role>,
            score: Option<Role>,
            balance: Option<Role>,
        }

        impl Guests {
            /// The exports of a unit of this version; `None` when it does
            /// not export this version's `metadata`.
            pub(crate) fn find(pre: &InstancePre<CallState>) -> Option<Guests> {
                // Each role's interface exports one function, named as
                // the interface.
                let role = |name: &str| Role::find(pre, &export_name(name), name);
                Some(Guests {
                    metadata: metadata::GuestIndices::new(pre).ok()?,
                    filter: role("filter"),
                    score: role("score"),
                    balance: role("balance"),
                })
            }
        }

        /// The export's name in this version, for errors.
        fn export_name(interface: &str) -> String {
            format!(
                "sandpiper:policy/{interface}@{}",
                PolicyVersion::$version.package_version()
            )
        }

        impl $crate::sandbox::bindings::Guests for Guests {
            fn version(&self) -> PolicyVersion {
                PolicyVersion::$version
            }

            fn exports(&self) -> Exports {
                Exports {
                    filter: self.filter.is_some(),
                    score: self.score.is_some(),
                    balance: self.balance.is_some(),
                }
            }

            fn check_types(
                &self,
                store: &mut Store<CallState>,
                instance: &Instance,
            ) -> Result<(), (String, wasmtime::Error)> {
                self.metadata
                    .load(&mut *store, instance)
                    .map_err(|e| (export_name("metadata"), e))?;
                if let Some(filter) = &self.filter {
                    filter
                        .check::<FilterParams<'_>, FilterReturn>(&mut *store, instance)
                        .map_err(|e| (export_name("filter"), e))?;
                }
                if let Some(score) = &self.score {
                    score
                        .check::<ScoreParams<'_>, ScoreReturn>(&mut *store, instance)
                        .map_err(|e| (export_name("score"), e))?;
                }
                if let Some(balance) = &self.balance {
                    balance
                        .check::<BalanceParams<'_>, BalanceReturn>(&mut *store, instance)
                        .map_err(|e| (export_name("balance"), e))?;
                }
                Ok(())
            }

            fn info(
                &self,
                store: &mut Store<CallState>,
                instance: &Instance,
            ) -> wasmtime::Result<model::UnitInfo> {
                let metadata = self.metadata.load(&mut *store, instance)?;
                Ok(unit_info(metadata.call_info(&mut *store)?))
            }

            fn lower(&self, request: &model::Request) -> Lowered {
                Lowered::$version(types::Request::from(request))
            }

            fn filter(
                &self,
                store: &mut Store<CallState>,
                instance: &Instance,
                request: &Lowered,
                candidates: &[u32],
            ) -> Option<wasmtime::Result<Vec<model::Rejection>>> {
                let role = self.filter.as_ref()?;
                let Lowered::$version(request) = request else {
                    return Some(Err(wasmtime::Error::msg(
                        "a request lowered for another version of the WIT",
                    )));
                };
                Some((|| {
                    // SAFETY: `check_types` checked these types when the
                    // unit was loaded.
                    let filter = unsafe {
                        role.typed::<FilterParams<'_>, FilterReturn>(&mut *store, instance)
                    }?;
                    let (rejections,) = filter.call(&mut *store, (request, candidates))?;
                    Ok(rejections.into_iter().map(model::Rejection::from).collect())
                })())
            }

            fn score(
                &self,
                store: &mut Store<CallState>,
                instance: &Instance,
                request: &Lowered,
                candidates: &[u32],
            ) -> Option<wasmtime::Result<model::Scores>> {
                let role = self.score.as_ref()?;
                let Lowered::$version(request) = request else {
                    return Some(Err(wasmtime::Error::msg(
                        "a request lowered for another version of the WIT",
                    )));
                };
                Some((|| {
                    // SAFETY: as for `filter`.
                    let score = unsafe {
                        role.typed::<ScoreParams<'_>, ScoreReturn>(&mut *store, instance)
                    }?;
                    let (scores,) = score.call(&mut *store, (request, candidates))?;
                    Ok(scores.into())
                })())
            }

            fn balance(
                &self,
                store: &mut Store<CallState>,
                instance: &Instance,
                request: &model::BalanceRequest,
            ) -> Option<wasmtime::Result<Option<model::Migration>>> {
                let role = self.balance.as_ref()?;
                let request = types::BalanceRequest::from(request);
                Some((|| {
                    // SAFETY: as for `filter`.
                    let balance = unsafe {
                        role.typed::<BalanceParams<'_>, BalanceReturn>(&mut *store, instance)
                    }?;
                    let (migration,) = balance.call(&mut *store, (&request,))?;
                    Ok(migration.map(model::Migration::from))
                })())
            }
        }
    };
}
pub(crate) use guest_calls;
