//! The ssh command line: `-e/--rsh` split as rsync splits it (white space separates words;
//! single quotes keep everything, double quotes keep everything but `\"` and `\\`; a
//! backslash outside quotes escapes the next character), then the port of an `ssh://`
//! target, the destination and the far command. No shell runs on this side.
//!
//! The far command is `REMOTE ssh-server [--port-range LO-HI]`; ssh joins it with spaces and
//! the far user's shell runs it, so `--remote-longhaul` may be a command (`"sudo
//! longhaul"`, `"~/bin/longhaul"`) as rsync's `--rsync-path` may.

use super::SshError;

/// The program and options used when no `-e` is given.
pub const DEFAULT_RSH: &str = "ssh";

/// Splits `-e/--rsh` into words.
pub fn split_rsh(value: &str) -> Result<Vec<String>, SshError> {
    let bad = |why: &str| SshError::BadRsh {
        value: value.to_string(),
        why: why.to_string(),
    };
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(bad("a single quote is not closed")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(bad("a double quote is not closed")),
                        },
                        Some(c) => word.push(c),
                        None => return Err(bad("a double quote is not closed")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err(bad("it ends with a backslash")),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    if words.is_empty() {
        return Err(bad("it names no program (e.g. -e \"ssh -p 2222\")"));
    }
    Ok(words)
}

/// The whole argument vector: the rsh words, `-p PORT` for an `ssh://host:port` target,
/// the destination, then the far command.
pub fn ssh_argv(
    rsh: &[String],
    port: Option<u16>,
    destination: &str,
    remote_longhaul: &str,
    far_args: &[String],
) -> Vec<String> {
    let mut command = vec![remote_longhaul.to_string(), "ssh-server".into()];
    command.extend(far_args.iter().cloned());
    ssh_argv_with(rsh, port, destination, &command)
}

/// The argument vector of another far command (`command`'s words, joined by ssh and run
/// by the far user's shell).
pub fn ssh_argv_with(
    rsh: &[String],
    port: Option<u16>,
    destination: &str,
    command: &[String],
) -> Vec<String> {
    let mut argv: Vec<String> = rsh.to_vec();
    if let Some(p) = port {
        argv.push("-p".into());
        argv.push(p.to_string());
    }
    argv.push(destination.to_string());
    argv.extend(command.iter().cloned());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Vec<String> {
        split_rsh(s).unwrap()
    }

    #[test]
    fn splits_like_rsync() {
        assert_eq!(split("ssh"), ["ssh"]);
        assert_eq!(
            split("  ssh -p 2222\t-i key -o StrictHostKeyChecking=no "),
            [
                "ssh",
                "-p",
                "2222",
                "-i",
                "key",
                "-o",
                "StrictHostKeyChecking=no"
            ]
        );
        assert_eq!(
            split(r#"ssh -i '/my keys/id' -o "ProxyCommand=nc -x p %h %p""#),
            [
                "ssh",
                "-i",
                "/my keys/id",
                "-o",
                "ProxyCommand=nc -x p %h %p"
            ]
        );
        assert_eq!(split(r#"a"b c"d 'e'f"#), ["ab cd", "ef"]);
        assert_eq!(
            split(r#""q\"uote" back\ slash "\n""#),
            ["q\"uote", "back slash", "\\n"]
        );
        assert_eq!(split("''"), [""]);
    }

    #[test]
    fn refuses_what_cannot_be_split() {
        for bad in ["", "   ", "ssh 'open", "ssh \"open", "ssh \\"] {
            let e = split_rsh(bad).unwrap_err().to_string();
            assert!(e.contains("--rsh"), "{e}");
        }
    }

    #[test]
    fn argv_order() {
        let argv = ssh_argv(
            &split("ssh -o BatchMode=yes"),
            Some(2222),
            "me@h",
            "/opt/longhaul",
            &["--port-range".into(), "6000-6010".into()],
        );
        assert_eq!(
            argv,
            [
                "ssh",
                "-o",
                "BatchMode=yes",
                "-p",
                "2222",
                "me@h",
                "/opt/longhaul",
                "ssh-server",
                "--port-range",
                "6000-6010"
            ]
        );
    }
}
