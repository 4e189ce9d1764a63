//! Where the shared token comes from: `--token-file`, `LONGHAUL_TOKEN`, or a per-user file
//! created on first use with mode 0600 so two processes of one user work with no setup.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use longhaul_proto::Token;

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
    let bytes = fs::read(path).map_err(io)?;
    Token::new(&bytes).map_err(|cause| TokenError::Invalid {
        origin: path.display().to_string(),
        cause,
    })
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
    let mut raw = [0u8; 32];
    getrandom::getrandom(&mut raw).map_err(|e| io(std::io::Error::other(e.to_string())))?;
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    // create_new: two processes racing to create it both end up reading the winner's file.
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(mut f) => f.write_all(format!("{hex}\n").as_bytes()).map_err(io),
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
    fn explicit_file_with_a_short_token_is_refused() {
        let path =
            std::env::temp_dir().join(format!("longhaul-short-token-{}", std::process::id()));
        fs::write(&path, "abc\n").unwrap();
        let err = load_token(Some(&path)).unwrap_err().to_string();
        fs::remove_file(&path).unwrap();
        assert!(err.contains("too short"), "{err}");
    }
}
