//! `[access_log]`: defaults, and errors that name the key.

use ketama_config::{parse, LogFormat};

const BASE: &str =
    "[admin]\nlisten = \"127.0.0.1:9901\"\nauth = false\n[[backends]]\naddress = \"127.0.0.1:9001\"\n";

#[test]
fn defaults_and_absence() {
    let v = parse(&format!("{BASE}[access_log]\npath = \"-\"\n"), "r.toml").unwrap();
    let a = v.config.access_log.unwrap();
    assert_eq!(a.path, "-");
    assert_eq!(a.format, LogFormat::Json);
    assert_eq!((a.buffer_bytes, a.flush_ms), (65536, 1000));
    let v = parse(
        &format!("{BASE}[access_log]\npath = \"/var/log/k.log\"\nformat = \"combined\"\n"),
        "r.toml",
    )
    .unwrap();
    assert_eq!(v.config.access_log.unwrap().format, LogFormat::Combined);
    assert!(parse(BASE, "r.toml").unwrap().config.access_log.is_none());
}

#[test]
fn errors_name_the_key() {
    let cases = [
        ("path = \"\"", "r.toml: access_log.path: is empty"),
        (
            "path = \"-\"\nbuffer_bytes = 10",
            "r.toml: access_log.buffer_bytes: must be from 4096",
        ),
        (
            "path = \"-\"\nflush_ms = 0",
            "r.toml: access_log.flush_ms: must be from 1 to 60000",
        ),
        (
            "path = \"-\"\nformat = \"xml\"",
            "unknown variant `xml`, expected `json` or `combined`",
        ),
        ("format = \"json\"", "missing field `path`"),
    ];
    for (body, want) in cases {
        let e = parse(&format!("{BASE}[access_log]\n{body}\n"), "r.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{body}: {e}");
    }
}
