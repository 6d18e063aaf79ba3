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

    /// Why the cluster cannot serve, when its members answer but none
    /// follows a leader: `Some("2 of 3 members answer ...")`; `None` when
    /// some member has a leader or none answers.
    pub fn no_quorum(&self) -> Option<String> {
        let all = self.cluster_status();
        let up: Vec<&MemberStatus> = all.iter().filter_map(|(_, s)| s.as_ref().ok()).collect();
        if up.is_empty() || up.iter().any(|s| s.leader.is_some()) {
            return None;
        }
        let down: Vec<&str> = all
            .iter()
            .filter(|(_, s)| s.is_err())
            .map(|(e, _)| e.as_str())
            .collect();
        Some(format!(
            "{} of {} members answer ({}) and none has a leader{}",
            up.len(),
            all.len(),
            up.iter()
                .map(|s| s.endpoint.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            if down.is_empty() {
                String::new()
            } else {
                format!("; unreachable: {}", down.join(", "))
            }
        ))
    }
}
