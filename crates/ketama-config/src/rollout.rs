//! The rollout as JSON, `{"global_bp": N, "scopes": {"NAME": N}}` (basis
//! points, 0 to 10000): the body of the admin API's `PUT /rollout`.

use ketama::Rollout;
use serde_json::{json, Value};

/// A rollout document that cannot be used, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RolloutError(pub String);

/// Parses a rollout document.
pub fn parse_rollout(body: &[u8]) -> Result<Rollout, RolloutError> {
    let e = |m: String| RolloutError(m);
    let v: Value = serde_json::from_slice(body).map_err(|x| e(format!("body is not JSON: {x}")))?;
    let obj = v.as_object().ok_or_else(|| {
        e("give a JSON object: {\"global_bp\": N, \"scopes\": {\"NAME\": N}}".into())
    })?;
    if let Some(k) = obj.keys().find(|k| *k != "global_bp" && *k != "scopes") {
        return Err(e(format!(
            "unknown field {k:?}: the fields are global_bp and scopes"
        )));
    }
    let global = obj
        .get("global_bp")
        .and_then(Value::as_u64)
        .ok_or_else(|| {
            e("give \"global_bp\": a whole number of basis points from 0 to 10000".into())
        })?;
    let mut r = Rollout::new(global.min(u32::MAX as u64) as u32).map_err(|x| e(x.to_string()))?;
    if let Some(scopes) = obj.get("scopes") {
        let scopes = scopes
            .as_object()
            .ok_or_else(|| e("\"scopes\" must be an object of NAME: basis points".into()))?;
        for (name, bp) in scopes {
            if name.is_empty() {
                return Err(e("a scope name is empty".into()));
            }
            let bp = bp.as_u64().ok_or_else(|| {
                e(format!(
                    "scopes.{name} must be a whole number of basis points"
                ))
            })?;
            r = r
                .with_scope(name.clone(), bp.min(u32::MAX as u64) as u32)
                .map_err(|x| e(x.to_string()))?;
        }
    }
    Ok(r)
}

/// A rollout as its JSON document (scopes sorted by name).
pub fn rollout_json(r: &Rollout) -> Value {
    let mut scopes: Vec<(&String, &u16)> = r.scopes().iter().collect();
    scopes.sort();
    let scopes: serde_json::Map<String, Value> = scopes
        .into_iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    json!({"global_bp": r.global_bp(), "scopes": scopes})
}
