//! What a unit author implements: [`Unit`] plus one or more of [`Filter`],
//! [`Score`] and [`Balance`], each over a read-only context of the call.
//!
//! The methods are associated functions (no `self`): a unit keeps no state
//! between calls, because the host gives every call a fresh instance.

use crate::Inventory;
use crate::hosts::Hosts;
use crate::model::{BalanceRequest, Migration, Rejection, Request, Scores, UnitInfo, Vm};
use crate::params::{Defaults, Params};
use crate::vms::Vms;

/// Every unit describes itself.
pub trait Unit {
    /// Name, description, parameters and score order. Also the source of
    /// parameter defaults when a caller did not fill them in.
    fn info() -> UnitInfo;
}

/// A hard constraint: which candidates can never run the VM, and why.
pub trait Filter: Unit {
    /// Returns the rejected candidates grouped by reason (build it with
    /// [`crate::Rejections`]); every candidate not listed survives.
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection>;
}

/// A soft constraint: how good each candidate is.
pub trait Score: Unit {
    /// One finite value per candidate, in order; which end is better is the
    /// unit's `score_order`.
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores;
}

/// Periodic rebalancing: at most one VM to move, and where it may go.
pub trait Balance: Unit {
    /// `None` when the cluster is balanced.
    fn balance(cx: &BalanceContext<'_>) -> Option<Migration>;
}

/// Everything a filter or score call can read.
pub struct Context<'a> {
    inventory: &'a Inventory,
    request: &'a Request,
    defaults: Defaults,
}

impl<'a> Context<'a> {
    /// A context for one call of the unit whose `info` is given (its
    /// declared parameter defaults back up the request's values).
    pub fn new(inventory: &'a Inventory, request: &'a Request, info: fn() -> UnitInfo) -> Self {
        Context {
            inventory,
            request,
            defaults: Defaults::new(info),
        }
    }

    /// The cluster snapshot.
    pub fn inventory(&self) -> &'a Inventory {
        self.inventory
    }

    /// The whole request.
    pub fn request(&self) -> &'a Request {
        self.request
    }

    /// The VM being placed.
    pub fn vm(&self) -> &'a Vm {
        &self.request.vm
    }

    /// This unit's parameters.
    pub fn params(&self) -> Params<'_> {
        Params::new(&self.request.params, &self.defaults)
    }

    /// The request's scheduler hints; a list-valued hint repeats its key.
    pub fn hints<'k>(&self, key: &'k str) -> impl Iterator<Item = &'a str> + 'k
    where
        'a: 'k,
    {
        self.request
            .hints
            .iter()
            .filter(move |kv| kv.key == key)
            .map(|kv| kv.value.as_str())
    }

    /// Views of the hosts.
    pub fn hosts(&self) -> Hosts<'a> {
        Hosts::new(self.inventory)
    }

    /// Views of the VMs already in the cluster.
    pub fn vms(&self) -> Vms<'a> {
        Vms::new(self.inventory)
    }
}

/// Everything a balance call can read.
pub struct BalanceContext<'a> {
    inventory: &'a Inventory,
    request: &'a BalanceRequest,
    defaults: Defaults,
}

impl<'a> BalanceContext<'a> {
    /// A context for one balance call of the unit whose `info` is given.
    pub fn new(
        inventory: &'a Inventory,
        request: &'a BalanceRequest,
        info: fn() -> UnitInfo,
    ) -> Self {
        BalanceContext {
            inventory,
            request,
            defaults: Defaults::new(info),
        }
    }

    /// The cluster snapshot.
    pub fn inventory(&self) -> &'a Inventory {
        self.inventory
    }

    /// This unit's parameters.
    pub fn params(&self) -> Params<'_> {
        Params::new(&self.request.params, &self.defaults)
    }

    /// The hosts the unit may move VMs between.
    pub fn candidates(&self) -> &'a [u32] {
        &self.request.candidates
    }

    /// Views of the hosts.
    pub fn hosts(&self) -> Hosts<'a> {
        Hosts::new(self.inventory)
    }

    /// Views of the running VMs.
    pub fn vms(&self) -> Vms<'a> {
        Vms::new(self.inventory)
    }
}
