//! What each member of an etcd cluster says about itself
//! (`/v3/maintenance/status`): a member answers it without a quorum, so a
//! caller whose reads and writes fail can tell "nothing answers" from "the
//! members answer but none has a leader" (quorum lost).

use std::sync::atomic::Ordering::Relaxed;

use serde::Deserialize;

use super::wire::U64;
use super::{Client, Result};

/// One member's own view (`/v3/maintenance/status`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberStatus {
    /// The endpoint that answered.
    pub endpoint: String,
    /// Its member id.
    pub member_id: u64,
    /// The leader it follows; `None` when it has none (no quorum).
    pub leader: Option<u64>,
    /// Its raft term.
    pub raft_term: u64,
    /// The errors it reports (`etcdserver: no leader`, alarms).
    pub errors: Vec<String>,
}

impl MemberStatus {
    /// Whether this member is the leader.
    pub fn is_leader(&self) -> bool {
        self.leader == Some(self.member_id)
    }
}

#[derive(Deserialize, Default)]
struct Header {
    #[serde(default)]
    member_id: U64,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    header: Header,
    #[serde(default)]
    leader: U64,
    #[serde(default, rename = "raftTerm")]
    raft_term: U64,
    #[serde(default)]
    errors: Vec<String>,
}

impl Client {
    /// The endpoint requests go to first: the last one that answered.
    pub fn endpoint(&self) -> &str {
        let n = self.endpoints.len().max(1);
        self.endpoints
            .get(self.current.load(Relaxed) % n)
            .map_or("", String::as_str)
    }

    /// The endpoints, in the order given.
    pub fn endpoint_list(&self) -> &[String] {
        &self.endpoints
    }

    /// `endpoint`'s own status, asked of it alone (no failover).
    pub fn member_status(&self, endpoint: &str) -> Result<MemberStatus> {
        let base = endpoint.trim_end_matches('/');
        let token = self.authenticate(base)?;
        let mut req = self.agent.post(&format!("{base}/v3/maintenance/status"));
        if let Some(t) = &token {
            req = req.set("Authorization", t);
        }
        let raw: Raw = self.answer(req.send_string("{}"), base, "status")?;
        Ok(MemberStatus {
            endpoint: base.to_string(),
            member_id: raw.header.member_id.0,
            leader: (raw.leader.0 != 0).then_some(raw.leader.0),
            raft_term: raw.raft_term.0,
            errors: raw.errors,
        })
    }

    /// Every endpoint's status, or why it did not answer, in order.
    pub fn cluster_status(&self) -> Vec<(String, Result<MemberStatus>)> {
        self.endpoints
            .iter()
            .map(|e| (e.clone(), self.member_status(e)))
            .collect()
    }

    /// Why the cluster cannot serve, when members run but none follows a
    /// leader that answers: `Some("1 of 3 members are up ...")`; `None`
    /// when a leader answers or every member refuses connections. A
    /// member is up when it answers its status or takes the connection
    /// and says nothing in time (a member cut off from its majority can
    /// do either); a follower cut off can also go on naming its dead
    /// leader, as etcd 3.4's do, so a named leader counts only when it
    /// answered too.
    pub fn no_quorum(&self) -> Option<String> {
        let all = self.cluster_status();
        let up: Vec<&MemberStatus> = all.iter().filter_map(|(_, s)| s.as_ref().ok()).collect();
        let answers = |id: u64| up.iter().any(|s| s.member_id == id);
        if up.iter().any(|s| s.leader.is_some_and(answers)) {
            return None;
        }
        let silent = |s: &Result<MemberStatus>| matches!(s, Err(super::EtcdError::Unreachable { reason, .. }) if reason.contains("timed out"));
        let mut running: Vec<String> = up.iter().map(|s| s.endpoint.clone()).collect();
        running.extend(
            all.iter()
                .filter(|(_, s)| silent(s))
                .map(|(e, _)| format!("{e} (no answer in time)")),
        );
        if running.is_empty() {
            return None;
        }
        let down: Vec<&str> = all
            .iter()
            .filter(|(_, s)| s.is_err() && !silent(s))
            .map(|(e, _)| e.as_str())
            .collect();
        Some(format!(
            "{} of {} members are up ({}) and none has a leader that answers{}",
            running.len(),
            all.len(),
            running.join(", "),
            if down.is_empty() {
                String::new()
            } else {
                format!("; unreachable: {}", down.join(", "))
            }
        ))
    }
}
