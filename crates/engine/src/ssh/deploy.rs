//! Nothing to install on the far host: when it has no longhaul, or one of another
//! protocol, this very binary is copied over the user's own ssh into a private per-user
//! cache there, checked, and run from it, now and on later runs.
//!
//! - The far command ([`far_command`]) runs the cached copy of this binary when the far
//!   host has it (`${XDG_CACHE_HOME:-$HOME/.cache}/longhaul/longhaul-VERSION-HASH`, the
//!   hash being this binary's BLAKE3), else `longhaul` from the far PATH, else prints
//!   [`UPLOAD_NEEDED`] and exits 127 (no shell's "not found" on the user's terminal).
//! - The upload ([`upload`]) runs `sh -c SCRIPT` over a second ssh login with this binary,
//!   gzip-compressed, on ssh's stdin. The script (umask 077) writes it under a temporary
//!   name in the cache directory (`gzip -dc`, whose CRC refuses a copy cut short), runs it
//!   with `--version`, and only when that answers this binary's version line moves it to
//!   its name; otherwise it removes it and says what the far system answered (another CPU
//!   or OS: "Exec format error"; an older C library: "GLIBC_2.34 not found"; a `noexec`
//!   home: "Permission denied"), which becomes [`SshError::FarCannotRun`] with the fix.
//! - `--remote-longhaul` wins (nothing is uploaded), `--no-upload` turns it off.
//!
//! The script is single-quoted for the far user's shell and holds no `'` or `!` (which
//! csh expands even inside single quotes).

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use longhaul_transfer::SshHost;

use super::launch::{spawn_ssh, Guard};
use super::rsh::ssh_argv_with;
use super::SshError;

/// What the far command prints when the far host has neither the cached binary nor a
/// `longhaul` on its PATH.
pub const UPLOAD_NEEDED: &str = "LONGHAUL-UPLOAD-NEEDED";
/// What the upload script prints when the binary is in place.
const DEPLOYED: &str = "LONGHAUL-DEPLOYED";
/// What it prints when the far host cannot run it (then what it said).
const CANNOT_RUN: &str = "LONGHAUL-CANNOT-RUN";
/// Most of the upload script's output kept.
const MAX_ANSWER: u64 = 16 * 1024;
/// How long an upload may take (63 MB through an ssh channel of 2 MiB window at 436 ms
/// is about 15 s).
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// This binary as the far host caches it.
#[derive(Debug, Clone)]
pub struct ThisBinary {
    /// Where it is read from here: `/proc/self/exe` (the running image even if the file
    /// was replaced since), else the path it was started from.
    pub path: PathBuf,
    /// Its name in the far cache: `longhaul-VERSION-HASH16`.
    pub name: String,
}

impl ThisBinary {
    /// The running executable, hashed (BLAKE3; about 20 ms for 63 MB).
    pub fn current() -> io::Result<ThisBinary> {
        let proc_exe = PathBuf::from("/proc/self/exe");
        let (path, mut f) = match std::fs::File::open(&proc_exe) {
            Ok(f) => (proc_exe, f),
            Err(_) => {
                let path = std::env::current_exe()?;
                let f = std::fs::File::open(&path)?;
                (path, f)
            }
        };
        let hash = blake3::Hasher::new()
            .update_reader(&mut f)?
            .finalize()
            .to_hex();
        Ok(ThisBinary {
            path,
            name: format!("longhaul-{}-{}", env!("CARGO_PKG_VERSION"), &hash[..16]),
        })
    }
}

/// What an ELF64 executable needs to run: the bytes up to the end of its last segment,
/// with the section header table (which only debuggers and `strip` read) cut off and
/// unnamed in the header, as `sstrip` does. The release build is 63 MB with its debug
/// information (`debug = 1`), 9.8 MB without; gzip takes that to 4.6 MB. `None` if `elf`
/// is not a little-endian ELF64 whose segments lie within it (then it goes whole).
pub fn loadable_image(elf: &[u8]) -> Option<Vec<u8>> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?));
    // ELF magic, 64-bit, little-endian.
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let (phentsize, phnum) = (usize::from(u16_at(0x36)?), usize::from(u16_at(0x38)?));
    if phentsize < 56 || phnum == 0 {
        return None;
    }
    let mut end = phoff.checked_add(phentsize.checked_mul(phnum)?)?;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let (offset, filesz) = (u64_at(ph + 8)?, u64_at(ph + 32)?);
        end = end.max(usize::try_from(offset.checked_add(filesz)?).ok()?);
    }
    if end > elf.len() {
        return None;
    }
    let mut image = elf[..end].to_vec();
    // e_shoff = 0; e_shnum = e_shstrndx = 0 (e_shentsize may stay).
    image[0x28..0x30].fill(0);
    image[0x3c..0x40].fill(0);
    Some(image)
}

/// The line `longhaul --version` prints (clap's: the name and the package version).
pub fn version_line() -> String {
    format!("longhaul {}", env!("CARGO_PKG_VERSION"))
}

/// The far cache directory, for the far shell.
const CACHE_DIR: &str = "${XDG_CACHE_HOME:-$HOME/.cache}/longhaul";

/// The far command (before `ssh-server` and its options) that runs the cached `name`, else
/// the far PATH's `longhaul`, else says [`UPLOAD_NEEDED`].
pub fn far_command(name: &str) -> String {
    format!(
        "sh -c 'b=\"{CACHE_DIR}/{name}\"; if [ -x \"$b\" ]; then exec \"$b\" \"$@\"; fi; \
         if command -v longhaul >/dev/null 2>&1; then exec longhaul \"$@\"; fi; \
         echo {UPLOAD_NEEDED}; exit 127' longhaul"
    )
}

/// The upload script's command.
fn upload_command(name: &str) -> String {
    let version = version_line();
    format!(
        "sh -c 'umask 077; d=\"{CACHE_DIR}\"; t=\"$d/.upload-$$\"; \
         if command -v gzip >/dev/null 2>&1; then :; else echo {CANNOT_RUN} gzip is missing; exit 1; fi; \
         mkdir -p \"$d\" || {{ echo {CANNOT_RUN} cannot make \"$d\"; exit 1; }}; \
         if gzip -dc > \"$t\"; then :; else rm -f \"$t\"; echo {CANNOT_RUN} the upload did not arrive whole; exit 1; fi; \
         chmod 700 \"$t\"; v=$(\"$t\" --version 2>&1); \
         if [ \"$v\" = \"{version}\" ]; then mv -f \"$t\" \"$d/{name}\" && echo {DEPLOYED} \"$d/{name}\"; \
         else rm -f \"$t\"; echo {CANNOT_RUN} \"$v\"; exit 1; fi'"
    )
}

/// What an upload did.
#[derive(Debug, Clone)]
pub struct Uploaded {
    /// Where the binary is on the far host.
    pub far_path: String,
    /// Bytes sent over ssh (compressed).
    pub sent_bytes: u64,
    /// How long it took, ssh's login included.
    pub took: Duration,
}

/// Copies `me` to the far host's cache over a new ssh login (`rsh` split, `host`).
pub fn upload(rsh: &[String], host: &SshHost, me: &ThisBinary) -> Result<Uploaded, SshError> {
    let dest = host.destination();
    let argv = ssh_argv_with(rsh, host.port, &dest, &[upload_command(&me.name)]);
    let t0 = Instant::now();
    let io_err = |what: &'static str| move |cause: io::Error| SshError::Io { what, cause };
    let whole = std::fs::read(&me.path).map_err(io_err("reading this binary for the upload"))?;
    let image = loadable_image(&whole).unwrap_or(whole);
    let mut child = spawn_ssh(&argv)?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    // Killed and reaped on every path out.
    let mut guard = Guard(Some(child));
    let read_bounded = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(r) = r {
                let mut r = r.take(MAX_ANSWER);
                let _ = r.read_to_end(&mut s);
                // Drain the rest so the far side never blocks on a full pipe.
                let _ = io::copy(&mut r.into_inner(), &mut io::sink());
            }
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = read_bounded(stdout.map(|o| Box::new(o) as Box<dyn Read + Send>));
    let err = read_bounded(stderr.map(|e| Box::new(e) as Box<dyn Read + Send>));
    let mut sent = 0u64;
    if let Some(stdin) = stdin {
        let counted = Counted {
            inner: stdin,
            n: &mut sent,
        };
        let mut gz = flate2::write::GzEncoder::new(counted, flate2::Compression::fast());
        // A far side that ended early (no gzip, a full disk) breaks the pipe: its answer
        // below says why.
        let _ = gz.write_all(&image).and_then(|()| gz.finish().map(drop));
    }
    let status = guard.wait_for(UPLOAD_TIMEOUT);
    let said = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if let Some(line) = said.lines().find(|l| l.starts_with(DEPLOYED)) {
        return Ok(Uploaded {
            far_path: line[DEPLOYED.len()..].trim().to_string(),
            sent_bytes: sent,
            took: t0.elapsed(),
        });
    }
    let answer = match said.find(CANNOT_RUN) {
        Some(i) => said[i + CANNOT_RUN.len()..].trim().replace('\n', " | "),
        None => {
            let text = format!("{} {}", said.trim(), stderr.trim());
            let text = text.trim().replace('\n', " | ");
            return Err(SshError::UploadFailed {
                host: dest,
                status: status.map_or("timed out".into(), |s| s.to_string()),
                said: if text.is_empty() {
                    String::new()
                } else {
                    format!("; it said: {text}")
                },
            });
        }
    };
    Err(SshError::FarCannotRun {
        host: dest,
        said: answer,
    })
}

/// A writer that counts what passes.
struct Counted<'a, W> {
    inner: W,
    n: &'a mut u64,
}

impl<W: Write> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        *self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// The scripts run here under sh, as the far shell would run them: the far command
    /// finds the cache, else the PATH's longhaul, else asks for the upload; the upload
    /// script puts a binary in place only when it answers this version.
    #[test]
    fn the_far_scripts_ask_for_an_upload_take_it_and_run_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let run = |cmd: &str, stdin: &[u8]| {
            // What ssh does: the far shell parses the joined command line.
            let mut c = Command::new("sh")
                .args(["-c", cmd])
                .env("XDG_CACHE_HOME", &cache)
                .env("PATH", "/usr/bin:/bin")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            c.stdin.take().unwrap().write_all(stdin).unwrap();
            let o = c.wait_with_output().unwrap();
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
            )
        };
        let gz = |data: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        };
        let name = "longhaul-0.0.0-0123456789abcdef";
        // Nothing there: asks for the upload, exit 127.
        let (code, out) = run(&format!("{} ssh-server", far_command(name)), b"");
        assert_eq!((code, out.trim()), (Some(127), UPLOAD_NEEDED));
        // A "binary" that answers another version is refused and removed.
        let liar = b"#!/bin/sh\necho longhaul 9.9.9\n";
        let (code, out) = run(&upload_command(name), &gz(liar));
        assert_eq!(code, Some(1), "{out}");
        assert!(out.contains(CANNOT_RUN) && out.contains("9.9.9"), "{out}");
        assert!(!cache.join("longhaul").join(name).exists());
        // A cut upload is refused by gzip's check.
        let whole = gz(format!("#!/bin/sh\necho {}\n", version_line()).as_bytes());
        let (code, out) = run(&upload_command(name), &whole[..whole.len() - 6]);
        assert_eq!(code, Some(1), "{out}");
        assert!(out.contains("did not arrive whole"), "{out}");
        // One that answers this version goes in place, private to the user, and the far
        // command runs it with the arguments after it.
        let good = format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo {}; else echo ran \"$@\"; fi\n",
            version_line()
        );
        let (code, out) = run(&upload_command(name), &gz(good.as_bytes()));
        assert_eq!(code, Some(0), "{out}");
        assert!(out.starts_with(DEPLOYED), "{out}");
        let placed = cache.join("longhaul").join(name);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&placed).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        let dir_mode = std::fs::metadata(cache.join("longhaul"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o077, 0, "{dir_mode:o}");
        let (code, out) = run(
            &format!("{} ssh-server --port-range 1-2", far_command(name)),
            b"",
        );
        assert_eq!(code, Some(0));
        assert_eq!(out.trim(), "ran ssh-server --port-range 1-2");
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(cache.join("longhaul"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn the_loadable_image_of_this_binary_runs_and_is_a_fraction_of_it() {
        let whole = std::fs::read("/proc/self/exe").unwrap();
        let image = loadable_image(&whole).expect("this test binary is an ELF64");
        assert!(image.len() < whole.len());
        // The same bytes but for the section header fields.
        assert_eq!(image[..0x28], whole[..0x28]);
        assert_eq!(image[0x40..], whole[0x40..image.len()]);
        assert_eq!(image[0x28..0x30], [0; 8]);
        // It runs: the test binary lists its tests.
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("image");
        std::fs::write(&exe, &image).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o700)).unwrap();
        // Another test's fork may still hold the file open for writing for a moment
        // (ETXTBSY): tried again, bounded to a second.
        let mut tries = 0;
        let out = loop {
            match Command::new(&exe).args(["--list"]).output() {
                Err(e) if e.kind() == io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other.unwrap(),
            }
        };
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("loadable_image"));
        // Not an ELF, or one whose segments run past its end: sent whole.
        assert!(loadable_image(b"#!/bin/sh\n").is_none());
        assert!(loadable_image(&whole[..0x1000]).is_none());
    }

    #[test]
    fn this_binary_is_named_by_version_and_content() {
        let me = ThisBinary::current().unwrap();
        assert!(std::fs::metadata(&me.path).unwrap().len() > 0);
        let prefix = format!("longhaul-{}-", env!("CARGO_PKG_VERSION"));
        assert!(me.name.starts_with(&prefix), "{}", me.name);
        let hash = &me.name[prefix.len()..];
        assert_eq!(hash.len(), 16);
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{hash}");
        // The scripts are safe to single-quote for the far shell.
        for s in [far_command(&me.name), upload_command(&me.name)] {
            let inner = &s["sh -c '".len()..];
            let inner = &inner[..inner.rfind('\'').unwrap()];
            assert!(!inner.contains('\'') && !inner.contains('!'), "{s}");
        }
    }
}
