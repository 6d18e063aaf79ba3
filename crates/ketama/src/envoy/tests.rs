//! Envoy's own vectors for its hashes, ring sizes and Maglev tables
//! (`test/extensions/load_balancing_policies/{ring_hash,maglev}/`); the
//! lookups on these rings are tested through [`crate::Ring`] in
//! `tests/envoy_vectors.rs`.

use super::*;

#[test]
fn xxh64_is_the_references() {
    // xxHash's sanity values and `xxhsum -H64` of short strings.
    assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
    assert_eq!(xxh64(b"a", 0), 0xD24E_C4F1_A98C_6E5B);
    assert_eq!(xxh64(b"abc", 0), 0x44BC_2CF5_AD77_0999);
    assert_eq!(
        xxh64(b"Nobody inspects the spammish repetition", 0),
        0xFBCE_A83C_8A37_8BF1
    );
    // Longer than one 32-byte stripe, and every tail length.
    let long: Vec<u8> = (0..100u8).collect();
    let mut seen = std::collections::HashSet::new();
    for n in 0..long.len() {
        assert!(seen.insert(xxh64(&long[..n], 0)));
    }
}

#[test]
fn ring_sizes_are_envoys() {
    let r = |min, max| RingHash {
        min_ring_size: min,
        max_ring_size: max,
        ..RingHash::default()
    };
    // Six hosts, minimum 12: two each (RingHashLoadBalancerTest.Basic).
    assert_eq!(r(12, 8 << 20).entry_counts(&[1; 6]), vec![2; 6]);
    // Two hosts, minimum 3: two each, a ring of 4 (UnevenHosts).
    assert_eq!(r(3, 8 << 20).entry_counts(&[1, 1]), vec![2, 2]);
    // Weights 1, 2, 3 in exactly 6 (HostWeightedTinyRing).
    assert_eq!(r(6, 6).entry_counts(&[1, 2, 3]), vec![1, 2, 3]);
    // A zero weight gets nothing and changes nothing.
    assert_eq!(r(6, 6).entry_counts(&[1, 0, 2, 3]), vec![1, 0, 2, 3]);
}

#[test]
fn ring_entries_are_envoys() {
    // RingHashLoadBalancerTest.Basic's ring, in order.
    let hosts: Vec<String> = (90..96).map(|p| format!("127.0.0.1:{p}")).collect();
    let keys: Vec<&[u8]> = hosts.iter().map(|h| h.as_bytes()).collect();
    let r = RingHash {
        min_ring_size: 12,
        ..RingHash::default()
    };
    let got: Vec<(u64, u32)> = r.entries(&keys, &r.entry_counts(&[1; 6]));
    let want: [(u64, u32); 12] = [
        (833437586790550860, 4),
        (928266305478181108, 2),
        (1033482794131418490, 0),
        (3551244743356806947, 5),
        (3851675632748031481, 3),
        (5583722120771150861, 1),
        (6311230543546372928, 1),
        (7700377290971790572, 3),
        (13144177310400110813, 5),
        (13444792449719432967, 2),
        (15516499411664133160, 4),
        (16117243373044804889, 0),
    ];
    assert_eq!(got, want);
    // BasicWithHostname: the hosts' names, 90 to 95.
    let names: Vec<String> = (90..96).map(|p| p.to_string()).collect();
    let keys: Vec<&[u8]> = names.iter().map(|h| h.as_bytes()).collect();
    let got: Vec<u64> = r.entries(&keys, &[2; 6]).iter().map(|e| e.0).collect();
    assert_eq!(
        got,
        [
            1975508444536362413,
            2376063919839173711,
            2386806903309390596,
            6749904478991551885,
            6803900775736438537,
            7225015537174310577,
            8787465352164086522,
            11282020843382717940,
            13723418369486627818,
            13776502110861797421,
            14338313586354474791,
            15364271037087512980
        ]
    );
    // BasicWithMurmur2: hosts :80 to :85.
    let hosts: Vec<String> = (80..86).map(|p| format!("127.0.0.1:{p}")).collect();
    let keys: Vec<&[u8]> = hosts.iter().map(|h| h.as_bytes()).collect();
    let m = RingHash {
        function: RingHashFunction::Murmur2,
        ..r
    };
    let got: Vec<(u64, u32)> = m.entries(&keys, &[2; 6]);
    let want: [(u64, u32); 12] = [
        (1358027074129602068, 5),
        (4361834613929391114, 3),
        (7224494972555149682, 4),
        (7701421856454313576, 1),
        (8649315368077433379, 2),
        (8739448859063030639, 4),
        (9887544217113020895, 1),
        (10150910876324007731, 2),
        (15168472011420622455, 3),
        (15427156902705414897, 0),
        (16375050414328759093, 5),
        (17613279263364193813, 0),
    ];
    assert_eq!(got, want);
}

#[test]
fn maglev_tables_are_envoys() {
    let m7 = Maglev { table_size: 7 };
    let hosts: Vec<String> = (90..96).map(|p| format!("127.0.0.1:{p}")).collect();
    let keys: Vec<&[u8]> = hosts.iter().map(|h| h.as_bytes()).collect();
    // MaglevLoadBalancerTest.Basic.
    assert_eq!(maglev_table(&m7, &keys, &[1; 6]), [2, 4, 0, 1, 5, 0, 3]);
    // The same hosts in another order: the same hosts in the same slots
    // (BasicStability).
    let rev: Vec<&[u8]> = keys.iter().rev().copied().collect();
    let t: Vec<u32> = maglev_table(&m7, &rev, &[1; 6])
        .iter()
        .map(|&i| 5 - i)
        .collect();
    assert_eq!(t, [2, 4, 0, 1, 5, 0, 3]);
    // BasicWithHostName.
    let names: Vec<String> = (90..96).map(|p| p.to_string()).collect();
    let keys_n: Vec<&[u8]> = names.iter().map(|h| h.as_bytes()).collect();
    assert_eq!(maglev_table(&m7, &keys_n, &[1; 6]), [2, 5, 0, 3, 4, 1, 0]);
    // Weighted: weights 1 and 2 in 17 slots.
    let m17 = Maglev { table_size: 17 };
    assert_eq!(
        maglev_table(&m17, &keys[..2], &[1, 2]),
        [1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1]
    );
    // WeightedSingleHost: one host takes every slot.
    assert_eq!(maglev_table(&m17, &keys[..1], &[7]), [0; 17]);
    // BasicWithRetryHostPredicate: hash 10 is slot 3; the first retry
    // slot 5, the second slot 4.
    assert_eq!((m7.slot(10, 0), m7.slot(10, 1), m7.slot(10, 2)), (3, 5, 4));
}

#[test]
fn maglev_slot_hashes_split_the_circle() {
    for size in [7u64, 17, 65537, Maglev::MAX_TABLE_SIZE] {
        let m = Maglev { table_size: size };
        assert_eq!(m.slot_hash(size - 1), u32::MAX);
        let mut prev = None;
        for s in (0..size).step_by((size / 1000).max(1) as usize) {
            let h = m.slot_hash(s);
            assert!(prev.is_none_or(|p| p < h));
            prev = Some(h);
        }
    }
    assert!(Maglev::default().problem().is_none());
    assert!(Maglev { table_size: 8 }
        .problem()
        .unwrap()
        .contains("not a prime"));
    assert!(is_prime(5_000_011) && is_prime(65537) && !is_prime(65535) && !is_prime(1));
}

#[test]
fn options_parse() {
    assert_eq!(parse_options("grpc"), Some(RingHash::GRPC));
    let r = parse_options("min=10,max=20,murmur2").unwrap();
    assert_eq!((r.min_ring_size, r.max_ring_size), (10, 20));
    assert_eq!(r.function, RingHashFunction::Murmur2);
    assert_eq!(parse_options(&r.to_string()), Some(r));
    let c = parse_options("min=8192,cap=4096").unwrap();
    assert_eq!((c.min_ring_size, c.max_ring_size), (4096, 4096));
    assert_eq!(parse_options("min=x"), None);
    assert_eq!(parse_options("sha1"), None);
    assert!(parse_options("min=20,max=10").unwrap().problem().is_some());
}
