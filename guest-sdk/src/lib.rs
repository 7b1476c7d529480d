//! Sandpiper's guest SDK: write a policy unit as ordinary Rust, export it as
//! a WebAssembly component with one macro.
//!
//! A unit implements [`Unit`] and one or more of [`Filter`], [`Score`] and
//! [`Balance`] over friendly views of the cluster ([`Context::hosts`],
//! [`Context::vms`], [`Context::params`]), then names its roles:
//!
//! ```ignore
//! sandpiper_guest::export_unit!(MemoryFilter: filter);
//! ```
//!
//! Built for `wasm32-wasip2` that line becomes the component's exports;
//! built natively it becomes `pub fn native_unit() -> native::NativeUnit`, so
//! tests and benchmarks run the unit's own source through the same
//! [`entry`] functions the component's exports call. See the README for a
//! complete unit.

pub mod collections;
pub mod entry;
pub mod float;
pub mod hosts;
pub mod native;
pub mod params;
pub mod rejections;
pub mod unit;
pub mod vms;

#[cfg(target_arch = "wasm32")]
pub mod bindings;
#[cfg(target_arch = "wasm32")]
mod convert;
#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod exports;
#[cfg(target_arch = "wasm32")]
mod imports;

/// The data a unit sees: the Rust twin of the WIT types, from the crate the
/// host shares (`sandpiper-model`).
pub use sandpiper_model as model;
/// The cluster snapshot's module (`sandpiper-model`'s). A unit names its
/// snapshot [`Inventory`] (this crate's), which inside a component is the
/// one fetched from the host import; `inventory::Inventory` is the host's.
pub use sandpiper_model::inventory;

pub use hosts::{HostRef, Hosts};
pub use params::{ParamError, Params};
pub use rejections::{Reason, Rejections};
pub use unit::{Balance, BalanceContext, Context, Filter, Score, Unit};
pub use vms::{VmRef, Vms};

/// The snapshot a unit reads. Inside a component its columns come from the
/// host's `inventory` import, named in the type (not behind a `dyn`) so
/// that a unit links only the import functions it calls; natively it is
/// the host's own snapshot type.
#[cfg(target_arch = "wasm32")]
pub type Inventory = sandpiper_model::Inventory<imports::Imports>;
/// Natively, the host's snapshot itself.
#[cfg(not(target_arch = "wasm32"))]
pub use sandpiper_model::Inventory;

/// Everything a unit usually needs: `use sandpiper_guest::prelude::*;`.
pub mod prelude {
    pub use crate::Inventory;
    pub use crate::hosts::{HostRef, Hosts};
    pub use crate::model::{
        AppliesTo, BalanceRequest, HostFlag, HostLabels, HostMetric, HostStatus, HostText,
        KeyValue, Migration, ParamSpec, Rejection, Request, RequestProperty, ScoreOrder, Scores,
        UnitInfo, Vm, VmFlag, VmMetric, VmText,
    };
    pub use crate::params::{ParamError, Params};
    pub use crate::rejections::{Reason, Rejections, Sentences};
    pub use crate::unit::{Balance, BalanceContext, Context, Filter, Score, Unit};
    pub use crate::vms::{VmRef, Vms};
}

/// Exports a unit's roles: any non-empty selection of `filter`, `score`,
/// `balance`, in that order.
///
/// ```ignore
/// sandpiper_guest::export_unit!(EvenDistribution: score, balance);
/// ```
///
/// For `wasm32` it expands to the component's exports (`metadata` plus the
/// listed interfaces, nothing else); natively to
/// `pub fn native_unit() -> sandpiper_guest::native::NativeUnit` with exactly
/// the listed roles set. Invoke it once, at the crate root of a `cdylib`.
#[macro_export]
macro_rules! export_unit {
    ($unit:ty : filter) => {
        $crate::__export_unit!($unit; filter: yes, score: no, balance: no);
    };
    ($unit:ty : score) => {
        $crate::__export_unit!($unit; filter: no, score: yes, balance: no);
    };
    ($unit:ty : balance) => {
        $crate::__export_unit!($unit; filter: no, score: no, balance: yes);
    };
    ($unit:ty : filter, score) => {
        $crate::__export_unit!($unit; filter: yes, score: yes, balance: no);
    };
    ($unit:ty : filter, balance) => {
        $crate::__export_unit!($unit; filter: yes, score: no, balance: yes);
    };
    ($unit:ty : score, balance) => {
        $crate::__export_unit!($unit; filter: no, score: yes, balance: yes);
    };
    ($unit:ty : filter, score, balance) => {
        $crate::__export_unit!($unit; filter: yes, score: yes, balance: yes);
    };
    ($unit:ty : $($roles:tt)*) => {
        ::core::compile_error!(
            "export_unit! takes one or more of `filter`, `score`, `balance`, in that order"
        );
    };
}

/// The expansion of [`export_unit!`]; `yes`/`no` say which roles to export.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_unit {
    ($unit:ty; filter: $filter:ident, score: $score:ident, balance: $balance:ident) => {
        /// This unit run natively, with exactly the roles its component
        /// exports, for tests and benchmarks.
        #[cfg(not(target_arch = "wasm32"))]
        pub fn native_unit() -> $crate::native::NativeUnit {
            $crate::native::NativeUnit {
                info: $crate::entry::info::<$unit>(),
                filter: $crate::__native_role!($filter, $crate::entry::filter::<$unit>),
                score: $crate::__native_role!($score, $crate::entry::score::<$unit>),
                balance: $crate::__native_role!($balance, $crate::entry::balance::<$unit>),
            }
        }

        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __SandpiperUnit;

            impl $crate::bindings::base::exports::sandpiper::policy::metadata::Guest
                for __SandpiperUnit
            {
                fn info() -> $crate::bindings::types::UnitInfo {
                    $crate::exports::info::<$unit>()
                }
            }
    $crate::bindings::base::export!(__SandpiperUnit with_types_in $crate::bindings::base);

            $crate::__wasm_role!($filter, filter, $unit);
            $crate::__wasm_role!($score, score, $unit);
            $crate::__wasm_role!($balance, balance, $unit);
        };
    };
}

/// A native role: the entry function, or `None` when not exported.
#[doc(hidden)]
#[macro_export]
macro_rules! __native_role {
    (yes, $entry:expr) => {
        ::core::option::Option::Some($entry)
    };
    (no, $entry:expr) => {
        ::core::option::Option::None
    };
}

/// A WebAssembly role: the interface's `Guest` impl and export, or nothing.
#[doc(hidden)]
#[macro_export]
macro_rules! __wasm_role {
    (no, $role:ident, $unit:ty) => {};
    (yes, filter, $unit:ty) => {
        impl $crate::bindings::filter_role::exports::sandpiper::policy::filter::Guest
            for __SandpiperUnit
        {
            fn filter(
                request: $crate::bindings::types::Request,
                candidates: ::std::vec::Vec<u32>,
            ) -> ::std::vec::Vec<$crate::bindings::types::Rejection> {
                $crate::exports::filter::<$unit>(request, candidates)
            }
        }
        $crate::bindings::filter_role::export!(
            __SandpiperUnit with_types_in $crate::bindings::filter_role
        );
    };
    (yes, score, $unit:ty) => {
        impl $crate::bindings::score_role::exports::sandpiper::policy::score::Guest
            for __SandpiperUnit
        {
            fn score(
                request: $crate::bindings::types::Request,
                candidates: ::std::vec::Vec<u32>,
            ) -> $crate::bindings::types::Scores {
                $crate::exports::score::<$unit>(request, candidates)
            }
        }
        $crate::bindings::score_role::export!(
            __SandpiperUnit with_types_in $crate::bindings::score_role
        );
    };
    (yes, balance, $unit:ty) => {
        impl $crate::bindings::balance_role::exports::sandpiper::policy::balance::Guest
            for __SandpiperUnit
        {
            fn balance(
                request: $crate::bindings::types::BalanceRequest,
            ) -> ::core::option::Option<$crate::bindings::types::Migration> {
                $crate::exports::balance::<$unit>(request)
            }
        }
        $crate::bindings::balance_role::export!(
            __SandpiperUnit with_types_in $crate::bindings::balance_role
        );
    };
}
