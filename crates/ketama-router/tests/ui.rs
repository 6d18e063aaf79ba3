//! The admin page as a person sees it: rendered by headless Chromium
//! (Debian's `chromium`, installed by scripts/setup.sh) from the running
//! router, then read from the rendered DOM.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::page::rendered;
use common::*;
use ketama_router::origin::Origin;

/// Each backend row: (server, its cells as text, its class).
fn rows(dom: &str) -> Vec<(String, Vec<String>, String)> {
    let mut out = Vec::new();
    // The table's body only (the page's script holds a row template).
    let start = dom.find("<tbody id=\"rows\">").expect("the backends table");
    let body = &dom[start..start + dom[start..].find("</tbody>").unwrap()];
    for part in body.split("<tr class=\"").skip(1) {
        let (class, rest) = part.split_once('"').unwrap();
        let Some(rest) = rest.strip_prefix(" data-server=\"") else {
            continue;
        };
        let (server, rest) = rest.split_once('"').unwrap();
        let body = &rest[..rest.find("</tr>").unwrap()];
        let cells = body
            .split("<td")
            .skip(1)
            .map(|c| {
                let text = &c[c.find('>').unwrap() + 1..c.find("</td>").unwrap()];
                text.replace("&amp;", "&")
            })
            .collect();
        out.push((server.to_string(), cells, class.to_string()));
    }
    out
}

fn origins(n: usize) -> (Vec<Origin>, Vec<SocketAddr>) {
    let o: Vec<Origin> = (0..n).map(|i| Origin::start(i).unwrap()).collect();
    let a = o.iter().map(|o| o.addr()).collect();
    (o, a)
}

#[test]
fn the_page_shows_every_backend_with_its_share_and_a_stopped_one_as_down() {
    let (origins, addrs) = origins(4);
    let (r, _d) = router_over(&addrs, "", "");
    let page = format!("http://{}/ui", r.admin);

    // Without the token: the prompt and nothing else.
    let dom = rendered(&page);
    assert!(rows(&dom).is_empty(), "{dom}");
    assert!(
        dom.contains("<form id=\"login\">"),
        "the prompt shows: {dom}"
    );
    assert!(!dom.contains("127.0.0.1:"), "no backend anywhere: {dom}");
    let dom = rendered(&format!("{page}#token=wrong"));
    assert!(rows(&dom).is_empty() && dom.contains("That token was refused"));

    // With it: one row per backend, its share the library's.
    let ring = ketama::Ring::new(
        addrs
            .iter()
            .map(|a| ketama::Node::new(a.to_string(), 1))
            .collect(),
    )
    .unwrap();
    let keys = ketama::analysis::keyspace(&ring);
    let dom = rendered(&format!("{page}#token=sekret"));
    let got = rows(&dom);
    assert_eq!(got.len(), 4, "{dom}");
    for (i, a) in addrs.iter().enumerate() {
        let (_, cells, class) = got.iter().find(|(s, _, _)| *s == a.to_string()).unwrap();
        assert_eq!(cells[0], a.to_string());
        let share = keys[i] as f64 / 4294967296.0 * 100.0;
        // Two decimals, rounded.
        let shown: f64 = cells[3].parse().unwrap();
        assert!(
            cells[3].split_once('.').unwrap().1.len() == 2 && (shown - share).abs() <= 0.0051,
            "{share}: {cells:?}"
        );
        assert!(cells[4].starts_with("healthy"), "{cells:?}");
        assert_eq!(class, "");
    }
    // The shares are where requests go: 4,000 keys routed by the router.
    let mut hits = std::collections::HashMap::new();
    for i in 0..400 {
        let resp = get(&r, &format!("/share/{i}"));
        *hits
            .entry(resp.headers["x-ketama-backend"].clone())
            .or_insert(0) += 1;
    }
    for (i, a) in addrs.iter().enumerate() {
        let seen = *hits.get(&a.to_string()).unwrap_or(&0) as f64 / 400.0;
        let exact = keys[i] as f64 / 4294967296.0;
        assert!((seen - exact).abs() < 0.08, "{a}: {seen} vs {exact}");
    }

    // A stopped origin is shown unhealthy within a few health intervals
    // (200 ms each, two failures in a row).
    origins[2].kill();
    let start = Instant::now();
    loop {
        let dom = rendered(&format!("{page}#token=sekret"));
        let got = rows(&dom);
        let row = got.iter().find(|(s, _, _)| *s == addrs[2].to_string());
        if let Some((_, cells, class)) = row {
            if cells[4].starts_with("unhealthy") {
                assert_eq!(class, "bad", "the row stands out");
                assert!(cells[5].starts_with("failed"), "{cells:?}");
                break;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never shown down: {dom}"
        );
    }
}

#[test]
fn without_auth_the_page_shows_everything_without_asking() {
    let (_origins, addrs) = origins(2);
    let (r, _dir, _) = router_from(|proxy, admin, _| {
        config_with(&addrs, proxy, admin, "", "").replace("token = \"sekret\"", "auth = false")
    });
    let dom = rendered(&format!("http://{}/ui", r.admin));
    assert_eq!(rows(&dom).len(), 2, "{dom}");
    assert!(dom.contains("<form id=\"login\" hidden=\"\">"), "no prompt");
}

#[test]
fn the_page_loads_without_a_token_and_nothing_else_does() {
    let (_origins, addrs) = origins(1);
    let (r, _d) = router_over(&addrs, "", "");
    let page = request(r.admin, "GET", "/ui", &[], "").unwrap();
    assert_eq!(page.status, 200);
    assert!(page.headers["content-type"].starts_with("text/html"));
    // Self-contained: no URL of another host, no external script or style.
    for needle in ["http://", "https://", "src=", "<link"] {
        assert!(!page.body.contains(needle), "{needle} in the page");
    }
    assert_eq!(
        request(r.admin, "GET", "/ui/data", &[], "").unwrap().status,
        401
    );
    let data = admin_call(&r, "GET", "/ui/data", "");
    assert_eq!(data.status, 200);
    let v: serde_json::Value = serde_json::from_str(&data.body).unwrap();
    assert_eq!(v["backends"]["server"][0], addrs[0].to_string());
    assert_eq!(v["rings"], serde_json::json!(["only"]));
    assert_eq!(v["backends"]["share"][0][0], 100.0);
}

/// The cache box and the table's hit column, from two nginx backends whose
/// `Cache-Status` says hit for one and a miss for the other.
#[test]
fn the_page_shows_hit_ratios_by_ring_and_backend() {
    use common::tls::Nginx;
    let backend = |member: &'static str| {
        Nginx::start(move |addr| {
            format!(
                "server {{ listen {addr};
    location / {{ add_header Cache-Status \"{member}\"; return 200 \"ok\\n\"; }} }}"
            )
        })
    };
    let (hit, miss) = (backend("a; hit"), backend("b; fwd=miss"));
    let addrs = [hit.addr, miss.addr];
    let (r, _dir, _) = router_from(|proxy, admin, _| {
        config_with(&addrs, proxy, admin, "", "").replace("token = \"sekret\"", "auth = false")
    });
    let mut hits = 0;
    for u in urls(200) {
        let resp = get(&r, &u);
        assert_eq!(resp.status, 200);
        hits += (resp.headers["x-ketama-backend"] == hit.addr.to_string()) as u32;
    }
    assert!(
        (40..160).contains(&hits),
        "{hits} of 200 went to the hit backend"
    );
    let dom = rendered(&format!("http://{}/ui", r.admin));
    let rows = rows(&dom);
    let hit_cell = |server: SocketAddr| {
        let row = rows
            .iter()
            .find(|(s, _, _)| *s == server.to_string())
            .unwrap();
        row.1[10].clone()
    };
    assert_eq!(hit_cell(hit.addr), "100.0", "{rows:?}");
    assert_eq!(hit_cell(miss.addr), "0.0", "{rows:?}");
    let start = dom.find("<div id=\"cache\">").expect("the cache box");
    let cache = &dom[start..start + dom[start..].find("</div>").unwrap()];
    let want = format!("{:.1} %", hits as f64 / 2.0);
    assert!(
        cache.contains("<td>only</td>") && cache.contains(&want),
        "{want} not in {cache}"
    );
}
