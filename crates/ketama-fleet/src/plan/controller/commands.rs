//! The commands `ketama fleet plan pause|resume|abort|approve|promote`
//! leave at `PREFIX/rollout-plan/command`, run through the plan's
//! transition by the running controller and then cleared. A command
//! whose write lost a race with the rollout stays, and is tried again
//! next round.

use super::{Command, Controller, Outcome, RunError};
use crate::etcd::Compare;
use crate::plan::transition::{Applied, Event};

impl Controller<'_> {
    /// A pending command, acted on and cleared; `at` is the rollout's
    /// revision the round read. `Some` when it wrote the state (what the
    /// round read is out of date), with the run's end if it ended it.
    pub(super) fn command(&mut self, at: i64) -> Result<Option<Option<Outcome>>, RunError> {
        let ck = self.keys.plan_command();
        let Some(kv) = self.client.get(&ck)?.0 else {
            return Ok(None);
        };
        let applied = match serde_json::from_slice::<Command>(&kv.value) {
            Ok(c) => self.apply(Event::Command(c), at)?,
            Err(e) => {
                let text = String::from_utf8_lossy(&kv.value).into_owned();
                self.say(format!("{ck}: {text:?} is no command ({e}); cleared"));
                Applied::Unchanged
            }
        };
        if matches!(applied, Applied::Lost(_)) {
            return Ok(None);
        }
        let _ = self
            .client
            .txn(&[Compare::ModRevision(&ck, kv.mod_revision)], &[], &[&ck]);
        Ok(match applied {
            Applied::Kept(_) => Some(self.outcome()),
            _ => None,
        })
    }
}
