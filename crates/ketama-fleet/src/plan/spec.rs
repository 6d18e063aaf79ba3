//! A rollout plan as written (`PLAN.toml`): stages of scopes, the shares
//! each steps through and how long each step holds, and the guards that
//! judge each step. [`PlanSpec::parse`] checks everything the text alone
//! can say, naming the line; [`PlanSpec::check_fleet`] what needs the
//! fleet (its scopes, its routers' report interval).

use serde::{Deserialize, Serialize};

pub use super::values::{parse_duration, PlanError};

/// What the controller does when guards fail `failures_to_rollback`
/// checks in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Every scope of the plan back to its share at plan start.
    Rollback,
    /// One step down, then paused.
    StepBack,
    /// Paused where it is.
    Pause,
}

/// One stage: the scopes it moves (`*`: every other scope and the global
/// share), the shares it steps through, how long each step holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stage {
    /// Scope names, or `["*"]`.
    pub scopes: Vec<String>,
    /// Basis points, strictly increasing.
    pub steps_bp: Vec<u32>,
    /// How long each step holds, milliseconds.
    pub hold_ms: u64,
    /// A manual gate: the plan pauses before this stage's first step until
    /// `ketama fleet plan approve`.
    #[serde(default)]
    pub approve: bool,
}

impl Stage {
    /// Whether this is the `*` stage.
    pub fn is_rest(&self) -> bool {
        self.scopes.iter().any(|s| s == "*")
    }
}

/// The guards, checked every `interval` over the reports of the routers
/// concerned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Guards {
    /// Between two checks, milliseconds.
    pub interval_ms: u64,
    /// After each step, checks start this late (moved keys are cold).
    pub warmup_ms: u64,
    /// The window before the first step the hit ratio is compared with.
    pub baseline_ms: u64,
    /// A check with fewer requests in the scope is inconclusive.
    pub min_requests: u64,
    /// The scope's hit ratio at most this far below its baseline.
    pub max_hit_ratio_drop: Option<f64>,
    /// Moved keys' hit ratio at most this far below the baseline.
    pub max_moved_hit_ratio_drop: Option<f64>,
    /// 5xx and router errors over all answers on the new ring, in the
    /// scope.
    pub max_error_ratio: Option<f64>,
    /// Origin contacts per second over every reporting router.
    pub max_origin_rps: Option<f64>,
    /// Consecutive failed checks that trigger `on_failure`.
    pub failures_to_rollback: u32,
    /// What they trigger.
    pub on_failure: OnFailure,
    /// Consecutive inconclusive checks that count as one failed check (so
    /// no plan waits forever on a scope without traffic).
    #[serde(default = "default_max_inconclusive")]
    pub max_inconclusive: u32,
    /// What the hit and error ratios are compared with.
    #[serde(default)]
    pub compare: CompareWith,
    /// The operator's own guards (`[[guards.metric]]`).
    #[serde(default)]
    pub metrics: Vec<super::metrics::MetricGuard>,
}

/// The default of `guards.max_inconclusive`.
pub const DEFAULT_MAX_INCONCLUSIVE: u32 = 10;

fn default_max_inconclusive() -> u32 {
    DEFAULT_MAX_INCONCLUSIVE
}

/// What a check compares the step's figures with (`guards.compare`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompareWith {
    /// The scope's hit ratio over a window measured before the first step.
    #[default]
    Baseline,
    /// The same interval: moved keys' hit ratio against unmoved keys',
    /// and the new ring's error ratio against the old ring's (no baseline
    /// window, immune to the drift between then and now).
    Concurrent,
}

/// Where a plan's events are sent (`[notify]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notify {
    /// A URL that gets one JSON POST per state change and failed check.
    pub webhook: String,
}

/// A validated plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanSpec {
    /// In order.
    pub stages: Vec<Stage>,
    /// The guards.
    pub guards: Guards,
    /// Where events are sent, when anywhere.
    #[serde(default)]
    pub notify: Option<Notify>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    #[serde(default)]
    stage: Vec<RawStage>,
    guards: Option<RawGuards>,
    notify: Option<RawNotify>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNotify {
    webhook: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStage {
    scopes: Vec<String>,
    steps_bp: Vec<u32>,
    hold: String,
    approve: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGuards {
    interval: Option<String>,
    warmup: Option<String>,
    baseline: Option<String>,
    min_requests: Option<u64>,
    max_hit_ratio_drop: Option<f64>,
    max_moved_hit_ratio_drop: Option<f64>,
    max_error_ratio: Option<f64>,
    max_origin_rps: Option<f64>,
    failures_to_rollback: Option<u32>,
    on_failure: Option<OnFailure>,
    max_inconclusive: Option<u32>,
    compare: Option<CompareWith>,
    metric: Option<Vec<super::metrics::RawMetric>>,
}

/// The line of `key` in the `index`-th `[[stage]]` (`stage` given) or in
/// `[guards]`, or of the table itself when the key is not written there.
fn line_of(text: &str, stage: Option<usize>, key: &str) -> usize {
    let mut table = None;
    let mut stages = 0;
    let mut table_line = 0;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if t.starts_with('[') {
            table = if t.starts_with("[[stage]]") {
                stages += 1;
                Some(Some(stages - 1))
            } else if t.starts_with("[guards]") {
                Some(None)
            } else {
                None
            };
            if table == Some(stage) {
                table_line = i + 1;
            }
            continue;
        }
        if table == Some(stage) {
            if let Some(rest) = t.strip_prefix(key) {
                if rest.trim_start().starts_with('=') {
                    return i + 1;
                }
            }
        }
    }
    table_line
}

/// The line of `key` in the table headed `header` (e.g. `[notify]`).
fn line_of_table(text: &str, header: &str, key: &str) -> usize {
    let mut inside = false;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if t.starts_with('[') {
            inside = t.starts_with(header);
        } else if inside
            && t.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with('='))
        {
            return i + 1;
        }
    }
    0
}

impl PlanSpec {
    /// Parses and checks a plan's text; errors name `file` and the line.
    pub fn parse(text: &str, file: &str) -> Result<PlanSpec, PlanError> {
        let err = |line: usize, message: String| PlanError {
            file: file.to_string(),
            line,
            message,
        };
        let raw: RawPlan = toml::from_str(text).map_err(|e| {
            // Newlines before the span's start, plus one: `lines()` would
            // miss the line when the span starts right after a newline.
            let line = e.span().map_or(0, |s| {
                text.as_bytes()[..s.start.min(text.len())]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count()
                    + 1
            });
            err(line, e.message().trim().replace('\n', "; "))
        })?;
        if raw.stage.is_empty() {
            return Err(err(
                0,
                "no [[stage]]: a plan moves at least one scope".into(),
            ));
        }
        let g = raw.guards.ok_or_else(|| {
            err(0, "no [guards]: say at least interval and one guard (max_hit_ratio_drop, max_error_ratio, max_origin_rps)".into())
        })?;
        let guards = parse_guards(g, text, file)?;
        let stages = parse_stages(&raw.stage, &guards, text, file)?;
        let notify = match raw.notify {
            Some(n) => {
                if !(n.webhook.starts_with("http://") || n.webhook.starts_with("https://")) {
                    return Err(err(
                        line_of_table(text, "[notify]", "webhook"),
                        format!(
                            "notify.webhook {:?} is not an http:// or https:// URL",
                            n.webhook
                        ),
                    ));
                }
                Some(Notify { webhook: n.webhook })
            }
            None => None,
        };
        Ok(PlanSpec {
            stages,
            guards,
            notify,
        })
    }

    /// With `--prometheus`: every named scope has cache counters there
    /// (`with_series`: the `scope` label values Prometheus holds).
    pub fn check_prometheus(
        &self,
        text: &str,
        file: &str,
        url: &str,
        with_series: &[String],
        scrape_ms: Option<u64>,
    ) -> Result<(), PlanError> {
        if let Some(every) = scrape_ms {
            if self.guards.interval_ms < 2 * every {
                return Err(PlanError {
                    file: file.to_string(),
                    line: line_of(text, None, "interval"),
                    message: format!("guards.interval ({} ms) is shorter than two of Prometheus' scrape intervals ({every} ms at {url}): increase() over it would hold at most one sample and every check would be inconclusive; make it at least {} ms", self.guards.interval_ms, 2 * every),
                });
            }
        }
        for (i, s) in self.stages.iter().enumerate() {
            for sc in s.scopes.iter().filter(|s| *s != "*") {
                if !with_series.contains(sc) {
                    return Err(PlanError {
                        file: file.to_string(),
                        line: line_of(text, Some(i), "scopes"),
                        message: format!("stage {}: Prometheus at {url} has no ketama_cache_responses_total series with scope=\"{sc}\": label each router's scrape target with its scope (labels: {{scope: {sc}}})", i + 1),
                    });
                }
            }
        }
        Ok(())
    }

    /// What the fleet must have for this plan: every named scope with a
    /// registered router, every router reporting, at most as often as the
    /// guards check. `registered` is each router's (scope, report
    /// interval in ms or `None` when it does not report).
    pub fn check_fleet(
        &self,
        text: &str,
        file: &str,
        registered: &[(Option<String>, Option<u64>)],
        needs_reports: bool,
    ) -> Result<(), PlanError> {
        let err = |line, message| PlanError {
            file: file.to_string(),
            line,
            message,
        };
        for (i, s) in self.stages.iter().enumerate() {
            for sc in s.scopes.iter().filter(|s| *s != "*") {
                if !registered.iter().any(|(r, _)| r.as_deref() == Some(sc)) {
                    return Err(err(
                        line_of(text, Some(i), "scopes"),
                        format!("stage {}: no router of scope {sc:?} is registered: fix the name, or start its routers first", i + 1),
                    ));
                }
            }
        }
        if !needs_reports {
            return Ok(());
        }
        if registered.iter().any(|(_, every)| every.is_none()) {
            return Err(err(
                line_of(text, None, ""),
                "the guards cannot be evaluated: some registered routers report no counters (upgrade them; their [control] report_interval_ms sends them)".into(),
            ));
        }
        if let Some(every) = registered.iter().filter_map(|(_, e)| *e).max() {
            if self.guards.interval_ms < every {
                return Err(err(
                    line_of(text, None, "interval"),
                    format!("guards.interval ({} ms) is shorter than the routers' report interval ({every} ms): a check would see no new figures", self.guards.interval_ms),
                ));
            }
        }
        Ok(())
    }
}

/// `[guards]`, each value checked, errors naming the line.
fn parse_guards(g: RawGuards, text: &str, file: &str) -> Result<Guards, PlanError> {
    let err = |line: usize, message: String| PlanError {
        file: file.to_string(),
        line,
        message,
    };
    let dur = |v: &Option<String>, key: &str, default: &str| -> Result<u64, PlanError> {
        let s = v.as_deref().unwrap_or(default);
        parse_duration(s)
            .map(|d| d.as_millis() as u64)
            .map_err(|m| err(line_of(text, None, key), format!("guards.{key}: {m}")))
    };
    let guards = Guards {
        interval_ms: dur(&g.interval, "interval", "30s")?,
        warmup_ms: dur(&g.warmup, "warmup", "2m")?,
        baseline_ms: dur(&g.baseline, "baseline", "10m")?,
        min_requests: g.min_requests.unwrap_or(1000),
        max_hit_ratio_drop: g.max_hit_ratio_drop,
        max_moved_hit_ratio_drop: g.max_moved_hit_ratio_drop,
        max_error_ratio: g.max_error_ratio,
        max_origin_rps: g.max_origin_rps,
        failures_to_rollback: g.failures_to_rollback.unwrap_or(3),
        on_failure: g.on_failure.unwrap_or(OnFailure::Rollback),
        max_inconclusive: g.max_inconclusive.unwrap_or(DEFAULT_MAX_INCONCLUSIVE),
        compare: g.compare.unwrap_or_default(),
        metrics: super::metrics::parse(g.metric.unwrap_or_default(), text, file)?,
    };
    if guards.max_inconclusive == 0 {
        return Err(err(
            line_of(text, None, "max_inconclusive"),
            "guards.max_inconclusive must be at least 1 (consecutive inconclusive checks that count as a failure)".into(),
        ));
    }
    if guards.interval_ms == 0 {
        return Err(err(
            line_of(text, None, "interval"),
            "guards.interval must be above 0".into(),
        ));
    }
    for (key, v) in [
        ("max_hit_ratio_drop", guards.max_hit_ratio_drop),
        ("max_moved_hit_ratio_drop", guards.max_moved_hit_ratio_drop),
        ("max_error_ratio", guards.max_error_ratio),
    ] {
        if v.is_some_and(|v| !(0.0..=1.0).contains(&v)) {
            return Err(err(
                line_of(text, None, key),
                format!("guards.{key} is a ratio: from 0 to 1 (0.05 is 5 points)"),
            ));
        }
    }
    if guards
        .max_origin_rps
        .is_some_and(|v| v.is_nan() || v <= 0.0)
    {
        return Err(err(
            line_of(text, None, "max_origin_rps"),
            "guards.max_origin_rps must be above 0 (origin requests per second)".into(),
        ));
    }
    if guards.max_hit_ratio_drop.is_none()
        && guards.max_moved_hit_ratio_drop.is_none()
        && guards.max_error_ratio.is_none()
        && guards.max_origin_rps.is_none()
        && guards.metrics.is_empty()
    {
        return Err(err(
            line_of(text, None, ""),
            "[guards] has no guard: set max_hit_ratio_drop, max_moved_hit_ratio_drop, max_error_ratio or max_origin_rps".into(),
        ));
    }
    if (guards.max_hit_ratio_drop.is_some() || guards.max_moved_hit_ratio_drop.is_some())
        && guards.compare == CompareWith::Baseline
        && guards.baseline_ms < guards.interval_ms
    {
        return Err(err(
            line_of(text, None, "baseline"),
            "guards.baseline must be at least one interval: the hit ratio is compared with it"
                .into(),
        ));
    }
    if guards.failures_to_rollback == 0 {
        return Err(err(
            line_of(text, None, "failures_to_rollback"),
            "guards.failures_to_rollback must be at least 1".into(),
        ));
    }
    Ok(guards)
}

/// The `[[stage]]`s, each checked against the guards' timing, errors
/// naming the line.
fn parse_stages(
    raw: &[RawStage],
    guards: &Guards,
    text: &str,
    file: &str,
) -> Result<Vec<Stage>, PlanError> {
    let err = |line: usize, message: String| PlanError {
        file: file.to_string(),
        line,
        message,
    };
    let mut stages = Vec::with_capacity(raw.len());
    let mut seen: Vec<&str> = Vec::new();
    let last = raw.len() - 1;
    for (i, s) in raw.iter().enumerate() {
        let at = |key| line_of(text, Some(i), key);
        if s.scopes.is_empty() {
            return Err(err(
                at("scopes"),
                format!(
                    "stage {}: scopes is empty: name the scopes it moves, or \"*\"",
                    i + 1
                ),
            ));
        }
        for sc in &s.scopes {
            if sc == "*" && (s.scopes.len() > 1 || i != last) {
                return Err(err(
                    at("scopes"),
                    format!(
                        "stage {}: \"*\" (every other scope) stands alone, in the last stage",
                        i + 1
                    ),
                ));
            }
            if sc.is_empty() || sc.contains(['/', ' ']) {
                return Err(err(
                    at("scopes"),
                    format!("stage {}: {sc:?} is not a scope name", i + 1),
                ));
            }
            if seen.contains(&sc.as_str()) {
                return Err(err(
                    at("scopes"),
                    format!(
                        "stage {}: scope {sc:?} is in an earlier stage: a scope moves in one stage",
                        i + 1
                    ),
                ));
            }
            seen.push(sc);
        }
        if s.steps_bp.is_empty() {
            return Err(err(
                at("steps_bp"),
                format!(
                    "stage {}: steps_bp is empty: give the shares to step through, in basis points",
                    i + 1
                ),
            ));
        }
        for w in s.steps_bp.windows(2) {
            if w[1] <= w[0] {
                return Err(err(at("steps_bp"), format!("stage {}: steps go up only: {} after {} (a plan never steps down by itself)", i + 1, w[1], w[0])));
            }
        }
        if let Some(&bp) = s.steps_bp.iter().find(|&&b| b == 0 || b > 10_000) {
            return Err(err(
                at("steps_bp"),
                format!(
                    "stage {}: {bp} is not a share: from 1 to 10000 basis points",
                    i + 1
                ),
            ));
        }
        let hold = parse_duration(&s.hold)
            .map_err(|m| err(at("hold"), format!("stage {}: hold: {m}", i + 1)))?
            .as_millis() as u64;
        let least = guards.warmup_ms + 2 * guards.interval_ms;
        if hold < least {
            return Err(err(at("hold"), format!("stage {}: hold {} is shorter than warmup plus two intervals ({} ms): no step could be judged", i + 1, s.hold, least)));
        }
        stages.push(Stage {
            scopes: s.scopes.clone(),
            steps_bp: s.steps_bp.clone(),
            hold_ms: hold,
            approve: s.approve.unwrap_or(false),
        });
    }
    Ok(stages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const GUARDS: &str = "[guards]\ninterval = \"30s\"\nwarmup = \"2m\"\nmax_error_ratio = 0.01\n";

    fn err(text: &str) -> String {
        PlanSpec::parse(text, "p.toml").unwrap_err().to_string()
    }

    #[test]
    fn durations_need_their_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("30").unwrap_err().contains("no unit"));
        assert!(parse_duration("3d").unwrap_err().contains("not a unit"));
    }

    #[test]
    fn refusals_name_the_line() {
        let stage = |scopes: &str, steps: &str, hold: &str| {
            format!("[[stage]]\nscopes = {scopes}\nsteps_bp = {steps}\nhold = \"{hold}\"\n")
        };
        let a = stage("[\"*\"]", "[100]", "10m");
        let b = stage("[\"ams\"]", "[100]", "10m");
        assert!(err(&format!("{a}{b}{GUARDS}")).starts_with("p.toml:2: stage 1: \"*\""));
        assert!(err(&format!("{b}{b}{GUARDS}"))
            .starts_with("p.toml:6: stage 2: scope \"ams\" is in an earlier stage"));
        assert!(
            err(&format!("{}{GUARDS}", stage("[\"ams\"]", "[0]", "10m")))
                .starts_with("p.toml:3: stage 1: 0 is not a share")
        );
        assert!(
            err(&format!("{}{GUARDS}", stage("[\"ams\"]", "[100]", "1x")))
                .starts_with("p.toml:4: stage 1: hold")
        );
        assert!(err(&format!("{b}[guards]\nmax_error_ratio = 2.0\n"))
            .starts_with("p.toml:6: guards.max_error_ratio is a ratio"));
        assert!(
            err(&format!("{b}[guards]\nmax_error_ratio = 0.1\nfoo = 1\n"))
                .starts_with("p.toml:7: unknown field `foo`")
        );
        // A misspelt key on the first line of its table, and on the last
        // of the file, is named on its own line.
        assert!(err(&format!("{b}[guards]\nmax_hit_ratio_dorp = 0.1\n"))
            .starts_with("p.toml:6: unknown field `max_hit_ratio_dorp`"));
        assert!(
            err(&format!("{b}[guards]\nmax_error_ratio = 0.1\nsteps = 1"))
                .starts_with("p.toml:7: unknown field `steps`")
        );
        assert!(err(&b).contains("no [guards]"));
        let ok = PlanSpec::parse(&format!("{b}{GUARDS}"), "p.toml").unwrap();
        assert_eq!(ok.stages[0].hold_ms, 600_000);
        assert_eq!(ok.guards.on_failure, OnFailure::Rollback);
    }
}
