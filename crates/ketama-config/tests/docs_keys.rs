//! The router guide's key table is `ketama_config::keys::markdown_table()`,
//! byte for byte: the guide and `ketama-router.toml(5)` cannot drift.
//! Regenerate it with
//! `cargo test -p ketama-config --test docs_keys -- --ignored`.

use std::path::PathBuf;

const BEGIN: &str = "<!-- keys:begin -->\n";
const END: &str = "<!-- keys:end -->";

fn guide() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/router.md")
}

fn split(text: &str) -> (&str, &str, &str) {
    let i = text
        .find(BEGIN)
        .expect("docs/router.md has the keys:begin marker")
        + BEGIN.len();
    let j = text
        .find(END)
        .expect("docs/router.md has the keys:end marker");
    (&text[..i], &text[i..j], &text[j..])
}

#[test]
fn the_guide_shows_every_key() {
    let text = std::fs::read_to_string(guide()).unwrap();
    let (_, table, _) = split(&text);
    assert_eq!(
        table,
        ketama_config::keys::markdown_table(),
        "docs/router.md's key table is stale: cargo test -p ketama-config --test docs_keys -- --ignored"
    );
}

#[test]
#[ignore = "rewrites docs/router.md"]
fn regenerate() {
    let text = std::fs::read_to_string(guide()).unwrap();
    let (head, _, tail) = split(&text);
    let new = format!("{head}{}{tail}", ketama_config::keys::markdown_table());
    std::fs::write(guide(), new).unwrap();
}
