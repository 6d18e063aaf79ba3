//! `ketama fleet plan`: run a rollout plan's controller, and read or steer
//! it through etcd (`ketama_fleet::plan` does the work).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use ketama_fleet::etcd::{Client, Compare};
use ketama_fleet::plan::controller::{self, Controller, Outcome};
use ketama_fleet::plan::transition::{apply, Applied, Command, Event};
use ketama_fleet::plan::{Phase, PlanSpec, PlanState, Status};
use ketama_fleet::Keys;

use crate::fleet_etcd::{client, EtcdArgs};

/// `ketama fleet plan ...`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    #[command(subcommand)]
    command: PlanCommand,
}

#[derive(Subcommand, Debug)]
enum PlanCommand {
    /// Store PLAN.toml as the fleet's active plan and run its controller
    /// until the plan ends (no file: take over the stored active plan).
    /// Exit status: 0 completed, 2 rolled back or stepped back, 3
    /// aborted, 1 an error.
    Run(RunArgs),
    /// The plan's stages, steps and last checks.
    Status(StatusArgs),
    /// Pause the running plan (its controller waits).
    Pause(Plain),
    /// Resume a paused plan: its current step is written again.
    Resume(Plain),
    /// End the plan where it is (with --rollback: every scope back to its
    /// share at plan start).
    Abort(AbortArgs),
    /// Open the gate the plan waits at (a stage with `approve = true`):
    /// its first step is applied.
    Approve(Plain),
    /// End the current step's hold now: the plan moves on at the next
    /// check that passes.
    Promote(Plain),
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    etcd: EtcdArgs,
    /// The plan (TOML: [[stage]] scopes, steps_bp, hold; [guards]).
    plan: Option<PathBuf>,
    /// Judge the guards on this Prometheus server's figures (PromQL,
    /// increase() over the interval, by the scope label of the routers'
    /// scrape targets) instead of the routers' registrations.
    #[arg(long, value_name = "URL")]
    prometheus: Option<String>,
}

#[derive(Args, Debug)]
struct StatusArgs {
    #[command(flatten)]
    etcd: EtcdArgs,
    /// Print the stored state as JSON.
    #[arg(long)]
    json: bool,
    /// Also draw the checks so far (hit ratio by ring, origin requests
    /// per second) as an SVG chart to this file.
    #[arg(long, value_name = "FILE.svg")]
    chart: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct Plain {
    #[command(flatten)]
    etcd: EtcdArgs,
}

#[derive(Args, Debug)]
struct AbortArgs {
    #[command(flatten)]
    etcd: EtcdArgs,
    /// Set every scope back to its share at plan start.
    #[arg(long)]
    rollback: bool,
}

/// A plan that ended other than by completing: `main` exits with `code`.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct PlanExit {
    /// 2: rolled back or stepped back; 3: aborted.
    pub code: u8,
    /// What happened.
    pub message: String,
}

/// Runs a plan command.
pub fn run(a: PlanArgs) -> anyhow::Result<()> {
    match a.command {
        PlanCommand::Run(r) => run_plan(r),
        PlanCommand::Status(s) => status(s),
        PlanCommand::Pause(p) => command(&p.etcd, Command::Pause),
        PlanCommand::Resume(p) => command(&p.etcd, Command::Resume),
        PlanCommand::Abort(a) => command(
            &a.etcd,
            Command::Abort {
                rollback: a.rollback,
            },
        ),
        PlanCommand::Approve(p) => command(&p.etcd, Command::Approve),
        PlanCommand::Promote(p) => command(&p.etcd, Command::Promote),
    }
}

fn controller_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}-{}", std::process::id())
}

fn run_plan(a: RunArgs) -> anyhow::Result<()> {
    let text = match &a.plan {
        Some(p) => Some((
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?,
            p.display().to_string(),
        )),
        None => None,
    };
    let (c, keys) = client(&a.etcd)?;
    let mut log = |line: &str| {
        let mut at = String::new();
        ketama_config::clock::utc_millis(&mut at, std::time::SystemTime::now());
        eprintln!("{at} {line}");
    };
    let plan = text.as_ref().map(|(t, f)| (t.as_str(), f.as_str()));
    let prometheus = a.prometheus.as_deref().map(|u| {
        ketama_fleet::plan::prometheus::Prometheus::new(u, Duration::from_millis(a.etcd.timeout_ms))
    });
    let ctl = Controller::start(&c, &keys, plan, controller_id(), prometheus, &mut log)?;
    let outcome = ctl.run()?;
    let (_, state) = controller::read_plan(&c, &keys)?;
    let reason = state
        .and_then(|s| s.reason().map(str::to_string))
        .unwrap_or_default();
    match outcome {
        Outcome::Completed => {
            println!("plan completed");
            Ok(())
        }
        Outcome::RolledBack | Outcome::SteppedBack => Err(PlanExit {
            code: 2,
            message: reason,
        }
        .into()),
        Outcome::Aborted => Err(PlanExit {
            code: 3,
            message: reason,
        }
        .into()),
    }
}

fn status(a: StatusArgs) -> anyhow::Result<()> {
    let (c, keys) = client(&a.etcd)?;
    let (spec, state) = controller::read_plan(&c, &keys)?;
    let (Some(spec), Some(state)) = (spec, state) else {
        if a.json {
            println!("null");
        } else {
            println!("no plan stored under {}rollout-plan/", keys.prefix());
        }
        return Ok(());
    };
    if let Some(path) = &a.chart {
        let svg = crate::plot_plan::plan_svg(&spec, &state)?;
        std::fs::write(path, svg)
            .with_context(|| format!("--chart {}: cannot write", path.display()))?;
    }
    let r = crate::fleet_plan_status::report(&c, &keys, &spec, &state)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", crate::fleet_plan_status::table(&r));
    }
    Ok(())
}

/// Asks the running controller to act, and waits (10 s at most) until the
/// state shows it did; with no controller, acts on the state itself
/// (pause, abort) or says how to resume.
fn command(a: &EtcdArgs, what: Command) -> anyhow::Result<()> {
    let (c, keys) = client(a)?;
    let (spec, state) = controller::read_plan(&c, &keys)?;
    let (Some(spec), Some(state)) = (spec, state.filter(|s| s.status().active())) else {
        anyhow::bail!(
            "no active plan under {}rollout-plan/: nothing to {}",
            keys.prefix(),
            what.name()
        );
    };
    match (what, state.gate()) {
        (Command::Resume, Some(g)) => anyhow::bail!(
            "the plan waits at stage {}'s gate: `ketama fleet plan approve` applies its first step",
            g + 1
        ),
        (Command::Approve, None) => anyhow::bail!(
            "the plan waits at no gate (it is {} at stage {}): nothing to approve",
            state.status().name(),
            state.stage() + 1
        ),
        (Command::Promote, _) if !matches!(state.phase(), Phase::Holding { .. }) => {
            anyhow::bail!(
                "only a running plan's step can be promoted: the plan is {}{}",
                state.status().name(),
                if state.step().is_none() {
                    " before its first step"
                } else {
                    ""
                }
            )
        }
        _ => {}
    }
    let want = match what {
        Command::Pause => Status::Paused,
        Command::Resume | Command::Approve | Command::Promote => Status::Running,
        Command::Abort { .. } => Status::Aborted,
    };
    if state.status() == want && what != Command::Promote {
        println!("the plan is {} already", want.name());
        return Ok(());
    }
    let locked = c.get(&keys.plan_lock())?.0.is_some();
    if !locked {
        return without_controller(&c, &keys, &spec, state, what);
    }
    c.put(&keys.plan_command(), &serde_json::to_vec(&what)?, None)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, s) = controller::read_plan(&c, &keys)?;
        let done = |s: &PlanState| match what {
            Command::Approve => s.gate().is_none() && s.status() == want,
            Command::Promote => s.promoted_ms().is_some(),
            _ => s.status() == want,
        };
        if let Some(s) = s.filter(done) {
            println!(
                "plan {}{}",
                s.status().name(),
                s.reason().map_or(String::new(), |r| format!(": {r}"))
            );
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!("the controller did not {} the plan within 10 s: the request stays at {}; see `ketama fleet plan status`", what.name(), keys.plan_command());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `pause` or `abort` with no controller: the plan's own transition,
/// written on the condition that no controller took the lock meanwhile.
fn without_controller(
    c: &Client,
    keys: &Keys,
    spec: &PlanSpec,
    mut state: PlanState,
    what: Command,
) -> anyhow::Result<()> {
    if matches!(what, Command::Resume | Command::Approve | Command::Promote) {
        anyhow::bail!("no controller runs the plan: `ketama fleet plan run` (without a file) takes it over; then {}", if state.gate().is_some() { "approve" } else { what.name() });
    }
    let (sk, lk, rk) = (keys.plan_state(), keys.plan_lock(), keys.rollout());
    let applied = apply(
        spec,
        &mut state,
        Event::Unowned(what),
        controller::now_ms(),
        |new, rollout| -> anyhow::Result<bool> {
            let body = serde_json::to_vec(new)?;
            let doc = rollout.map(serde_json::to_vec).transpose()?;
            let mut puts: Vec<(&str, &[u8], Option<i64>)> = vec![(&sk, &body, None)];
            if let Some(doc) = &doc {
                puts.push((&rk, doc, None));
            }
            Ok(c.txn(&[Compare::ModRevision(&lk, 0)], &puts, &[])?
                .is_some())
        },
    )?;
    if matches!(applied, Applied::Lost(_)) {
        anyhow::bail!("a controller took the plan meanwhile: run the command again");
    }
    println!(
        "plan {}{}",
        state.status().name(),
        if what == (Command::Abort { rollback: true }) {
            ", rollout back to its start"
        } else {
            ""
        }
    );
    Ok(())
}
