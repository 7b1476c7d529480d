//! Size caps on what a unit returns. The pipeline checks what an answer
//! means (indices are candidates, scores are finite); here we only make
//! sure an answer is small enough to keep, log and explain.

use sandpiper_model::{Migration, Rejection, Scores};

/// Longest rejection reason, in bytes. Reasons are short sentences ("needs
/// 4096 MiB, 1024 MiB free") shown to operators and kept in explain
/// records; 1 KiB is several lines of text.
pub const MAX_REASON_BYTES: usize = 1024;

/// Answer bytes any call may return, counted as reason bytes plus 16 per
/// rejection, 4 per host index and 8 per score or figure: room for a few
/// dozen reasons whatever the candidate count.
pub const OUTPUT_BASE_BYTES: usize = 64 << 10;

/// Answer bytes allowed per candidate host: its index or score plus a
/// reason of its own of ~250 bytes, as a filter giving every host its own
/// sentence ("needs 4096 MiB, 1024 MiB free") needs. 10k candidates allow
/// ~2.5 MiB; an answer listing a million hosts for ten candidates is cut.
pub const OUTPUT_BYTES_PER_CANDIDATE: usize = 256;

/// The largest answer a call over `candidates` hosts may give.
pub fn max_output_bytes(candidates: usize) -> usize {
    OUTPUT_BASE_BYTES.saturating_add(OUTPUT_BYTES_PER_CANDIDATE.saturating_mul(candidates))
}

/// Bytes wasmtime may copy out of a unit in one transfer (its "hostcall
/// fuel"). The canonical ABI lets a unit return many list entries that all
/// point at one large string; each entry is copied, so without this bound a
/// unit holding 1 MiB could make the host allocate gigabytes. 64 MiB is the
/// default memory limit: an honest answer cannot be larger than the memory
/// holding it, so the output caps below see every honest answer first.
pub const MAX_TRANSFER_BYTES: usize = 64 << 20;

/// Canonical-ABI size of one rejection record (a string and a list), which
/// an answer costs even with an empty reason and no hosts.
const REJECTION_RECORD_BYTES: usize = 16;

fn check_size(bytes: usize, candidates: usize) -> Result<(), String> {
    let limit = max_output_bytes(candidates);
    if bytes > limit {
        return Err(format!(
            "the answer is {bytes} bytes, more than the {limit} allowed for {candidates} candidates"
        ));
    }
    Ok(())
}

/// Caps a filter's answer.
pub(crate) fn check_rejections(rejections: &[Rejection], candidates: usize) -> Result<(), String> {
    let mut bytes = 0usize;
    for rejection in rejections {
        if rejection.reason.len() > MAX_REASON_BYTES {
            return Err(format!(
                "a rejection reason is {} bytes long, more than {MAX_REASON_BYTES}",
                rejection.reason.len()
            ));
        }
        bytes = bytes
            .saturating_add(REJECTION_RECORD_BYTES)
            .saturating_add(rejection.reason.len())
            .saturating_add(rejection.hosts.len().saturating_mul(4))
            .saturating_add(rejection.figures.len().saturating_mul(8));
    }
    check_size(bytes, candidates)
}

/// Caps a score unit's answer.
pub(crate) fn check_scores(scores: &Scores, candidates: usize) -> Result<(), String> {
    check_size(scores.values.len().saturating_mul(8), candidates)
}

/// Caps a balance unit's answer.
pub(crate) fn check_migration(
    migration: &Option<Migration>,
    candidates: usize,
) -> Result<(), String> {
    let bytes = migration
        .as_ref()
        .map_or(0, |m| m.destinations.len().saturating_mul(4));
    check_size(bytes, candidates)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejection(reason: &str, hosts: Vec<u32>) -> Rejection {
        Rejection::new(reason.to_owned(), hosts)
    }

    #[test]
    fn long_reasons_and_huge_answers_are_refused() {
        assert!(check_rejections(&[rejection("not up", vec![1, 2, 3])], 3).is_ok());
        let long = rejection(&"x".repeat(MAX_REASON_BYTES + 1), vec![1]);
        assert!(check_rejections(&[long], 1).is_err());
        let many = vec![rejection("", Vec::new()); OUTPUT_BASE_BYTES / REJECTION_RECORD_BYTES + 1];
        assert!(check_rejections(&many, 0).is_err());
        let huge = rejection("huge", vec![0; 1 << 20]);
        assert!(check_rejections(&[huge], 10).is_err());
        assert!(check_scores(&Scores::new(vec![0.0; 1 << 20]), 10).is_err());
    }

    #[test]
    fn the_cap_grows_with_candidates() {
        // Every one of 100k hosts rejected with its own 200-byte reason fits.
        let hosts = 100_000;
        let each: Vec<Rejection> = (0..hosts)
            .map(|h| rejection(&"r".repeat(200), vec![h]))
            .collect();
        assert!(check_rejections(&each, hosts as usize).is_ok());
        assert!(check_scores(&Scores::new(vec![0.0; hosts as usize]), hosts as usize).is_ok());
    }
}
