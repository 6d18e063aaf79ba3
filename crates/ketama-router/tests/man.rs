//! `ketama-router(8)` and `ketama-router.toml(5)`: written by the binary's
//! own generator, rendered by `man` without a warning, and the packaged
//! copies (`packaging/generated/man/`) current. Regenerate them with
//! `ketama-router --generate-man packaging/generated/man`.

use std::process::Command;

#[test]
fn router_pages_render_and_the_packaged_ones_are_current() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ketama-router"))
        .arg("--generate-man")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let packaged =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/generated/man");
    for (name, must) in [
        ("ketama-router.8", "--check"),
        ("ketama-router.toml.5", "max_header_bytes"),
    ] {
        let page = dir.path().join(name);
        let out = Command::new("man")
            .args(["--warnings", "-E", "UTF-8", "-l"])
            .arg(&page)
            .env("MANWIDTH", "80")
            .output()
            .expect("man (Debian: man-db)");
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && warnings.trim().is_empty(),
            "{name}: {warnings}"
        );
        let text = String::from_utf8_lossy(&out.stdout).replace('\u{2010}', "-");
        assert!(text.contains(must), "{name} lacks {must}: {text}");
        assert!(
            std::fs::read(packaged.join(name)).ok() == std::fs::read(&page).ok(),
            "packaging/generated/man/{name} is stale: ketama-router --generate-man packaging/generated/man"
        );
    }
}
