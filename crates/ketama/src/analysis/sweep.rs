//! Sweeps: the CV of equal servers measured over random server sets.

use super::shares::{analyze, mean_sd, predicted_cv_equal};

/// One point of a sweep: the CV of `n` equal nodes at `points_per_node`,
/// predicted and measured over several random node sets.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepRow {
    /// Points per node (weight 1 x this point multiple).
    pub points_per_node: u32,
    /// `sqrt((n - 1) / (n k + 1))`.
    pub predicted_cv: f64,
    /// Mean measured CV over the trials.
    pub measured_cv_mean: f64,
    /// Standard deviation of the measured CV over the trials.
    pub measured_cv_sd: f64,
    /// Smallest measured CV.
    pub measured_cv_min: f64,
    /// Largest measured CV.
    pub measured_cv_max: f64,
    /// Mean number of points lost to collisions per trial.
    pub collisions_mean: f64,
}

/// Measures one sweep step: `trials` rings of `n` synthetic servers (see
/// [`crate::synthetic::seeded`], seeds `seed`, `seed + 1`, ...) at
/// `points_per_node`, built with `settings`' scheme in the wide layout.
/// Memory: one ring at a time, 8 bytes a point (plus 4 while building).
pub fn sweep_step(
    n: usize,
    points_per_node: u32,
    trials: u32,
    seed: u64,
    settings: crate::RingSettings,
    mut on_trial: impl FnMut(),
) -> crate::Result<SweepRow> {
    let mut cvs = Vec::with_capacity(trials as usize);
    let mut collisions = 0u64;
    for t in 0..trials {
        let nodes = crate::synthetic::seeded(n, seed.wrapping_add(t as u64))
            .into_iter()
            .map(|s| crate::Node::new(s, 1))
            .collect();
        let ring = crate::RingBuilder::from(settings)
            .layout(crate::Layout::Wide)
            .point_multiple(points_per_node)
            .build(nodes)?;
        let a = analyze(&ring);
        cvs.push(a.measured_cv);
        collisions += a.generated_points - a.points;
        on_trial();
    }
    let (mean, sd) = mean_sd(&cvs);
    Ok(SweepRow {
        points_per_node,
        predicted_cv: predicted_cv_equal(n as u64, points_per_node as u64),
        measured_cv_mean: mean,
        measured_cv_sd: sd,
        measured_cv_min: cvs.iter().copied().fold(f64::INFINITY, f64::min),
        measured_cv_max: cvs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        collisions_mean: collisions as f64 / trials.max(1) as f64,
    })
}
