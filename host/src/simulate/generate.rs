//! The built-in trace generator: VMs arriving as a Poisson process, each
//! of a size drawn from a weighted mix and living an exponentially
//! distributed time, from a seed. The same parameters give the same trace
//! on every machine: the stream is rand's ChaCha8, which rand documents as
//! portable and stable across its releases, and every draw is made in one
//! fixed order.
//!
//! The trace ends at its horizon (`duration_s`, else the last arrival):
//! departures after it are left out, so the end state is a loaded cluster,
//! the one worth comparing policies on.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::trace::{EventKind, MAX_AT_S, MAX_EVENTS, Trace, TraceEvent, check_events};
use crate::snapshot::VmSpec;

/// The most arrivals a generated trace has: each may add a departure, and
/// the whole must stay within [`MAX_EVENTS`].
pub const MAX_ARRIVALS: u32 = (MAX_EVENTS / 2) as u32;

/// The most VM sizes in a mix: a mix is a handful of flavors.
pub const MAX_SIZES: usize = 64;

/// The largest VM memory a size may have, MiB: 16 TiB, past the largest
/// hosts sold.
pub const MAX_SIZE_MEMORY_MIB: f64 = 16.0 * 1024.0 * 1024.0;

/// How a trace is generated. Every field has a default, so `{}` (or
/// `{"seed": 7}`) is a trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GenerateParams {
    /// Names the trace: the same seed and parameters, the same trace.
    pub seed: u64,
    /// How many VMs arrive, 1 to 50,000.
    #[schema(minimum = 1, maximum = 50000)]
    pub arrivals: u32,
    /// The mean arrival rate, VMs per hour (arrivals are a Poisson process).
    #[schema(exclusive_minimum = 0)]
    pub arrivals_per_hour: f64,
    /// The mean lifetime of a VM, seconds (exponentially distributed).
    #[schema(exclusive_minimum = 0)]
    pub mean_lifetime_s: f64,
    /// Where the trace ends, seconds; the last arrival when absent.
    /// Arrivals and departures after it are left out.
    #[schema(maximum = 316_224_000)]
    pub duration_s: Option<u64>,
    /// The size mix: each arriving VM's size is drawn with these weights.
    pub sizes: Vec<VmSize>,
}

/// One VM size of the mix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VmSize {
    #[schema(minimum = 0)]
    pub memory_mib: f64,
    #[schema(minimum = 1, maximum = 4096)]
    pub vcpus: u32,
    /// Relative frequency; 1 when absent.
    #[serde(default = "one")]
    #[schema(exclusive_minimum = 0)]
    pub weight: f64,
}

fn one() -> f64 {
    1.0
}

impl Default for GenerateParams {
    /// 200 VMs, one a minute, living four hours on average, in a mix of
    /// small flavors weighted toward the smaller ones.
    fn default() -> Self {
        let size = |memory_mib, vcpus, weight| VmSize {
            memory_mib,
            vcpus,
            weight,
        };
        GenerateParams {
            seed: 0,
            arrivals: 200,
            arrivals_per_hour: 60.0,
            mean_lifetime_s: 4.0 * 3600.0,
            duration_s: None,
            sizes: vec![
                size(2048.0, 1, 4.0),
                size(4096.0, 2, 3.0),
                size(8192.0, 4, 2.0),
                size(16384.0, 8, 1.0),
            ],
        }
    }
}

impl std::str::FromStr for VmSize {
    type Err = String;

    /// `MEMORY_MIB:VCPUS[:WEIGHT]`, the command line's spelling.
    fn from_str(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.split(':').collect();
        let (memory, vcpus, weight) = match parts[..] {
            [m, v] => (m, v, "1"),
            [m, v, w] => (m, v, w),
            _ => return Err(format!("`{text}` is not MEMORY_MIB:VCPUS[:WEIGHT]")),
        };
        let bad = |what: &str, v: &str| format!("`{v}` is not a {what} in `{text}`");
        Ok(VmSize {
            memory_mib: memory.parse().map_err(|_| bad("memory size", memory))?,
            vcpus: vcpus.parse().map_err(|_| bad("vCPU count", vcpus))?,
            weight: weight.parse().map_err(|_| bad("weight", weight))?,
        })
    }
}

/// A parameter out of range; `field` is its name in [`GenerateParams`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct GenerateError {
    pub field: String,
    pub message: String,
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> GenerateError {
    GenerateError {
        field: field.into(),
        message: message.into(),
    }
}

impl GenerateParams {
    /// Checks every parameter against its range.
    pub fn check(&self) -> Result<(), GenerateError> {
        if !(1..=MAX_ARRIVALS).contains(&self.arrivals) {
            return Err(bad("arrivals", format!("must be 1 to {MAX_ARRIVALS}")));
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(self.arrivals_per_hour) {
            return Err(bad("arrivals_per_hour", "must be a number above 0"));
        }
        if !positive(self.mean_lifetime_s) {
            return Err(bad("mean_lifetime_s", "must be a number above 0"));
        }
        if self.duration_s.is_some_and(|d| d > MAX_AT_S) {
            return Err(bad("duration_s", format!("must be at most {MAX_AT_S}")));
        }
        if self.sizes.is_empty() || self.sizes.len() > MAX_SIZES {
            return Err(bad("sizes", format!("must list 1 to {MAX_SIZES} sizes")));
        }
        for (i, size) in self.sizes.iter().enumerate() {
            if !(size.memory_mib.is_finite()
                && (0.0..=MAX_SIZE_MEMORY_MIB).contains(&size.memory_mib))
            {
                return Err(bad(
                    format!("sizes[{i}].memory_mib"),
                    format!("must be 0 to {MAX_SIZE_MEMORY_MIB}"),
                ));
            }
            if !(1..=crate::snapshot::MAX_CPUS).contains(&size.vcpus) {
                return Err(bad(format!("sizes[{i}].vcpus"), "must be 1 to 4096"));
            }
            if !positive(size.weight) {
                return Err(bad(
                    format!("sizes[{i}].weight"),
                    "must be a number above 0",
                ));
            }
        }
        Ok(())
    }
}

/// The trace `params` describe.
pub fn generate(params: &GenerateParams) -> Result<Trace, GenerateError> {
    params.check()?;
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let total_weight: f64 = params.sizes.iter().map(|s| s.weight).sum();
    let rate_per_s = params.arrivals_per_hour / 3600.0;
    // (time, order, event): VM n's arrival has order 2n and its departure
    // 2n + 1, so at equal times events keep the generator's order and a
    // VM never departs before it arrived.
    let mut events: Vec<(u64, u64, TraceEvent)> = Vec::new();
    let mut t = 0.0_f64;
    let mut last_arrival = 0;
    for n in 1..=u64::from(params.arrivals) {
        t += exponential(&mut rng, rate_per_s);
        let lifetime = exponential(&mut rng, 1.0 / params.mean_lifetime_s);
        let pick = rng.random::<f64>() * total_weight;
        let at_s = t.floor();
        if at_s > MAX_AT_S as f64 {
            return Err(bad(
                "arrivals_per_hour",
                format!("the arrivals run past {MAX_AT_S} s; raise the rate or lower `arrivals`"),
            ));
        }
        let at_s = at_s as u64;
        if params.duration_s.is_some_and(|d| at_s > d) {
            break;
        }
        last_arrival = at_s;
        let size = choose(&params.sizes, pick);
        let id = format!("vm-{n}");
        events.push((
            at_s,
            2 * n,
            TraceEvent {
                at_s,
                event: EventKind::Arrive,
                vm: Some(VmSpec {
                    id: id.clone(),
                    memory_mib: size.memory_mib,
                    vcpus: size.vcpus,
                    ..VmSpec::default()
                }),
                vm_id: None,
            },
        ));
        let departs = (t + lifetime).floor().min(MAX_AT_S as f64 + 1.0) as u64;
        events.push((
            departs,
            2 * n + 1,
            TraceEvent {
                at_s: departs,
                event: EventKind::Depart,
                vm: None,
                vm_id: Some(id),
            },
        ));
    }
    let horizon = params.duration_s.unwrap_or(last_arrival);
    events.retain(|(at, _, _)| *at <= horizon);
    events.sort_by_key(|(at, order, _)| (*at, *order));
    let mut trace = check_events(
        events.into_iter().map(|(_, _, e)| e).collect(),
        Some(params.seed),
    )
    .map_err(|e| bad("", format!("the generated trace is invalid (a bug): {e}")))?;
    trace.duration_s = horizon;
    Ok(trace)
}

/// An exponentially distributed draw with `rate` (per second).
fn exponential(rng: &mut ChaCha8Rng, rate: f64) -> f64 {
    let u: f64 = rng.random();
    -(1.0 - u).ln() / rate
}

/// The size whose cumulative weight first passes `pick`.
fn choose(sizes: &[VmSize], pick: f64) -> &VmSize {
    let mut sum = 0.0;
    for size in sizes {
        sum += size.weight;
        if pick < sum {
            return size;
        }
    }
    // Rounding may leave `pick` at the very total: the last size.
    &sizes[sizes.len() - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_names_one_trace() {
        let params = |seed| GenerateParams {
            seed,
            arrivals: 50,
            ..GenerateParams::default()
        };
        let a = generate(&params(7)).unwrap();
        assert_eq!(a, generate(&params(7)).unwrap());
        assert_ne!(a.events, generate(&params(8)).unwrap().events);
        assert_eq!(a.seed, Some(7));
        let arrivals = a
            .events
            .iter()
            .filter(|e| matches!(e, super::super::trace::Event::Arrive { .. }))
            .count();
        assert_eq!(arrivals, 50);
    }

    #[test]
    fn sizes_read_from_the_command_line() {
        let size: VmSize = "4096:2:3".parse().unwrap();
        assert_eq!((size.memory_mib, size.vcpus, size.weight), (4096.0, 2, 3.0));
        assert!("4096".parse::<VmSize>().is_err());
    }
}
