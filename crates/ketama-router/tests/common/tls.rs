//! TLS for the integration tests: certificates made with the `openssl`
//! command, nginx as a TLS origin, and curl as the client.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A certificate authority in a directory, issuing P-256 certificates.
pub struct Ca {
    pub dir: PathBuf,
    pub name: String,
    pub cert: PathBuf,
    key: PathBuf,
}

/// A private key's kind and PEM encoding.
#[derive(Clone, Copy, Debug)]
pub enum Key {
    /// P-256 in PKCS#8 (`BEGIN PRIVATE KEY`).
    Pkcs8,
    /// P-256 in SEC1 (`BEGIN EC PRIVATE KEY`).
    Sec1,
    /// RSA 2048 in PKCS#1 (`BEGIN RSA PRIVATE KEY`).
    RsaPkcs1,
}

/// A certificate chain and its key.
#[derive(Clone, Debug)]
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Ca {
    pub fn new(dir: &Path, name: &str) -> Ca {
        let (cert, key) = (
            dir.join(format!("{name}.pem")),
            dir.join(format!("{name}.key")),
        );
        run(Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .args(["-days", "30", "-subj", &format!("/CN={name}")]));
        Ca {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            cert,
            key,
        }
    }

    /// An intermediate CA this one signs (its certificate file holds only
    /// its own certificate).
    pub fn intermediate(&self, name: &str) -> Ca {
        let issued = self.issue_with(name, &[&format!("{name}.ca")], 30, Key::Pkcs8, true);
        Ca {
            dir: self.dir.clone(),
            name: name.to_string(),
            cert: issued.cert,
            key: issued.key,
        }
    }

    /// A certificate for these DNS names (the first is also its CN),
    /// valid `days` days, saved as `file.pem` and `file.key` (a P-256 key
    /// in PKCS#8).
    pub fn issue(&self, file: &str, names: &[&str], days: u32) -> Issued {
        self.issue_with(file, names, days, Key::Pkcs8, false)
    }

    /// [`Ca::issue`] with a key of this kind; `ca`: the certificate may
    /// sign others (an intermediate).
    pub fn issue_with(&self, file: &str, names: &[&str], days: u32, kind: Key, ca: bool) -> Issued {
        let (cert, key) = (
            self.dir.join(format!("{file}.pem")),
            self.dir.join(format!("{file}.key")),
        );
        let csr = self.dir.join(format!("{file}.csr"));
        let ext = self.dir.join(format!("{file}.ext"));
        let sans: Vec<String> = names.iter().map(|n| format!("DNS:{n}")).collect();
        let constraints = if ca {
            "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
        } else {
            ""
        };
        std::fs::write(
            &ext,
            format!("subjectAltName={}\n{constraints}", sans.join(",")),
        )
        .unwrap();
        match kind {
            Key::Pkcs8 => run(Command::new("openssl")
                .args([
                    "genpkey",
                    "-algorithm",
                    "EC",
                    "-pkeyopt",
                    "ec_paramgen_curve:P-256",
                    "-out",
                ])
                .arg(&key)),
            Key::Sec1 => run(Command::new("openssl")
                .args([
                    "ecparam",
                    "-name",
                    "prime256v1",
                    "-genkey",
                    "-noout",
                    "-out",
                ])
                .arg(&key)),
            Key::RsaPkcs1 => run(Command::new("openssl")
                .args(["genrsa", "-traditional", "-out"])
                .arg(&key)
                .arg("2048")),
        };
        run(Command::new("openssl")
            .args(["req", "-new", "-key"])
            .arg(&key)
            .arg("-out")
            .arg(&csr)
            .args(["-subj", &format!("/CN={}", names[0])]));
        run(Command::new("openssl")
            .args(["x509", "-req", "-in"])
            .arg(&csr)
            .arg("-CA")
            .arg(&self.cert)
            .arg("-CAkey")
            .arg(&self.key)
            .args(["-CAcreateserial", "-days", &days.to_string(), "-out"])
            .arg(&cert)
            .arg("-extfile")
            .arg(&ext));
        Issued { cert, key }
    }
}

/// nginx serving HTTPS on loopback: `200 tls-origin URI SNI` for every
/// request; with `client_ca`, only to clients with a certificate it signed.
pub struct Nginx {
    pub addr: SocketAddr,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn nginx_binary() -> &'static str {
    if Path::new("/usr/sbin/nginx").exists() {
        "/usr/sbin/nginx"
    } else {
        "nginx"
    }
}

impl Nginx {
    /// Its process (the master, with one).
    pub fn child_id(&self) -> u32 {
        self.child.id()
    }

    pub fn start_tls(cert: &Issued, client_ca: Option<&Path>) -> Nginx {
        let verify = client_ca.map_or(String::new(), |ca| {
            format!(
                "ssl_verify_client on; ssl_client_certificate {};",
                ca.display()
            )
        });
        let (cert, key) = (cert.cert.display(), cert.key.display());
        Nginx::start(|addr| {
            format!(
                "server {{
    listen {addr} ssl;
    ssl_certificate {cert}; ssl_certificate_key {key};
    {verify}
    location / {{ return 200 \"tls-origin $request_uri $ssl_server_name\\n\"; }}
  }}"
            )
        })
    }

    /// nginx (one process) with what `http(addr)` returns inside its
    /// `http` block, listening at `addr`.
    pub fn start(http: impl FnOnce(SocketAddr) -> String) -> Nginx {
        Nginx::start_as(false, http)
    }

    /// The same with a master process and one worker: a graceful stop
    /// (`SIGQUIT` to the master, [`Nginx::child_id`]) is one only there,
    /// a single process exits at once.
    pub fn start_with_master(http: impl FnOnce(SocketAddr) -> String) -> Nginx {
        Nginx::start_as(true, http)
    }

    fn start_as(master: bool, http: impl FnOnce(SocketAddr) -> String) -> Nginx {
        let dir = tempfile::tempdir().unwrap();
        let addr = super::free_addr();
        let d = dir.path().display();
        let master = if master { "on" } else { "off" };
        let conf = format!(
            "daemon off; master_process {master}; worker_processes 1; error_log {d}/error.log; pid {d}/nginx.pid;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  {}
}}
",
            http(addr)
        );
        let path = dir.path().join("nginx.conf");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new(nginx_binary())
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx (scripts/setup.sh installs it)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "nginx did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nginx {
            addr,
            child,
            _dir: dir,
        }
    }
}

/// Runs curl with these arguments; its stdout.
pub fn curl(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `[tls]` section for these certificates.
pub fn tls_section(listen: SocketAddr, certs: &[&Issued], extra: &str) -> String {
    let mut s = format!("[tls]\nlisten = [\"{listen}\"]\n{extra}\n");
    for c in certs {
        s.push_str(&format!(
            "[[tls.certificates]]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
            c.cert.display(),
            c.key.display()
        ));
    }
    s
}

pub type Client = (TcpStream, rustls::ClientConnection);

/// A finished client handshake (optionally with a client certificate).
pub fn client(
    addr: SocketAddr,
    sni: &str,
    ca: &Path,
    alpn: &[&str],
    cert: Option<&Issued>,
) -> Result<Client, String> {
    let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    handshake(tcp, sni, client_config(ca, alpn, cert))
}

/// A client handshake over a connected `tcp` (no client certificate).
pub fn client_over(tcp: TcpStream, sni: &str, ca: &Path, alpn: &[&str]) -> Result<Client, String> {
    handshake(tcp, sni, client_config(ca, alpn, None))
}

/// A rustls client trusting `ca`, offering `alpn`, with `cert` if given.
pub fn client_config(ca: &Path, alpn: &[&str], cert: Option<&Issued>) -> rustls::ClientConfig {
    use rustls_pki_types::pem::PemObject;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let mut config = match cert {
        None => builder.with_no_client_auth(),
        Some(c) => {
            let chain: Vec<_> = rustls_pki_types::CertificateDer::pem_file_iter(&c.cert)
                .unwrap()
                .map(|c| c.unwrap())
                .collect();
            let key = rustls_pki_types::PrivateKeyDer::from_pem_file(&c.key).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    config
}

fn handshake(
    mut tcp: TcpStream,
    sni: &str,
    config: rustls::ClientConfig,
) -> Result<Client, String> {
    let name = rustls_pki_types::ServerName::try_from(sni.to_string()).unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).map_err(|e| e.to_string())?;
    }
    Ok((tcp, conn))
}
