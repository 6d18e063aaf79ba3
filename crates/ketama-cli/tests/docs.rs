//! The documentation as a reader meets it: the README stays a front door
//! (at most 250 lines) and every relative link in it, in `docs/` and in
//! the crates' READMEs leads to a file that exists.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The relative targets of `[text](target)` links, anchors cut off.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let end = rest.find([')', ' ']).unwrap_or(rest.len());
        let target = rest[..end].split('#').next().unwrap_or("");
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            out.push(target.to_string());
        }
    }
    out
}

fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![root.join("README.md")];
    for dir in [
        "docs",
        "crates/ketama",
        "crates/ketama-pingora",
        "crates/ketama-config",
        "crates/ketama-fleet",
    ] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
    }
    files
}

#[test]
fn every_relative_link_resolves() {
    let mut dead = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in links(&text) {
            seen += 1;
            if !page.parent().unwrap().join(&target).exists() {
                dead.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(seen > 20, "the link reader found only {seen} links");
    assert!(dead.is_empty(), "dead links:\n{}", dead.join("\n"));
}

#[test]
fn the_readme_is_a_front_door() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let n = text.lines().count();
    assert!(n <= 250, "README.md has {n} lines: move the rest to docs/");
    // It links every page of docs/.
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            let name = format!("docs/{}", p.file_name().unwrap().to_string_lossy());
            assert!(text.contains(&name), "README.md does not link {name}");
        }
    }
}

#[test]
fn the_link_reader_sees_links() {
    assert_eq!(
        links("a [x](docs/a.md#b) [y](https://e.org) [z](../LICENSE) [w](#top)"),
        vec!["docs/a.md", "../LICENSE"]
    );
}
