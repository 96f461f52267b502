//! The summary of a comparison of sync policies: one row per policy, computed from the runs'
//! traces (`ember compare` prints and plots them).
//!
//! ```
//! use ember_trainer::summary::{PolicyRun, summarize};
//! use ember_trainer::policy::PolicyKind;
//! use ember_trainer::trace::Trace;
//! let runs = vec![PolicyRun { policy: PolicyKind::NoSync, round: 0, trace: Trace::default() }];
//! assert!(summarize(&runs).is_empty(), "a run without epochs has nothing to summarize");
//! ```

use serde::Serialize;

use crate::policy::PolicyKind;
use crate::trace::Trace;

/// The trace of one run of one policy.
#[derive(Debug, Clone)]
pub struct PolicyRun {
    /// The policy.
    pub policy: PolicyKind,
    /// Which round of the comparison, from 0.
    pub round: usize,
    /// What the run recorded.
    pub trace: Trace,
}

/// One policy, over all its runs and epochs: medians, except peaks, which are maxima.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicySummary {
    /// The policy.
    pub policy: PolicyKind,
    /// Epochs measured, over all rounds.
    pub epochs: usize,
    /// Median time per epoch, in seconds.
    pub time_per_epoch: f64,
    /// Median frontend issue time per epoch, in seconds.
    pub issue_time: f64,
    /// Median increased memory (RSS after the epoch minus before), in MB.
    pub increased_mb: f64,
    /// Highest RSS growth seen in any epoch, in MB.
    pub peak_growth_mb: f64,
    /// Highest device pool in use, in MB (empty on CPU backends).
    pub peak_pool_mb: Option<f64>,
    /// Loss of the last batch of the last epoch of the last round.
    pub final_loss: f32,
    /// Batches per epoch divided by the median time per epoch.
    pub batches_per_s: f64,
    /// The policy whose throughput [`PolicySummary::relative_throughput`] divides by: `none`
    /// where it was compared, the first policy otherwise.
    pub reference: PolicyKind,
    /// This policy's throughput (batches over seconds, all epochs of a run) divided by the
    /// reference's in the same round, the median over the rounds that ran both (NaN where none
    /// did). A round's runs follow each other, so a change in the machine's speed between
    /// rounds, which moves all of a round's runs alike, cancels here, where it does not in the
    /// medians of the epochs' times.
    pub relative_throughput: f64,
}

/// The median of `values` (NaN when empty).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => 0.5 * (values[n / 2 - 1] + values[n / 2]),
    }
}

/// Batches over seconds, all of a run's epochs together (NaN for a run that timed nothing).
fn throughput(run: &PolicyRun) -> f64 {
    let batches: usize = run.trace.epochs.iter().map(|e| e.batches).sum();
    let time: f64 = run.trace.epochs.iter().map(|e| e.time).sum();
    if time > 0.0 {
        batches as f64 / time
    } else {
        f64::NAN
    }
}

/// `policy`'s throughput over `reference`'s, round by round; the median over the rounds that
/// ran both.
fn relative_throughput(runs: &[PolicyRun], policy: &PolicyKind, reference: &PolicyKind) -> f64 {
    let ratios = runs
        .iter()
        .filter(|r| &r.policy == policy)
        .filter_map(|mine| {
            let theirs = runs
                .iter()
                .find(|r| &r.policy == reference && r.round == mine.round)?;
            Some(throughput(mine) / throughput(theirs))
        })
        .filter(|ratio| ratio.is_finite())
        .collect();
    median(ratios)
}

/// One summary per policy, in the order the policies first appear in `runs`.
pub fn summarize(runs: &[PolicyRun]) -> Vec<PolicySummary> {
    let mut order: Vec<&PolicyKind> = Vec::new();
    for run in runs {
        if !order.contains(&&run.policy) {
            order.push(&run.policy);
        }
    }
    let Some(reference) = order
        .iter()
        .find(|p| ***p == PolicyKind::NoSync)
        .or(order.first())
        .map(|p| (*p).clone())
    else {
        return Vec::new();
    };
    order
        .into_iter()
        .filter_map(|policy| {
            let mine: Vec<&PolicyRun> = runs.iter().filter(|r| &r.policy == policy).collect();
            let epochs: Vec<_> = mine.iter().flat_map(|r| &r.trace.epochs).collect();
            if epochs.is_empty() {
                return None;
            }
            let time = median(epochs.iter().map(|e| e.time).collect());
            let batches = median(epochs.iter().map(|e| e.batches as f64).collect());
            let pools: Vec<f64> = epochs.iter().filter_map(|e| e.peak_pool_mb).collect();
            let last_run = mine
                .iter()
                .max_by_key(|r| r.round)
                .expect("one run at least");
            Some(PolicySummary {
                policy: policy.clone(),
                epochs: epochs.len(),
                time_per_epoch: time,
                issue_time: median(epochs.iter().map(|e| e.issue_time).collect()),
                increased_mb: median(epochs.iter().map(|e| e.increased_mb).collect()),
                peak_growth_mb: epochs
                    .iter()
                    .map(|e| e.peak_growth_mb)
                    .fold(f64::MIN, f64::max),
                peak_pool_mb: pools.into_iter().reduce(f64::max),
                final_loss: last_run.trace.batches.last().map_or(f32::NAN, |b| b.loss),
                batches_per_s: batches / time,
                relative_throughput: relative_throughput(runs, policy, &reference),
                reference: reference.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::EpochRecord;

    fn epoch(policy: &str, time: f64, peak: f64) -> EpochRecord {
        EpochRecord {
            policy: PolicyKind::from_name(policy),
            epoch: 0,
            batches: 10,
            time,
            issue_time: time / 2.0,
            rss_before: 0,
            increased_mb: 1.0,
            peak_growth_mb: peak,
            peak_pool_mb: None,
            mean_loss: 0.5,
            max_depth: 1,
            device_time: Vec::new(),
            allreduce_time: None,
            allreduce_mb: None,
            recording_mb: None,
            lr_scale: None,
            metrics: Default::default(),
        }
    }

    #[test]
    fn summaries_take_medians_and_peak_maxima_per_policy() {
        let run = |policy: &str, round, time, peak| PolicyRun {
            policy: PolicyKind::from_name(policy),
            round,
            trace: Trace {
                batches: vec![],
                epochs: vec![epoch(policy, time, peak)],
            },
        };
        let runs = vec![
            run("none", 0, 2.0, 50.0),
            run("barrier", 0, 4.0, 1.0),
            run("none", 1, 3.0, 70.0),
            run("none", 2, 10.0, 60.0),
        ];
        let s = summarize(&runs);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].policy, PolicyKind::NoSync);
        assert_eq!(s[0].time_per_epoch, 3.0);
        assert_eq!(s[0].peak_growth_mb, 70.0);
        assert_eq!(s[0].epochs, 3);
        assert!((s[0].batches_per_s - 10.0 / 3.0).abs() < 1e-12);
        assert_eq!(s[1].time_per_epoch, 4.0);
    }

    /// The machine slows down for barrier's run in round 1 and for both runs of round 2: the
    /// medians of the epochs' times call barrier half as fast as none, the rounds' ratios a
    /// tenth slower, which is what rounds 0 and 2 measured.
    #[test]
    fn relative_throughput_divides_round_by_round_by_none() {
        let run = |policy: &str, round, time| PolicyRun {
            policy: PolicyKind::from_name(policy),
            round,
            trace: Trace {
                batches: vec![],
                epochs: vec![epoch(policy, time, 1.0), epoch(policy, time, 1.0)],
            },
        };
        let runs = vec![
            run("barrier", 0, 2.2),
            run("none", 0, 2.0),
            run("barrier", 1, 4.4),
            run("none", 1, 2.0),
            run("barrier", 2, 4.4),
            run("none", 2, 4.0),
            run("t+2", 5, 1.0),
        ];
        let s = summarize(&runs);
        assert!(s.iter().all(|s| s.reference == PolicyKind::NoSync));
        let pooled = s[1].time_per_epoch / s[0].time_per_epoch;
        assert!((pooled - 2.0 / 4.4).abs() < 1e-12, "{pooled}");
        assert!(
            (s[0].relative_throughput - 2.0 / 2.2).abs() < 1e-12,
            "{s:?}"
        );
        assert_eq!(s[1].relative_throughput, 1.0);
        assert!(
            s[2].relative_throughput.is_nan(),
            "no round ran t+2 and none"
        );
        // Without none, the first policy is the reference.
        let s = summarize(&runs[..1]);
        assert_eq!(
            (s[0].reference.clone(), s[0].relative_throughput),
            (PolicyKind::from_name("barrier"), 1.0)
        );
    }
}
