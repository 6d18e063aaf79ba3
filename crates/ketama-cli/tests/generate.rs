//! `ketama generate` (the packagers' generator): every man page renders
//! without a warning from `man`, and the bash completion completes a
//! subcommand, as a person at a shell would see them.

use std::process::Command;

fn ketama(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_ketama"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn man_pages_render_without_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man");
    ketama(&["generate", "man", man.to_str().unwrap()]);
    let mut pages: Vec<_> = std::fs::read_dir(&man)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    pages.sort();
    let names: Vec<String> = pages
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in [
        "ketama.1",
        "ketama-route.1",
        "ketama-diff.1",
        "ketama-fleet.1",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    assert!(
        !names.iter().any(|n| n.contains("generate")),
        "the hidden command has no page"
    );
    for page in &pages {
        let out = Command::new("man")
            .args(["--warnings", "-E", "UTF-8", "-l"])
            .arg(page)
            .env("MANWIDTH", "80")
            .output()
            .expect("man (Debian: man-db)");
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && warnings.trim().is_empty(),
            "{}: {warnings}",
            page.display()
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("ketama"), "{}: {text}", page.display());
    }
    let route = std::fs::read_to_string(man.join("ketama-route.1")).unwrap();
    assert!(route.contains("servers"), "route's page names its options");
}

#[test]
fn bash_completes_a_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    ketama(&["generate", "completions", dir.path().to_str().unwrap()]);
    for f in ["ketama.bash", "_ketama", "ketama.fish"] {
        assert!(dir.path().join(f).exists(), "{f}");
    }
    let script = format!(
        "source {}; COMP_WORDS=(ketama ro); COMP_CWORD=1; _ketama ketama ro ketama; echo \"${{COMPREPLY[*]}}\"",
        dir.path().join("ketama.bash").display()
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "route");
}

/// The pages and completions the Debian package ships
/// (`packaging/generated/`) are what the generator writes now; after a
/// change to the command line, regenerate them with
/// `ketama generate man packaging/generated/man` and
/// `ketama generate completions packaging/generated/completions`.
#[test]
fn the_packaged_files_are_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/generated");
    let dir = tempfile::tempdir().unwrap();
    for (what, sub) in [("man", "man"), ("completions", "completions")] {
        let fresh = dir.path().join(sub);
        ketama(&["generate", what, fresh.to_str().unwrap()]);
        for e in std::fs::read_dir(&fresh).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap();
            let committed = std::fs::read(root.join(sub).join(name)).unwrap_or_else(|_| {
                panic!("packaging/generated/{sub}/{name:?} is missing: regenerate it")
            });
            assert!(
                committed == std::fs::read(&p).unwrap(),
                "packaging/generated/{sub}/{name:?} is stale: regenerate it"
            );
        }
    }
}
