//! The fewest rollout steps that keep the origin under a cap: schedules
//! from a fixed ladder of shares, tried fewest steps first, each run from
//! one shared warm-up (a clone of its caches) and abandoned as soon as a
//! window passes the cap.
//!
//! Cost: up to 64 schedules (2^6 subsets of the ladder, each ending at
//! 10,000 bp), each the requests after the warm-up at most, spread over
//! `threads`; the warm-up is served once. Memory: one set of caches per
//! thread beside the warm one.

use super::{ScheduleStarted, SimRequest, Simulation};

/// The shares, in basis points, a schedule may step through before
/// 10,000: 1, 2, 5, 10, 25 and 50%.
pub const LADDER_BP: [u32; 6] = [100, 200, 500, 1000, 2500, 5000];

/// A schedule that keeps the origin under the cap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Its steps, basis points, ending at 10,000.
    pub steps_bp: Vec<u32>,
    /// Its peak window's origin fetches.
    pub peak: u64,
}

/// Why no schedule was found.
#[derive(Clone, Debug, PartialEq)]
pub enum ScheduleError {
    /// The warm-up's last window had no origin fetch (or there was no full
    /// window): there is nothing to multiply.
    NoSteadyState,
    /// Every schedule of the ladder passed the cap.
    NoneUnderCap {
        /// The factor asked for.
        factor: f64,
        /// The steady state's origin fetches a window.
        steady: u64,
    },
    /// The simulation given was past its warm-up.
    Started(ScheduleStarted),
}

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleError::NoSteadyState => write!(
                f,
                "no steady state to cap against: give a warm-up of at least one window, long enough for the warm caches to still miss"
            ),
            ScheduleError::NoneUnderCap { factor, steady } => write!(
                f,
                "no schedule of the ladder keeps the peak under {factor} x the steady state ({steady} origin fetches a window) at this step length: allow more, or give each step more requests"
            ),
            ScheduleError::Started(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ScheduleError {}

/// The fewest steps from [`LADDER_BP`] (then 10,000) whose peak window
/// stays at most `factor` times the steady state (the warm-up's last
/// window), ties going to the lowest peak. `warm` must have served its
/// warm-up exactly; `rest` yields the requests after it, afresh on each
/// call.
pub fn fewest_steps<F, I>(
    warm: &Simulation<'_>,
    rest: F,
    factor: f64,
    threads: usize,
) -> Result<Schedule, ScheduleError>
where
    F: Fn() -> I + Sync,
    I: Iterator,
    I::Item: SimRequest,
{
    let (served, warmup) = (warm.served(), warm.settings().warmup);
    if served != warmup {
        return Err(ScheduleError::Started(ScheduleStarted { served, warmup }));
    }
    let steady = match warm.steady_window() {
        Some(s) if s > 0 => s,
        _ => return Err(ScheduleError::NoSteadyState),
    };
    let cap = factor * steady as f64;
    let window = warm.settings().window.max(1);
    // A schedule's peak, or None once a window passes the cap.
    let run = |steps_bp: Vec<u32>| -> Result<Option<Schedule>, ScheduleError> {
        let mut sim = warm
            .clone()
            .with_schedule(steps_bp.clone())
            .map_err(ScheduleError::Started)?;
        for (i, r) in rest().enumerate() {
            sim.serve_request(&r);
            if (i as u64 + 1) % window == 0 && sim.peak() as f64 > cap {
                return Ok(None);
            }
        }
        let peak = sim.peak();
        Ok((peak as f64 <= cap).then_some(Schedule { steps_bp, peak }))
    };
    let threads = threads.max(1);
    for k in 0..=LADDER_BP.len() {
        let candidates: Vec<Vec<u32>> = (0u32..1 << LADDER_BP.len())
            .filter(|mask| mask.count_ones() as usize == k)
            .map(|mask| {
                let mut steps: Vec<u32> = (0..LADDER_BP.len())
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| LADDER_BP[i])
                    .collect();
                steps.push(10_000);
                steps
            })
            .collect();
        let found: Vec<Result<Option<Schedule>, ScheduleError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads.min(candidates.len()))
                .map(|t| {
                    let (run, candidates) = (&run, &candidates);
                    scope.spawn(move || {
                        candidates
                            .iter()
                            .skip(t)
                            .step_by(threads)
                            .map(|c| run(c.clone()))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        let mut best: Option<Schedule> = None;
        for f in found {
            if let Some(s) = f? {
                let better = best
                    .as_ref()
                    .is_none_or(|b| (s.peak, &s.steps_bp) < (b.peak, &b.steps_bp));
                if better {
                    best = Some(s);
                }
            }
        }
        if let Some(b) = best {
            return Ok(b);
        }
    }
    Err(ScheduleError::NoneUnderCap { factor, steady })
}
