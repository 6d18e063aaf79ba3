//! The smallest point multiple that meets a balance target.

use super::shares::{analyze, predicted_cv};

/// What [`recommend`] aims for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    /// The CV may be at most this.
    MaxCv(f64),
    /// The CV may exceed the one measured at the current multiple by at
    /// most this (absolute).
    MaxExtraError(f64),
}

/// The answer of [`recommend`].
#[derive(Clone, Debug, PartialEq)]
pub struct Recommendation {
    /// The smallest point multiple whose predicted CV meets the target and
    /// whose built ring confirms it.
    pub point_multiple: u32,
    /// The CV the target allows.
    pub target_cv: f64,
    /// Predicted CV at the recommended multiple.
    pub predicted_cv: f64,
    /// CV measured on the ring built at the recommended multiple.
    pub measured_cv: f64,
    /// CV measured at the current multiple.
    pub current_measured_cv: f64,
    /// Whether the ring at the current multiple already meets the target
    /// (then the recommendation is never above the current multiple).
    pub current_meets_target: bool,
    /// Multiples tried after the prediction, with their measured CVs, when
    /// the measurement missed the target.
    pub stepped: Vec<(u32, f64)>,
    /// Per layout: (layout, heap bytes of the points at the current
    /// multiple, at the recommended one).
    pub memory: Vec<(crate::Layout, usize, usize)>,
}

/// Finds the smallest point multiple for `nodes` whose predicted CV meets
/// `target` (binary search: the prediction falls as the multiple grows),
/// then builds that ring and measures it, stepping the multiple up by an
/// eighth at a time while the measurement misses. `settings` gives the
/// scheme and the current multiple.
///
/// A recommendation never costs more memory than the current multiple
/// when the ring built at the current multiple already meets the target:
/// the measured CV is what the ring has, whatever the prediction says, so
/// then the answer is the current multiple (or a smaller one found by the
/// search and confirmed by measurement), and `current_meets_target` says
/// so. Memory is measured on rings built in every layout at both
/// multiples.
pub fn recommend(
    nodes: &[crate::Node],
    settings: crate::RingSettings,
    target: Target,
) -> crate::Result<Recommendation> {
    let weights: Vec<u32> = nodes
        .iter()
        .filter(|n| !n.is_down())
        .map(|n| n.weight())
        .collect();
    let total_weight: u64 = weights.iter().map(|&w| w as u64).sum::<u64>().max(1);
    let max_multiple = (crate::MAX_POINTS / total_weight).min(u32::MAX as u64) as u32;
    let measure = |m: u32| -> crate::Result<f64> {
        let ring = crate::RingBuilder::from(settings)
            .point_multiple(m)
            .layout(crate::Layout::Wide)
            .build(nodes.to_vec())?;
        Ok(analyze(&ring).measured_cv)
    };
    let current = settings.point_multiple;
    let current_measured_cv = measure(current)?;
    let target_cv = match target {
        Target::MaxCv(x) => x,
        Target::MaxExtraError(x) => current_measured_cv + x,
    };
    if target_cv.is_nan() || target_cv <= 0.0 || max_multiple == 0 {
        return Err(crate::Error::UnreachableTarget {
            target_cv,
            best_cv: predicted_cv(&weights, max_multiple.max(1)),
            max_multiple,
        });
    }
    let current_meets_target = current_measured_cv <= target_cv;
    if !current_meets_target && predicted_cv(&weights, max_multiple) > target_cv {
        return Err(crate::Error::UnreachableTarget {
            target_cv,
            best_cv: predicted_cv(&weights, max_multiple),
            max_multiple,
        });
    }
    let (mut lo, mut hi) = (1u32, max_multiple);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if predicted_cv(&weights, mid) <= target_cv {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let mut m = lo;
    let mut stepped = Vec::new();
    let mut measured = if current_meets_target && m >= current {
        current_measured_cv
    } else {
        measure(m)?
    };
    if current_meets_target && (m >= current || measured > target_cv) {
        // The ring as built already meets the target: more points would
        // only cost memory.
        m = current;
        measured = current_measured_cv;
    }
    while measured > target_cv && m < max_multiple {
        m = m.saturating_add((m / 8).max(1)).min(max_multiple);
        measured = measure(m)?;
        stepped.push((m, measured));
    }
    let now = layout_memory(nodes, settings.point_multiple, settings);
    let then = layout_memory(nodes, m, settings);
    let memory = now
        .into_iter()
        .zip(then)
        .map(|((layout, a), (_, b))| (layout, a.unwrap_or(0), b.unwrap_or(0)))
        .collect();
    Ok(Recommendation {
        point_multiple: m,
        target_cv,
        predicted_cv: predicted_cv(&weights, m),
        measured_cv: measured,
        current_measured_cv,
        current_meets_target,
        stepped,
        memory,
    })
}

/// Heap bytes of the points of `nodes` at `point_multiple` in every layout
/// (`None` where a layout cannot hold the ring), measured on rings built
/// with `settings`' scheme. Builds one ring per layout, one at a time.
pub fn layout_memory(
    nodes: &[crate::Node],
    point_multiple: u32,
    settings: crate::RingSettings,
) -> Vec<(crate::Layout, Option<usize>)> {
    crate::Layout::ALL
        .iter()
        .map(|&layout| {
            let bytes = crate::RingBuilder::from(settings)
                .point_multiple(point_multiple)
                .layout(layout)
                .build(nodes.to_vec())
                .ok()
                .map(|r| r.points_heap_bytes());
            (layout, bytes)
        })
        .collect()
}
