//! Where the shared token comes from: `--token-file`, `LONGHAUL_TOKEN`, or a per-user file
//! created on first use with mode 0600 so two processes of one user work with no setup.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use longhaul_proto::Token;

/// The longest token file read (a token is one line).
const MAX_TOKEN_FILE: u64 = 4096;

/// Environment variable holding the token itself.
pub const TOKEN_ENV: &str = "LONGHAUL_TOKEN";

/// Why no token could be had.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file could not be read or created.
    #[error("token file {path}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// The token is unusable.
    #[error("token from {origin}: {cause}")]
    Invalid {
        /// Where it came from.
        origin: String,
        /// What was wrong.
        cause: longhaul_proto::ProtoError,
    },
    /// The token file can be read by other users, who could then act as this user.
    #[error("token file {} has mode {mode:04o}: other users can read it, and whoever reads it can act as you; run `chmod 600 {}` (and make a new token if others may have read it)", path.display(), path.display())]
    TooOpen {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// No home directory to keep the default token in.
    #[error("no token given and $HOME is not set: pass --token-file FILE or set LONGHAUL_TOKEN")]
    NoHome,
}

/// The default token file: `$XDG_CONFIG_HOME/longhaul/token` or `~/.config/longhaul/token`.
pub fn default_token_path() -> Result<PathBuf, TokenError> {
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("longhaul").join("token"));
    }
    let home = std::env::var_os("HOME").ok_or(TokenError::NoHome)?;
    Ok(PathBuf::from(home)
        .join(".config")
        .join("longhaul")
        .join("token"))
}

/// Loads the token: from `file` if given, else from `LONGHAUL_TOKEN`, else from the
/// default per-user file, creating it (mode 0600, 32 random bytes in hex) if missing.
/// Returns the token and a description of where it came from.
pub fn load_token(file: Option<&Path>) -> Result<(Token, String), TokenError> {
    if let Some(path) = file {
        return read_token(path).map(|t| (t, path.display().to_string()));
    }
    if let Ok(v) = std::env::var(TOKEN_ENV) {
        let t = Token::new(v.as_bytes()).map_err(|cause| TokenError::Invalid {
            origin: TOKEN_ENV.into(),
            cause,
        })?;
        return Ok((t, TOKEN_ENV.into()));
    }
    let path = default_token_path()?;
    if !path.exists() {
        create_token_file(&path)?;
    }
    read_token(&path).map(|t| (t, path.display().to_string()))
}

fn read_token(path: &Path) -> Result<Token, TokenError> {
    let io = |cause| TokenError::Io {
        path: path.to_path_buf(),
        cause,
    };
    let mut file = fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    let mode = meta.permissions().mode();
    if meta.is_file() && mode & 0o077 != 0 {
        return Err(TokenError::TooOpen {
            path: path.to_path_buf(),
            mode: mode & 0o777,
        });
    }
    // A token is a line; a bounded read keeps a wrong path (a log, a disk image) cheap.
    let mut bytes = Vec::new();
    std::io::Read::take(&mut file, MAX_TOKEN_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_TOKEN_FILE {
        return Err(io(std::io::Error::other(format!(
            "longer than {MAX_TOKEN_FILE} bytes: not a token file"
        ))));
    }
    Token::new(&bytes).map_err(|cause| TokenError::Invalid {
        origin: path.display().to_string(),
        cause,
    })
}

/// Bytes of randomness in a token longhaul makes.
pub const TOKEN_BYTES: usize = 32;

/// A fresh token: [`TOKEN_BYTES`] bytes from the OS's random source, as hex (what the
/// default token file holds and `longhaul token` prints).
pub fn fresh_token_hex() -> std::io::Result<String> {
    let mut raw = [0u8; TOKEN_BYTES];
    getrandom::getrandom(&mut raw).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes a fresh token to `path` (mode 0600, the file must not exist: an existing token
/// is never overwritten) and returns it.
pub fn write_new_token_file(path: &Path) -> Result<String, TokenError> {
    let io = |cause| TokenError::Io {
        path: path.to_path_buf(),
        cause,
    };
    let hex = fresh_token_hex().map_err(io)?;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                io(std::io::Error::new(
                    e.kind(),
                    "already exists; a token file is never overwritten (remove it first, \
                     or pick another name)",
                ))
            } else {
                io(e)
            }
        })?;
    f.write_all(format!("{hex}\n").as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(io)?;
    Ok(hex)
}

fn create_token_file(path: &Path) -> Result<(), TokenError> {
    let io = |cause| TokenError::Io {
        path: path.to_path_buf(),
        cause,
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(io)?;
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    }
    let hex = fresh_token_hex().map_err(io)?;
    // Written whole under a private name, then linked to the real one: a reader never sees
    // a half-written token, and of two processes racing to create it, both end up reading
    // the winner's file (link fails with EEXIST for the loser).
    let tmp = path.with_file_name(format!(".token.{}.{}.tmp", std::process::id(), &hex[..8]));
    let written = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(format!("{hex}\n").as_bytes())?;
        f.sync_all()
    })();
    let linked = written.and_then(|()| fs::hard_link(&tmp, path));
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_token_is_private_and_stable() {
        let dir = std::env::temp_dir().join(format!("longhaul-token-test-{}", std::process::id()));
        let path = dir.join("sub").join("token");
        create_token_file(&path).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let a = read_token(&path).unwrap();
        create_token_file(&path).unwrap(); // already there: kept
        let b = read_token(&path).unwrap();
        let n = [0u8; 32];
        assert_eq!(a.server_proof(&n, &n), b.server_proof(&n, &n));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_token_file_others_can_read_is_refused() {
        let path = std::env::temp_dir().join(format!("longhaul-open-token-{}", std::process::id()));
        fs::write(&path, "ecd84607eccf70ac856e7d746ee36456\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_token(Some(&path)).unwrap_err().to_string();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let ok = load_token(Some(&path));
        fs::remove_file(&path).unwrap();
        assert!(err.contains("0644") && err.contains("chmod 600"), "{err}");
        assert!(ok.is_ok());
    }

    #[test]
    fn racing_creators_agree_on_one_whole_token() {
        let dir = std::env::temp_dir().join(format!("longhaul-token-race-{}", std::process::id()));
        let path = dir.join("token");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    create_token_file(&path).unwrap();
                    read_token(&path).unwrap().server_proof(&[0; 32], &[0; 32])
                })
            })
            .collect();
        let proofs: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(proofs.windows(2).all(|w| w[0] == w[1]));
        let left: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            left,
            vec![std::ffi::OsString::from("token")],
            "temporary files left"
        );
    }

    #[test]
    fn explicit_file_with_a_short_token_is_refused() {
        let path =
            std::env::temp_dir().join(format!("longhaul-short-token-{}", std::process::id()));
        fs::write(&path, "abc\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let err = load_token(Some(&path)).unwrap_err().to_string();
        fs::remove_file(&path).unwrap();
        assert!(err.contains("3 hex digits carry 12 bits"), "{err}");
    }
}
