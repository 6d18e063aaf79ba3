//! Any bytes as the admin API's `PUT /rollout` body: parsing never panics,
//! an accepted rollout is within 0..=10000 basis points everywhere, and
//! its JSON form parses back to the same rollout.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(r) = ketama_config::parse_rollout(data) else { return };
    assert!(r.global_bp() <= 10_000);
    assert!(r.scopes().values().all(|&bp| bp <= 10_000));
    let again = ketama_config::parse_rollout(ketama_config::rollout_json(&r).to_string().as_bytes())
        .expect("a rollout's own JSON parses");
    assert_eq!(again, r);
});
