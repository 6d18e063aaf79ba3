//! The admin page as headless Chromium renders it.

use std::process::Command;

/// The page's DOM after its script ran and fetched its data (Chromium's
/// virtual time lets its first refreshes run, then dumps the DOM).
pub fn rendered(url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--virtual-time-budget=3000", "--dump-dom", url])
        .output()
        .expect("chromium (Debian's chromium package: run scripts/setup.sh)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
