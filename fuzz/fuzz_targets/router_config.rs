//! Any bytes as a router configuration: parsing and validating never
//! panic; a configuration that validates builds its routing plan (rings,
//! label requirements) or fails with an error naming a key, never a panic;
//! every built plan routes a few keys to configured backends.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(v) = ketama_config::parse(text, "fuzz.toml") else { return };
    // Keep builds small enough for the fuzzer's time limit; a huge but
    // valid ring is tested elsewhere.
    let points: u64 = v.config.backends.iter().map(|b| b.weight as u64).sum::<u64>()
        * v.ring.point_multiple as u64;
    if points > 1 << 22 {
        return;
    }
    match ketama_config::Plan::build(&v, &[]) {
        Ok(plan) => {
            for key in [&b"/"[..], b"/a/b?c", data] {
                let mut route = plan.table.route(key, None, None).expect("no need, no error");
                if let Some(n) = plan.table.next(&mut route).expect("its own route") {
                    assert!(n < plan.backends.len());
                }
                for rule in &plan.rules {
                    let mut route = plan.table.route(key, Some(rule.need), None).expect("own need");
                    while let Some(n) = plan.table.next(&mut route).expect("its own route") {
                        let b = &plan.backends[n];
                        assert!(rule.labels.iter().all(|l| b.labels.contains(l)));
                    }
                }
            }
        }
        Err(e) => assert!(!e.key.is_empty() && e.file == "fuzz.toml"),
    }
});
