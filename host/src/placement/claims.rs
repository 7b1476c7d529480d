//! The claim ledger: resources that decisions have handed out and the
//! engine has not reported back yet (oVirt's pending resources, Placement's
//! allocations), one claim per VM.
//!
//! A claim is keyed by the VM, so placing the same VM again replaces its
//! claim instead of adding a second one (oVirt's `VmSpecificPendingResource`
//! identity). It lives until one of:
//!
//! * the engine **confirms** it and then reports the host at a generation at
//!   or after the one the confirmation named: that report already counts the
//!   VM, so the claim would count it twice;
//! * the engine reports the VM running on the claimed host, which is the
//!   same news, or on a host it was not on before (it started or moved
//!   somewhere else, and the claimed room stays unused). A report that
//!   still lists a migrating VM on its source leaves the claim on the
//!   destination counting;
//! * the engine **releases** it (the VM failed to start, or was cancelled);
//! * it **expires**, if still unconfirmed a TTL after it was made: the
//!   engine gave up on the start, or lost the message, and the capacity must
//!   not stay parked forever. A confirmed claim never expires: its VM runs,
//!   and only a report that counts the VM may stop the claim counting it
//!   (expiring it earlier could double-book the host);
//! * its host is removed from the inventory.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;
use uuid::Uuid;

use crate::hardware::claim::HardwareClaim;

use super::resources::Resources;
use super::time::Timestamp;

/// Where a claim stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ClaimState {
    /// Decided; the engine has not said the VM started.
    Pending,
    /// The engine says the VM started; its reports of the host from
    /// generation `covered_from` on include the VM.
    Confirmed { covered_from: u64 },
}

/// The ledger's maps by VM and host id: foldhash, seeded per map, as the
/// snapshot's id maps are; each decision looks up every host of its window
/// here, and SipHash was a third of that (docs/performance.md).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Resources held on a host for one VM.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Claim {
    pub vm_id: String,
    pub host_id: String,
    pub resources: Resources,
    /// The decision that made the claim.
    pub decision_id: Uuid,
    pub created_at: Timestamp,
    /// When the claim expires unless confirmed first; a confirmed claim
    /// does not expire.
    pub expires_at: Timestamp,
    #[serde(flatten)]
    pub state: ClaimState,
    /// The specific cells, CPUs, pages and devices taken, for a VM with
    /// hardware needs; counted in later decisions' hardware columns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware: Option<Arc<HardwareClaim>>,
}

/// Whether a report listing `claim`'s VM on `host_id` settles the claim,
/// the host's figures counting the VM from now on; `was_there`: the host's
/// report before listed the VM too.
///
/// A VM listed on the host its claim holds room on settles the claim. So
/// does a VM listed where it was not before: it started, or moved,
/// somewhere other than decided, and the claimed room stays unused. A VM
/// still listed where it already was is a migration's source before the
/// move: its claim on the destination keeps counting, or the destination
/// could be booked twice while the VM moves.
pub fn settled_by_report(claim: &Claim, host_id: &str, was_there: bool) -> bool {
    claim.host_id == host_id || !was_there
}

/// A claim operation that cannot be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error("VM `{vm_id}` holds no claim")]
    NoClaim { vm_id: String },
}

impl HostClaims {
    /// The sum of the claims, leaving out the VMs in `except`.
    fn total_except(&self, except: &BTreeSet<String>) -> Resources {
        if !except.iter().any(|vm| self.vms.contains_key(vm)) {
            return self.total;
        }
        let mut total = Resources::default();
        for (_, resources) in self.vms.iter().filter(|(vm, _)| !except.contains(*vm)) {
            total.add(resources);
        }
        total
    }

    /// The claims, leaving out the VMs in `except`, each as (VM,
    /// resources) in VM order.
    fn each_except<'a>(
        &'a self,
        except: &'a BTreeSet<String>,
    ) -> impl Iterator<Item = (&'a str, &'a Resources)> + 'a {
        self.vms
            .iter()
            .filter(|(vm, _)| !except.contains(*vm))
            .map(|(vm, r)| (vm.as_str(), r))
    }
}

/// Every live claim of one cluster, by VM, by host, and (unconfirmed ones)
/// by expiry, so that no operation a decision makes walks every claim: at
/// thousands of decisions a second a cluster holds thousands of claims.
#[derive(Clone, Debug, Default)]
pub struct ClaimLedger {
    by_vm: HashMap<String, Claim>,
    by_host: HashMap<String, HostClaims>,
    /// Unconfirmed claims by (expiry, VM).
    expiring: BTreeSet<(Timestamp, String)>,
    /// The VMs whose claims take specific hardware, so a decision finds
    /// them without walking every claim.
    with_hardware: BTreeSet<String>,
}

/// The claims on one host and their sum.
#[derive(Clone, Debug, Default)]
struct HostClaims {
    /// Each claim's VM and resources (a copy of the claim's), so reading a
    /// host's claims looks nothing up by VM.
    vms: BTreeMap<String, Resources>,
    total: Resources,
}

impl ClaimLedger {
    pub fn new() -> Self {
        ClaimLedger::default()
    }

    /// Number of live claims.
    pub fn len(&self) -> usize {
        self.by_vm.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_vm.is_empty()
    }

    /// The claim of `vm_id`.
    pub fn get(&self, vm_id: &str) -> Option<&Claim> {
        self.by_vm.get(vm_id)
    }

    /// Every claim, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Claim> {
        self.by_vm.values()
    }

    /// The sum of the claims on `host_id`.
    pub fn pending_on(&self, host_id: &str) -> Resources {
        self.by_host
            .get(host_id)
            .map(|h| h.total)
            .unwrap_or_default()
    }

    /// The sum of the claims on `host_id`, leaving out the claims of the
    /// VMs in `except` (see [`ClaimLedger::pending_by_host`]).
    pub fn pending_on_except(&self, host_id: &str, except: &BTreeSet<String>) -> Resources {
        self.by_host
            .get(host_id)
            .map_or_else(Resources::default, |h| h.total_except(except))
    }

    /// The claims on `host_id`, leaving out the claims of the VMs in
    /// `except`, each as (VM, resources) in VM order, and their sum.
    pub fn on_host_except<'a>(
        &'a self,
        host_id: &str,
        except: &'a BTreeSet<String>,
    ) -> (
        impl Iterator<Item = (&'a str, &'a Resources)> + 'a,
        Resources,
    ) {
        let claims = self.by_host.get(host_id);
        let total = claims.map_or_else(Resources::default, |h| h.total_except(except));
        let each = claims.into_iter().flat_map(|h| h.each_except(except));
        (each, total)
    }

    /// Every host with claims, in no particular order, with its claims
    /// leaving out the VMs in `except`, each as (VM, resources) in VM
    /// order: every claim, found with one walk of the hosts that have
    /// some.
    pub fn hosts_except<'a>(
        &'a self,
        except: &'a BTreeSet<String>,
    ) -> impl Iterator<Item = (&'a str, impl Iterator<Item = (&'a str, &'a Resources)> + 'a)> + 'a
    {
        self.by_host
            .iter()
            .map(move |(host, claims)| (host.as_str(), claims.each_except(except)))
    }

    /// Each host with claims and their sum, leaving out the claims of the
    /// VMs in `except` (a decision about those VMs replaces their claims,
    /// so it must not count them against itself).
    pub fn pending_by_host<'a>(
        &'a self,
        except: &'a BTreeSet<String>,
    ) -> impl Iterator<Item = (&'a str, Resources)> + 'a {
        self.by_host.iter().filter_map(move |(host, claims)| {
            if except.iter().any(|vm| claims.vms.contains_key(vm)) {
                let total = claims.total_except(except);
                (!total.is_empty()).then_some((host.as_str(), total))
            } else {
                Some((host.as_str(), claims.total))
            }
        })
    }

    /// The claims that take specific hardware, as (host, what they took),
    /// leaving out the VMs in `except`, in VM order.
    pub fn hardware_except<'a>(
        &'a self,
        except: &'a BTreeSet<String>,
    ) -> impl Iterator<Item = (&'a str, &'a Arc<HardwareClaim>)> + 'a {
        self.with_hardware
            .iter()
            .filter(|vm| !except.contains(*vm))
            .filter_map(|vm| {
                let claim = self.by_vm.get(vm)?;
                Some((claim.host_id.as_str(), claim.hardware.as_ref()?))
            })
    }

    /// Records `claim`, replacing the VM's previous claim (returned).
    pub fn insert(&mut self, claim: Claim) -> Option<Claim> {
        let previous = self.remove(&claim.vm_id);
        let host = claim.host_id.clone();
        self.by_host
            .entry(host.clone())
            .or_default()
            .vms
            .insert(claim.vm_id.clone(), claim.resources);
        if claim.state == ClaimState::Pending {
            self.expiring
                .insert((claim.expires_at, claim.vm_id.clone()));
        }
        if claim.hardware.is_some() {
            self.with_hardware.insert(claim.vm_id.clone());
        }
        self.by_vm.insert(claim.vm_id.clone(), claim);
        self.resum(&host);
        previous
    }

    /// Drops the claim of `vm_id` (the engine released it).
    pub fn remove(&mut self, vm_id: &str) -> Option<Claim> {
        let claim = self.by_vm.remove(vm_id)?;
        self.expiring
            .remove(&(claim.expires_at, claim.vm_id.clone()));
        self.with_hardware.remove(vm_id);
        if let Some(host) = self.by_host.get_mut(&claim.host_id) {
            host.vms.remove(vm_id);
        }
        self.resum(&claim.host_id);
        Some(claim)
    }

    /// Marks the claim of `vm_id` confirmed: reports of its host from
    /// generation `covered_from` on include the VM.
    pub fn confirm(&mut self, vm_id: &str, covered_from: u64) -> Result<&Claim, ClaimError> {
        let claim = self
            .by_vm
            .get_mut(vm_id)
            .ok_or_else(|| ClaimError::NoClaim {
                vm_id: vm_id.to_owned(),
            })?;
        self.expiring
            .remove(&(claim.expires_at, claim.vm_id.clone()));
        claim.state = ClaimState::Confirmed { covered_from };
        Ok(claim)
    }

    /// Moves the expiry of `vm_id`'s pending claim to `until` when that is
    /// later (an operation carrying the claim is still in flight). `None`
    /// when there is no such claim, it is confirmed, or it already lasts
    /// that long.
    pub fn extend(&mut self, vm_id: &str, until: Timestamp) -> Option<&Claim> {
        let claim = self.by_vm.get_mut(vm_id)?;
        if claim.state != ClaimState::Pending || claim.expires_at >= until {
            return None;
        }
        self.expiring
            .remove(&(claim.expires_at, claim.vm_id.clone()));
        claim.expires_at = until;
        self.expiring.insert((until, claim.vm_id.clone()));
        Some(claim)
    }

    /// Drops every unconfirmed claim that expired at or before `now`.
    pub fn expire(&mut self, now: Timestamp) -> Vec<Claim> {
        let expired: Vec<String> = self
            .expiring
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, vm)| vm.clone())
            .collect();
        self.remove_all(expired)
    }

    /// The earliest expiry among the unconfirmed claims.
    pub fn next_expiry(&self) -> Option<Timestamp> {
        self.expiring.first().map(|(at, _)| *at)
    }

    /// Drops the confirmed claims on `host_id` that a report of the host at
    /// `generation` already includes.
    pub fn drop_covered(&mut self, host_id: &str, generation: u64) -> Vec<Claim> {
        let covered: Vec<String> = self
            .by_host
            .get(host_id)
            .into_iter()
            .flat_map(|h| h.vms.keys())
            .filter(|vm| {
                matches!(
                    self.by_vm.get(*vm).map(|c| c.state),
                    Some(ClaimState::Confirmed { covered_from }) if covered_from <= generation
                )
            })
            .cloned()
            .collect();
        self.remove_all(covered)
    }

    /// Drops every claim on `host_id` (the host left the inventory).
    pub fn drop_host(&mut self, host_id: &str) -> Vec<Claim> {
        let on_host: Vec<String> = self
            .by_host
            .get(host_id)
            .map(|h| h.vms.keys().cloned().collect())
            .unwrap_or_default();
        self.remove_all(on_host)
    }

    /// Drops the claims a report of `host_id` settles (see
    /// [`settled_by_report`]), the report listing `vm_ids` on it where it
    /// listed `before` until now.
    pub fn drop_reported<'a>(
        &mut self,
        host_id: &str,
        vm_ids: impl IntoIterator<Item = &'a str>,
        before: &BTreeSet<String>,
    ) -> Vec<Claim> {
        let settled: Vec<String> = vm_ids
            .into_iter()
            .filter(|vm| {
                self.by_vm
                    .get(*vm)
                    .is_some_and(|c| settled_by_report(c, host_id, before.contains(*vm)))
            })
            .map(str::to_owned)
            .collect();
        self.remove_all(settled)
    }

    fn remove_all(&mut self, vm_ids: Vec<String>) -> Vec<Claim> {
        vm_ids.iter().filter_map(|vm| self.remove(vm)).collect()
    }

    /// Recomputes a host's sum from its claims (rather than adding and
    /// subtracting, which would let rounding drift accumulate).
    fn resum(&mut self, host_id: &str) {
        let Some(host) = self.by_host.get_mut(host_id) else {
            return;
        };
        if host.vms.is_empty() {
            self.by_host.remove(host_id);
            return;
        }
        let mut total = Resources::default();
        for resources in host.vms.values() {
            total.add(resources);
        }
        host.total = total;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(vm: &str, host: &str, memory: f64, expires: u64) -> Claim {
        Claim {
            vm_id: vm.to_owned(),
            host_id: host.to_owned(),
            resources: Resources {
                memory_mib: memory,
                vms: 1.0,
                ..Resources::default()
            },
            decision_id: Uuid::nil(),
            created_at: Timestamp(0),
            expires_at: Timestamp(expires),
            state: ClaimState::Pending,
            hardware: None,
        }
    }

    #[test]
    fn claiming_the_same_vm_again_replaces_its_claim() {
        let mut ledger = ClaimLedger::new();
        ledger.insert(claim("vm", "h1", 1024.0, 10));
        let previous = ledger.insert(claim("vm", "h2", 2048.0, 10));
        assert_eq!(previous.map(|c| c.host_id), Some("h1".to_owned()));
        assert_eq!(ledger.len(), 1);
        assert!(ledger.pending_on("h1").is_empty());
        assert_eq!(ledger.pending_on("h2").memory_mib, 2048.0);
    }

    #[test]
    fn a_decision_about_a_vm_does_not_count_its_own_claim() {
        let mut ledger = ClaimLedger::new();
        ledger.insert(claim("a", "h1", 1024.0, 10));
        ledger.insert(claim("b", "h1", 512.0, 10));
        ledger.insert(claim("c", "h2", 256.0, 10));
        let except = BTreeSet::from(["a".to_owned(), "c".to_owned()]);
        let mut pending: Vec<_> = ledger
            .pending_by_host(&except)
            .map(|(h, r)| (h.to_owned(), r.memory_mib))
            .collect();
        pending.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(pending, [("h1".to_owned(), 512.0)]);
    }

    #[test]
    fn pending_claims_expire_confirmed_ones_wait_for_the_covering_report() {
        let mut ledger = ClaimLedger::new();
        ledger.insert(claim("a", "h1", 1.0, 10));
        ledger.insert(claim("b", "h1", 1.0, 5));
        assert_eq!(ledger.next_expiry(), Some(Timestamp(5)));
        ledger.confirm("b", 7).expect("b has a claim");
        assert_eq!(ledger.next_expiry(), Some(Timestamp(10)));
        assert_eq!(
            ledger
                .expire(Timestamp(1000))
                .iter()
                .map(|c| c.vm_id.as_str())
                .collect::<Vec<_>>(),
            ["a"]
        );
        assert_eq!(ledger.len(), 1);
        assert!(ledger.drop_covered("h1", 6).is_empty());
        assert_eq!(ledger.drop_covered("h1", 7).len(), 1);
        assert!(ledger.is_empty());
        assert_eq!(
            ledger.confirm("b", 1).map(|_| ()),
            Err(ClaimError::NoClaim {
                vm_id: "b".to_owned()
            })
        );
    }

    #[test]
    fn reports_and_host_removal_drop_claims() {
        let mut ledger = ClaimLedger::new();
        ledger.insert(claim("a", "h1", 1.0, 10));
        ledger.insert(claim("b", "h1", 1.0, 10));
        ledger.insert(claim("c", "h2", 1.0, 10));
        assert_eq!(
            ledger
                .drop_reported("h2", ["c", "zzz"], &BTreeSet::new())
                .len(),
            1
        );
        assert_eq!(ledger.drop_host("h1").len(), 2);
        assert!(ledger.is_empty());
        assert!(ledger.pending_by_host(&BTreeSet::new()).next().is_none());
    }

    /// A migration's claim on its destination outlives reports of the
    /// source that still list the VM; the VM listed on the destination, or
    /// anywhere new, settles it.
    #[test]
    fn a_migrating_vm_listed_where_it_was_keeps_its_claim() {
        let on_source: BTreeSet<String> = ["m".to_owned()].into();
        for (reported_on, before, settles) in [
            ("src", &on_source, false),
            ("dst", &BTreeSet::new(), true),
            ("elsewhere", &BTreeSet::new(), true),
        ] {
            let mut ledger = ClaimLedger::new();
            ledger.insert(claim("m", "dst", 1.0, 10));
            let dropped = ledger.drop_reported(reported_on, ["m"], before);
            assert_eq!(dropped.len() == 1, settles, "reported on {reported_on}");
            assert_eq!(ledger.is_empty(), settles, "reported on {reported_on}");
        }
    }
}
