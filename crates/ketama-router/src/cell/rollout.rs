//! What asks the cell for a change ([`Trigger`]), where the rollout in
//! force came from, the one rule of what survives each trigger
//! ([`RolloutInForce::after`]), and why a change is refused.

use ketama::Rollout;

use super::Records;

/// What asks for a new routing state.
#[derive(Debug)]
pub enum Trigger {
    /// SIGHUP or `POST /reload`: read the config source again.
    Reload,
    /// `PUT /rollout`: the operator's rollout, at once.
    AdminRollout(Rollout),
    /// The discovery sources' records changed.
    Discovered(Records),
    /// etcd's shared routing config changed: its text, and how errors
    /// name it.
    EtcdConfig {
        /// The value as written.
        text: String,
        /// `etcd /prefix/config@REV`.
        name: String,
    },
    /// etcd's rollout was written (`Some`) or deleted (`None`).
    EtcdRollout(Option<Rollout>),
}

impl Trigger {
    /// The trigger's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Trigger::Reload => "reload",
            Trigger::AdminRollout(_) => "admin rollout",
            Trigger::Discovered(_) => "discovery",
            Trigger::EtcdConfig { .. } => "etcd config",
            Trigger::EtcdRollout(_) => "etcd rollout",
        }
    }
}

/// Where the rollout in force came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RolloutOrigin {
    /// The config's `[migration]` (`global_bp`, `scopes`).
    Config,
    /// An operator's `PUT /rollout`.
    Admin,
    /// etcd's `PREFIX/rollout`.
    Etcd,
}

impl RolloutOrigin {
    /// The name `/status` shows.
    pub fn name(self) -> &'static str {
        match self {
            RolloutOrigin::Config => "config",
            RolloutOrigin::Admin => "admin",
            RolloutOrigin::Etcd => "etcd",
        }
    }
}

/// The rollout in force: the config's, or one set over it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolloutInForce {
    /// Set over the config's (`None`: the config's own applies).
    pub rollout: Option<Rollout>,
    /// Where it came from.
    pub origin: RolloutOrigin,
}

impl RolloutInForce {
    /// The config's own.
    pub const CONFIG: RolloutInForce = RolloutInForce {
        rollout: None,
        origin: RolloutOrigin::Config,
    };

    /// The precedence rule: what is in force after `trigger`, given what
    /// was before. `controlled` says the router has `[control]` (its
    /// rollout is etcd's). `Err` names why the trigger is refused.
    pub fn after(&self, trigger: &Trigger, controlled: bool) -> Result<RolloutInForce, Refused> {
        Ok(match trigger {
            Trigger::Reload => match self.origin {
                RolloutOrigin::Etcd => self.clone(),
                RolloutOrigin::Admin | RolloutOrigin::Config => Self::CONFIG,
            },
            Trigger::AdminRollout(_) if controlled => return Err(Refused::RolloutFromEtcd),
            Trigger::AdminRollout(r) => RolloutInForce {
                rollout: Some(r.clone()),
                origin: RolloutOrigin::Admin,
            },
            Trigger::Discovered(_) | Trigger::EtcdConfig { .. } => self.clone(),
            Trigger::EtcdRollout(Some(r)) => RolloutInForce {
                rollout: Some(r.clone()),
                origin: RolloutOrigin::Etcd,
            },
            Trigger::EtcdRollout(None) => Self::CONFIG,
        })
    }
}

/// Why a change was refused; the running state keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// `PUT /rollout` on a router whose rollout comes from etcd.
    #[error("this router's rollout comes from etcd: write it there with `ketama fleet rollout`")]
    RolloutFromEtcd,
    /// A rollout for a config without `[migration]`.
    #[error("no migration in the running config: add [migration] to the config first")]
    NoMigration,
    /// The config (read, combined with etcd's, or built) is invalid.
    #[error(transparent)]
    Config(#[from] anyhow::Error),
}
