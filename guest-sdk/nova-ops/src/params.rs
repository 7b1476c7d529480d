//! Parameters several Nova units share, declared once so that every unit
//! reading a key declares the same default, pattern and meaning.
//!
//! Keys are Nova's configuration option names (`ram_allocation_ratio`,
//! `max_io_ops_per_host`), so operators coming from Nova recognise them;
//! options of Nova's `[metrics]` section get a `metrics_` prefix because
//! our keys have no sections. A policy or cluster value for a key reaches
//! every unit that declares it.

use sandpiper_guest::model::ParamSpec;

/// A parameter declaration shared by several units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: &'static str,
    pub description: &'static str,
    pub default: &'static str,
    pub pattern: &'static str,
}

impl Param {
    /// The declaration for a unit's `info()`.
    pub fn spec(&self) -> ParamSpec {
        ParamSpec::new(self.name, self.description, self.default, self.pattern)
    }
}

/// A non-negative decimal number (allocation ratios).
const RATIO_PATTERN: &str = "^[0-9]+(\\.[0-9]+)?$";
/// A non-negative whole number (per-host maxima).
const COUNT_PATTERN: &str = "^[0-9]+$";
/// `true` or `false`.
const BOOL_PATTERN: &str = "^(true|false)$";

/// Nova's `ram_allocation_ratio`. Default 1.0, Nova's
/// `initial_ram_allocation_ratio` since Stein (the legacy RamFilter era
/// defaulted to 1.5).
pub const RAM_ALLOCATION_RATIO: Param = Param {
    name: "ram_allocation_ratio",
    description: "Virtual RAM a host may hand out per MiB of physical RAM (Nova's \
        ram_allocation_ratio).",
    default: "1.0",
    pattern: RATIO_PATTERN,
};

/// Nova's `cpu_allocation_ratio`. Default 4.0, Nova's
/// `initial_cpu_allocation_ratio` (the legacy CoreFilter era defaulted to
/// 16.0).
pub const CPU_ALLOCATION_RATIO: Param = Param {
    name: "cpu_allocation_ratio",
    description: "vCPUs a host may hand out per logical CPU (Nova's cpu_allocation_ratio).",
    default: "4.0",
    pattern: RATIO_PATTERN,
};

/// Nova's `disk_allocation_ratio`, default 1.0.
pub const DISK_ALLOCATION_RATIO: Param = Param {
    name: "disk_allocation_ratio",
    description: "Virtual disk a host may hand out per GiB of local disk (Nova's \
        disk_allocation_ratio).",
    default: "1.0",
    pattern: RATIO_PATTERN,
};

/// Nova's `[filter_scheduler] max_io_ops_per_host`, default 8.
pub const MAX_IO_OPS_PER_HOST: Param = Param {
    name: "max_io_ops_per_host",
    description: "A host with this many instances building, resizing or migrating takes no more \
        (Nova's max_io_ops_per_host).",
    default: "8",
    pattern: COUNT_PATTERN,
};

/// Nova's `[filter_scheduler] max_instances_per_host`, default 50.
pub const MAX_INSTANCES_PER_HOST: Param = Param {
    name: "max_instances_per_host",
    description: "A host with this many instances takes no more (Nova's max_instances_per_host).",
    default: "50",
    pattern: COUNT_PATTERN,
};

/// Nova's `[metrics] weight_setting`, default empty.
pub const METRICS_WEIGHT_SETTING: Param = Param {
    name: "metrics_weight_setting",
    description: "Metrics to weigh and their ratios, `name=ratio` comma separated (Nova's \
        [metrics] weight_setting).",
    default: "",
    pattern: "^[^\\n]*$",
};

/// Whether a weigher prefers the other end: the sign of Nova's multiplier.
pub const REVERSE: Param = Param {
    name: "reverse",
    description: "Prefer the other end, as a Nova weight multiplier of the opposite sign does \
        (RAM, CPU, disk: stack instead of spread).",
    default: "false",
    pattern: BOOL_PATTERN,
};
