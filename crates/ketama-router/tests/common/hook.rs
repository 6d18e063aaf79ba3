//! A webhook receiver for the plan tests: a loopback HTTP/1.1 server that
//! answers every POST 204 and keeps its JSON body, in arrival order.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A webhook receiver: every POST's JSON body, in arrival order.
pub struct Hook {
    pub url: String,
    pub seen: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl Hook {
    pub fn start() -> Hook {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", l.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut r = BufReader::new(conn.try_clone().unwrap());
                loop {
                    let mut len = 0;
                    let mut line = String::new();
                    let mut any = false;
                    while r.read_line(&mut line).unwrap_or(0) > 0 {
                        any = true;
                        let l = line.trim_end().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                        line.clear();
                    }
                    if !any {
                        break;
                    }
                    let mut body = vec![0; len];
                    if r.read_exact(&mut body).is_err() {
                        break;
                    }
                    into.lock()
                        .unwrap()
                        .push(serde_json::from_slice(&body).unwrap_or_default());
                    let _ = conn.write_all(b"HTTP/1.1 204 No Content\r\n\r\n");
                }
            }
        });
        Hook { url, seen }
    }

    /// Each event as `KIND STAGE.STEP`.
    pub fn events(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{} {}.{}",
                    e["event"].as_str().unwrap_or("?"),
                    e["stage"],
                    e["step"]
                )
            })
            .collect()
    }
}
