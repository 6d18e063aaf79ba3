//! The `Cache-Status` reader against a second one: the `sfv` crate's RFC
//! 8941 list parser, whose last member's `hit` and `fwd` parameters give
//! the expected result (an earlier member's hit: `peer`; invalid lists:
//! `other`). Members are generated
//! from the grammar (items and inner lists of every bare-item type, with
//! parameters), then sometimes damaged; arbitrary bytes must not panic.

use ketama_config::cache_status::{CacheResult, CacheRules};
use proptest::prelude::*;
use sfv::{BareItem, ListEntry, Parser, Version};

/// What sfv reads: the last member's result, `Other` when invalid.
fn oracle(line: &str) -> CacheResult {
    let Ok(list) = Parser::new(line)
        .with_version(Version::Rfc8941)
        .parse_list()
    else {
        return CacheResult::Other;
    };
    let Some(last) = list.last() else {
        return CacheResult::Other;
    };
    let params = |e: &ListEntry| match e {
        ListEntry::Item(i) => i.params.clone(),
        ListEntry::InnerList(l) => l.params.clone(),
    };
    let hit = |e: &ListEntry| {
        params(e)
            .iter()
            .any(|(k, v)| k.as_str() == "hit" && matches!(v, BareItem::Boolean(true)))
    };
    if hit(last) {
        return CacheResult::Hit;
    }
    if list[..list.len() - 1].iter().any(hit) {
        return CacheResult::Peer;
    }
    let last = params(last);
    let get = |k: &str| {
        last.iter()
            .find(|(key, _)| key.as_str() == k)
            .map(|(_, v)| v)
    };
    match get("fwd") {
        Some(BareItem::Token(t)) if t.as_str() == "stale" => CacheResult::Stale,
        Some(BareItem::Token(t)) if t.as_str() == "bypass" => CacheResult::Bypass,
        Some(_) => CacheResult::Miss,
        None => CacheResult::Other,
    }
}

fn bare_item() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z*][a-zA-Z0-9!#$%&'*+.^_`|~:/-]{0,8}",
        "-?[0-9]{1,16}",
        "-?[0-9]{1,13}\\.[0-9]{0,4}",
        "\"([ !#-\\[\\]-~]|\\\\\"|\\\\\\\\){0,8}\"",
        ":(([A-Za-z0-9+/]{4}){0,3}([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?):",
        "\\?[01]",
        Just("hit".to_string()),
        Just("stale".to_string()),
        Just("bypass".to_string()),
    ]
}

fn param() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("hit".to_string()),
        Just("fwd".to_string()),
        Just("ttl".to_string()),
        Just("stored".to_string()),
        "[a-z*][a-z0-9_.*-]{0,5}",
    ];
    (" {0,1}", key, proptest::option::of(bare_item()))
        .prop_map(|(sp, k, v)| format!(";{sp}{k}{}", v.map_or(String::new(), |v| format!("={v}"))))
}

fn member() -> impl Strategy<Value = String> {
    let item = (bare_item(), proptest::collection::vec(param(), 0..4))
        .prop_map(|(i, ps)| format!("{i}{}", ps.concat()));
    let inner = (
        proptest::collection::vec(bare_item(), 0..3),
        proptest::collection::vec(param(), 0..3),
    )
        .prop_map(|(is, ps)| format!("({}){}", is.join(" "), ps.concat()));
    prop_oneof![4 => item, 1 => inner]
}

fn line() -> impl Strategy<Value = String> {
    let list = (
        proptest::collection::vec(member(), 0..4),
        "[ \t]{0,2}",
        " {0,2}",
    )
        .prop_map(|(ms, sep, lead)| format!("{lead}{}", ms.join(&format!(",{sep}"))));
    // Sometimes damaged: a byte replaced, inserted or cut.
    (list, any::<prop::sample::Index>(), 0u8..6, any::<u8>()).prop_map(|(s, at, how, b)| {
        if s.is_empty() {
            return s;
        }
        let mut v = s.into_bytes();
        let i = at.index(v.len());
        match how {
            0 => v[i] = b % 128,
            1 => v.insert(i, b % 128),
            2 => v.truncate(i),
            _ => {}
        }
        String::from_utf8_lossy(&v).into_owned()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn the_reader_agrees_with_sfv(line in line()) {
        let got = CacheRules::default().classify([line.as_bytes()]);
        prop_assert_eq!(got, oracle(&line), "{:?}", line);
    }

    #[test]
    fn no_bytes_make_it_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64), header in "[a-z-]{1,12}") {
        let rules = [CacheRules::default(), CacheRules::new(&header, &["HIT"], &["MISS"], &["BYPASS"])];
        for r in &rules {
            let _ = r.classify([&bytes[..], &bytes[..bytes.len() / 2]]);
        }
    }
}
