//! `Migration-Tsc-Frequency`: a running VM that keeps its TSC frequency
//! may migrate only to hosts with the same one.
//!
//! Behaviour from oVirt's `MigrationTscFrequencyPolicyUnit` (reference
//! notes §2.1):
//! * only a migration (the VM runs somewhere) of a VM using its TSC
//!   frequency (`useTscFrequency`) is constrained; a start is not;
//! * when the VM's current host reports no TSC frequency, every host
//!   passes;
//! * a host that can scale the TSC (`tsc-scaling`) passes;
//! * otherwise the host's frequency must be within libvirt's tolerance of
//!   the source's: `|dst − src| ≤ src × 250 / 1,000,000` (250 ppm, integer
//!   arithmetic as oVirt's `long`s); a host reporting none is rejected.
//!
//! The current host itself always matches. oVirt does not check the
//! `invtsc` flag here (`CPU-Level` does).
//!
//! Data: `tsc-frequency-hz`, `tsc-scaling`; VM `current-host`, hardware
//! `keeps_tsc_frequency`.

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::{flag, value};

/// libvirt's TSC tolerance, parts per million (half of NTP's threshold).
const TSC_TOLERANCE_PPM: i128 = 250;

/// The `Migration-Tsc-Frequency` filter.
pub struct MigrationTscFrequency;

impl Unit for MigrationTscFrequency {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "Migration-Tsc-Frequency",
            "Lets a running VM that keeps its TSC frequency migrate only to hosts with the \
             same TSC frequency (within 250 ppm) or with TSC scaling.",
        )
        .applies_to([RequestProperty::TscFrequency])
    }
}

/// A frequency in whole Hz (oVirt's integral part), `None` when unknown.
fn whole_hz(frequency: f64) -> Option<i128> {
    (frequency.is_finite() && frequency > 0.0).then(|| frequency.trunc() as i128)
}

impl Filter for MigrationTscFrequency {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let vm = cx.vm();
        let Some(source) = vm.current_host else {
            return rejections.into_vec();
        };
        if !vm.hardware.keeps_tsc_frequency {
            return rejections.into_vec();
        }
        let hosts = cx.hosts();
        let frequencies = hosts.metric(HostMetric::TscFrequencyHz);
        let Some(src) = whole_hz(value(frequencies, source)) else {
            return rejections.into_vec();
        };
        let scaling = hosts.flags(HostFlag::TscScaling);
        let tolerance = src * TSC_TOLERANCE_PPM / 1_000_000;
        // The host's frequency is the figure; the rest is the request's.
        let differs = format!(
            "TSC frequency {{}} Hz differs from the source host's {src} Hz by more than \
             {tolerance} Hz (250 ppm), and the host cannot scale it"
        );
        for &host in candidates {
            if flag(scaling, host) {
                continue;
            }
            match whole_hz(value(frequencies, host)) {
                Some(dst) if (dst - src).abs() <= tolerance => {}
                Some(dst) => {
                    rejections.reject_with(host, &differs, &[dst as f64]);
                }
                None => {
                    rejections.reject(
                        host,
                        "reports no TSC frequency and cannot scale it; the VM keeps its TSC \
                         frequency",
                    );
                }
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(MigrationTscFrequency: filter);
