//! The graceful upgrade's Unix socket: where it is, and whether it is
//! safe to use.
//!
//! At a graceful upgrade the old process hands its listening sockets to
//! the new one through this socket, so whoever can bind or reach it first
//! can receive them. Hence:
//!
//! - **Where**: `[server] upgrade_sock`; else `upgrade.sock` in
//!   `$RUNTIME_DIRECTORY` (systemd's `RuntimeDirectory=`, which the
//!   packaged unit makes mode 0700 and keeps across restarts); else none,
//!   and `--upgrade` is refused at once (a predictable name in the shared
//!   temporary directory could be taken by any local user).
//! - **Safe**: its directory must exist, be owned by the router's user or
//!   root, and be closed to others (no `o+rwx`: nobody else can create,
//!   replace or reach a socket in it); root may use any owner's directory,
//!   so both processes of a manual upgrade resolve the same path. A file
//!   already at the path must be a socket of the router's user or root
//!   (one a previous upgrade left); anything else is refused, naming it.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use ketama_config::Validated;

/// Why the upgrade socket cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeSockError {
    /// `--upgrade` with no socket to take the listeners from.
    #[error("--upgrade needs a socket to take the listening sockets from: set [server] upgrade_sock to a path in a directory only the router's user can enter (e.g. /run/ketama-router/upgrade.sock, mode 0700), or run under systemd with RuntimeDirectory=")]
    NoSocket,
    /// The directory is missing or unreadable.
    #[error("server.upgrade_sock {path:?}: its directory {dir:?}: {source}: create it, mode 0700, owned by the router's user")]
    Directory {
        /// The configured socket.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Others may enter or write the directory.
    #[error("server.upgrade_sock {path:?}: its directory {dir:?} has mode {mode:04o}, open to other users (who could take the socket first and receive the listeners): use a directory with mode 0700 (or at least no o+rwx)")]
    OpenDirectory {
        /// The configured socket.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
        /// The directory's permission bits.
        mode: u32,
    },
    /// The directory belongs to another user.
    #[error("server.upgrade_sock {path:?}: its directory {dir:?} belongs to uid {owner}, not to the router's user (uid {euid}) or root: use a directory of the router's own")]
    ForeignDirectory {
        /// The configured socket.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
        /// The directory's owner.
        owner: u32,
        /// The router's effective user.
        euid: u32,
    },
    /// Something the router did not make is at the path.
    #[error("server.upgrade_sock {path:?} is taken by {what}, which the router did not make: remove it or choose another path")]
    Taken {
        /// The configured socket.
        path: PathBuf,
        /// What is there.
        what: String,
    },
}

/// The upgrade socket `v` resolves to (see the module docs); `None` when
/// there is none. `runtime_dir` is `$RUNTIME_DIRECTORY` (systemd may list
/// several, colon-separated: the first is used).
pub fn resolve(v: &Validated, runtime_dir: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if let Some(p) = &v.config.server.upgrade_sock {
        return Some(PathBuf::from(p));
    }
    let dirs = runtime_dir?.to_str()?;
    let first = dirs.split(':').next().filter(|d| !d.is_empty())?;
    Some(Path::new(first).join("upgrade.sock"))
}

/// [`resolve`] with this process's `$RUNTIME_DIRECTORY`.
pub fn resolve_here(v: &Validated) -> Option<PathBuf> {
    resolve(v, std::env::var_os("RUNTIME_DIRECTORY").as_deref())
}

/// Whether a directory of this `mode` and `owner` may hold the socket of
/// a router running as `euid` (see the module docs).
pub fn directory_rule(
    path: &Path,
    dir: &Path,
    mode: u32,
    owner: u32,
    euid: u32,
) -> Result<(), UpgradeSockError> {
    if mode & 0o007 != 0 {
        return Err(UpgradeSockError::OpenDirectory {
            path: path.into(),
            dir: dir.into(),
            mode: mode & 0o7777,
        });
    }
    if owner != euid && owner != 0 && euid != 0 {
        return Err(UpgradeSockError::ForeignDirectory {
            path: path.into(),
            dir: dir.into(),
            owner,
            euid,
        });
    }
    Ok(())
}

/// What [`check`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// The directory is safe, and nothing the router did not make is at
    /// the path.
    Safe,
    /// The directory does not exist yet (outside systemd, before the
    /// runtime directory is made): a start goes on with a warning; an
    /// upgrade needs it.
    NoDirectory,
}

/// Checks `path` against the rules of the module docs, on the file
/// system as it is now.
pub fn check(path: &Path) -> Result<Found, UpgradeSockError> {
    let euid = rustix::process::geteuid().as_raw();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let meta = match std::fs::metadata(&dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::NoDirectory),
        Err(source) => {
            return Err(UpgradeSockError::Directory {
                path: path.into(),
                dir,
                source,
            })
        }
    };
    if !meta.is_dir() {
        return Err(UpgradeSockError::Directory {
            path: path.into(),
            dir,
            source: std::io::Error::other("not a directory"),
        });
    }
    directory_rule(path, &dir, meta.mode(), meta.uid(), euid)?;
    match std::fs::symlink_metadata(path) {
        Err(_) => Ok(Found::Safe),
        Ok(m) if m.file_type().is_socket() && (m.uid() == euid || m.uid() == 0) => Ok(Found::Safe),
        Ok(m) => Err(UpgradeSockError::Taken {
            path: path.into(),
            what: if m.file_type().is_socket() {
                format!("a socket of uid {}", m.uid())
            } else if m.is_dir() {
                "a directory".into()
            } else if m.file_type().is_symlink() {
                "a symbolic link".into()
            } else {
                "a file that is not a socket".into()
            },
        }),
    }
}

/// What a process taking the listeners over (`--upgrade`) needs: the
/// rules, and the directory there to make the socket in.
pub fn check_for_upgrade(path: &Path) -> Result<(), UpgradeSockError> {
    match check(path)? {
        Found::Safe => Ok(()),
        Found::NoDirectory => Err(UpgradeSockError::Directory {
            path: path.into(),
            dir: path.parent().unwrap_or(Path::new(".")).into(),
            source: std::io::ErrorKind::NotFound.into(),
        }),
    }
}

/// What the old process checks at SIGQUIT, before it sends its listening
/// sockets: the rules, and a socket there that the new process (of this
/// user, or root) made.
pub fn check_before_handover(path: &Path) -> Result<(), UpgradeSockError> {
    check_for_upgrade(path)?;
    match std::fs::symlink_metadata(path) {
        Ok(_) => Ok(()),
        Err(source) => Err(UpgradeSockError::Directory {
            path: path.into(),
            dir: path.parent().unwrap_or(Path::new(".")).into(),
            source: std::io::Error::other(format!(
                "no socket at the path ({source}): start the new process with --upgrade first"
            )),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_rule() {
        let (p, d) = (Path::new("/r/u.sock"), Path::new("/r"));
        assert!(directory_rule(p, d, 0o40700, 1000, 1000).is_ok());
        assert!(directory_rule(p, d, 0o40750, 0, 1000).is_ok());
        // Root may use its unprivileged user's directory (a manual upgrade).
        assert!(directory_rule(p, d, 0o40700, 1000, 0).is_ok());
        for mode in [0o41777, 0o40755, 0o40701, 0o40702] {
            let e = directory_rule(p, d, mode, 1000, 1000).unwrap_err();
            assert!(
                matches!(e, UpgradeSockError::OpenDirectory { .. }),
                "{mode:o}"
            );
            assert!(e.to_string().contains("\"/r/u.sock\""), "{e}");
        }
        let e = directory_rule(p, d, 0o40700, 1001, 1000).unwrap_err();
        assert!(e.to_string().contains("uid 1001"), "{e}");
    }

    #[test]
    fn the_runtime_directory_gives_the_default() {
        let v = ketama_config::parse(
            "[admin]\nlisten = \"127.0.0.1:9901\"\nauth = false\n[[backends]]\naddress = \"127.0.0.1:1\"\n",
            "t",
        )
        .unwrap();
        assert_eq!(resolve(&v, None), None);
        assert_eq!(
            resolve(&v, Some("/run/a:/run/b".as_ref())),
            Some(PathBuf::from("/run/a/upgrade.sock"))
        );
        assert_eq!(resolve(&v, Some("".as_ref())), None);
    }
}
