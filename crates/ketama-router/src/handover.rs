//! A graceful upgrade's hand-over of the listening sockets, between the
//! old process and the new one, over the upgrade socket
//! ([`crate::upgrade`] checks where it may be): the new process (started
//! with `--upgrade`) makes the socket and waits; the old one, told by
//! SIGQUIT, connects and sends its listening sockets in one message (the
//! descriptors as `SCM_RIGHTS`, their names as its bytes, separated by
//! spaces: Pingora's format, so that an upgrade from or to a build that
//! listened through Pingora hands them over too).
//!
//! The socket's mode lets any local user connect, so the new process
//! takes sockets only from a peer of its own user or root (or from anyone
//! when it is root itself), by `SO_PEERCRED`; the old one sends only to a
//! socket of its own user or root ([`crate::upgrade::check_before_handover`]).

use std::collections::HashMap;
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// At most this many sockets go in one hand-over.
pub const MAX_FDS: usize = 32;

/// How long each side waits for the other.
pub const WAIT: Duration = Duration::from_secs(5);

/// Why a hand-over failed.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    /// The socket could not be made, reached, or read.
    #[error("the upgrade socket {path}: {source}")]
    Io {
        /// The socket's path.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// Nothing came within [`WAIT`].
    #[error("no process sent its listening sockets to {0} within {WAIT:?}: send SIGQUIT to the running router after starting this one")]
    NoSender(String),
    /// The peer is another user's process.
    #[error("refused the listening sockets from uid {uid} on {path}: not this process's user")]
    Refused {
        /// The socket's path.
        path: String,
        /// The peer's user.
        uid: u32,
    },
    /// More sockets than one message carries.
    #[error("{0} listening sockets: at most {MAX_FDS} can be handed over")]
    TooMany(usize),
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> HandoverError + '_ {
    move |source| HandoverError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The new process's side: makes the socket at `path`, waits up to
/// [`WAIT`] for the old process, and takes its sockets by name.
pub fn receive(path: &Path) -> Result<HashMap<String, OwnedFd>, HandoverError> {
    let err = io_err(path);
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).map_err(&err)?;
    let result = (|| {
        // Any local user may connect (the old process may run as another
        // user than root); who it is gets checked below.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(&err)?;
        listener.set_nonblocking(true).map_err(&err)?;
        let deadline = Instant::now() + WAIT;
        let conn = loop {
            match listener.accept() {
                Ok((c, _)) => break c,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(HandoverError::NoSender(path.display().to_string()));
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(err(e)),
            }
        };
        conn.set_nonblocking(false).map_err(&err)?;
        conn.set_read_timeout(Some(WAIT)).map_err(&err)?;
        let peer = rustix::net::sockopt::socket_peercred(&conn).map_err(|e| err(e.into()))?;
        let me = std::fs::metadata(path).map_err(&err)?.uid();
        let uid = peer.uid.as_raw();
        if uid != me && uid != 0 && me != 0 {
            return Err(HandoverError::Refused {
                path: path.display().to_string(),
                uid,
            });
        }
        read(&conn).map_err(&err)
    })();
    let _ = std::fs::remove_file(path);
    result
}

/// Reads one hand-over message: names and descriptors, paired in order.
fn read(conn: &UnixStream) -> std::io::Result<HashMap<String, OwnedFd>> {
    let mut bytes = vec![0u8; 64 * 1024];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = recvmsg(
        conn,
        &mut [IoSliceMut::new(&mut bytes)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = msg {
            fds.extend(rights);
        }
    }
    let names = String::from_utf8_lossy(&bytes[..got.bytes]).into_owned();
    Ok(names
        .split_ascii_whitespace()
        .map(String::from)
        .zip(fds)
        .collect())
}

/// The old process's side: connects to the socket at `path` (retried
/// while the new process makes it, up to [`WAIT`]) and sends `sockets`
/// with their names.
pub fn send(path: &Path, sockets: &[(String, BorrowedFd<'_>)]) -> Result<(), HandoverError> {
    if sockets.len() > MAX_FDS {
        return Err(HandoverError::TooMany(sockets.len()));
    }
    let err = io_err(path);
    let deadline = Instant::now() + WAIT;
    let conn = loop {
        match UnixStream::connect(path) {
            Ok(c) => break c,
            Err(e)
                if Instant::now() < deadline
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound
                            | std::io::ErrorKind::ConnectionRefused
                            | std::io::ErrorKind::PermissionDenied
                    ) =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(err(e)),
        }
    };
    let names = sockets
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let fds: Vec<BorrowedFd<'_>> = sockets.iter().map(|(_, fd)| fd.as_fd()).collect();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    control.push(SendAncillaryMessage::ScmRights(&fds));
    sendmsg(
        &conn,
        &[IoSlice::new(names.as_bytes())],
        &mut control,
        SendFlags::empty(),
    )
    .map_err(|e| err(e.into()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn sockets_go_across_with_their_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("upgrade.sock");
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (addr_a, addr_b) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let p = path.clone();
        let receiver = std::thread::spawn(move || receive(&p));
        send(
            &path,
            &[
                (addr_a.to_string(), a.as_fd()),
                ("admin.listen=127.0.0.1:0".to_string(), b.as_fd()),
            ],
        )
        .unwrap();
        let mut got = receiver.join().unwrap().unwrap();
        assert_eq!(got.len(), 2);
        let fa = got.remove(&addr_a.to_string()).unwrap();
        let la = std::net::TcpListener::from(fa);
        assert_eq!(la.local_addr().unwrap(), addr_a);
        let lb = std::net::TcpListener::from(got.remove("admin.listen=127.0.0.1:0").unwrap());
        assert_eq!(lb.local_addr().unwrap(), addr_b);
        assert_ne!(la.as_raw_fd(), a.as_raw_fd());
        assert!(!path.exists(), "the socket file is removed after");
    }

    #[test]
    fn nobody_sending_is_an_error_naming_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("u.sock");
        let started = Instant::now();
        let e = receive(&path).unwrap_err();
        assert!(matches!(e, HandoverError::NoSender(_)), "{e}");
        assert!(started.elapsed() >= WAIT);
        assert!(e.to_string().contains("u.sock"));
        let e = receive(&dir.path().join("missing/u.sock")).unwrap_err();
        assert!(matches!(e, HandoverError::Io { .. }), "{e}");
    }
}
