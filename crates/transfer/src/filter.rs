//! `--exclude PATTERN` / `--include PATTERN`: rsync's include/exclude rules (man rsync,
//! "INCLUDE/EXCLUDE PATTERN RULES"), sans-I/O.
//!
//! Rules are tried in command-line order and the first that matches decides; a path no
//! rule matches is included. A pattern:
//! - ending in `/` matches directories only (the `/` is not part of the match);
//! - starting with `/` is anchored at the top of the transfer; otherwise it matches at the
//!   end of the path: a pattern with no `/` (other than a trailing one) and no `**`
//!   matches the last component at any depth (`*.o`), one with a `/` inside and no `**`
//!   matches the path's last components (`sub/*.o`: `x/sub/a.o`), one with `**` is tried
//!   at every component boundary (or only at the top when it starts with `**`);
//! - `*` matches any bytes but `/`, `**` any bytes including `/`, `?` one byte but `/`,
//!   `[a-z]` / `[!x]` / `[^x]` a byte of a class (`[:digit:]` and the other POSIX classes
//!   inside brackets too; never `/`), `\` makes the next byte literal;
//! - `dir/***` matches `dir` (a directory) and everything below it.
//!
//! **The top of the transfer.** longhaul's entry paths start with each source's base name
//! (`cp -r src host:` lists `src`, `src/a.o`, `src/sub/b.c`). Rules see the path below that
//! name, as rsync sees a source given with a trailing slash (`rsync -a src/ dst/`): the
//! entry `src/sub/b.c` is matched as `sub/b.c`, so `/sub` means `src/sub` and `/a.o` means
//! `src/a.o`. The sources named on the command line (entries of one component) are never
//! filtered: only what is inside them.
//!
//! An excluded directory is not descended into ([`Filter::excludes_entry`] is asked before
//! a walk lists a directory), so nothing below it is sent, whatever later rules say
//! (rsync's `+ */` is how a rule set reaches into every directory).
//!
//! Bounds: at most [`MAX_RULES`] rules of at most [`MAX_PATTERN_BYTES`] bytes each (the
//! wire message carrying them to a server must also fit one frame). Matching is a
//! simulation of the pattern's automaton over the path's bytes: time in
//! O(pattern x path) per rule, no backtracking blow-up whatever the pattern.

use crate::error::{display_path, Error, Result};

/// Most rules in one transfer.
pub const MAX_RULES: usize = 1000;
/// Longest pattern, in bytes (a path's bound).
pub const MAX_PATTERN_BYTES: usize = 4095;

/// The rules of one transfer, in command-line order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    rules: Vec<Rule>,
}

/// One `--include` or `--exclude` rule, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    include: bool,
    /// The pattern as given (sent to the peer as is).
    text: Vec<u8>,
    /// Matches directories only (a trailing `/`).
    dir_only: bool,
    /// Where in the path the pattern is tried.
    scope: Scope,
    /// The pattern, without its anchor and trailing `/`.
    tokens: Vec<Token>,
    /// `dir/***`: the tokens of `dir`, which also matches as a directory.
    dir_itself: Option<Vec<Token>>,
}

/// Where a pattern is matched in a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// The last component only (no `/`, no `**`).
    LastComponent,
    /// The whole path (anchored with `/`, or starting with `**`).
    Whole,
    /// The last `n` components (a `/` inside, no `**`).
    LastComponents(usize),
    /// Any suffix starting at a component boundary (`**` inside).
    AnySuffix,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Byte(u8),
    /// `?`
    Any,
    /// `[...]`: 256 bits, and whether it was negated (already applied to the bits).
    Class(Box<[bool; 256]>),
    /// `*`
    Star,
    /// `**`
    DoubleStar,
}

impl Filter {
    /// Compiles `(include, pattern)` rules in command-line order.
    pub fn new<P: AsRef<[u8]>>(rules: impl IntoIterator<Item = (bool, P)>) -> Result<Self> {
        let mut out = Vec::new();
        for (i, (include, pattern)) in rules.into_iter().enumerate() {
            let pattern = pattern.as_ref();
            if i == MAX_RULES {
                return Err(Error::FilterRule {
                    rule: i + 1,
                    pattern: display_path(pattern),
                    why: format!(
                        "more than {MAX_RULES} rules; use fewer, broader patterns (`*` and `**`)"
                    ),
                });
            }
            out.push(Rule::compile(i + 1, include, pattern)?);
        }
        Ok(Self { rules: out })
    }

    /// No rules: everything is included.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules as given, `(include, pattern)`, for the wire.
    pub fn rules(&self) -> Vec<(bool, Vec<u8>)> {
        self.rules
            .iter()
            .map(|r| (r.include, r.text.clone()))
            .collect()
    }

    /// Whether the path `rel`, relative to the top of the transfer (below the source's
    /// base name, see the module docs; no leading `/`), is excluded. `is_dir`: it is a
    /// directory. Ancestors are not consulted: a walk never asks below an excluded
    /// directory.
    pub fn excludes(&self, rel: &[u8], is_dir: bool) -> bool {
        if rel.is_empty() {
            return false;
        }
        for r in &self.rules {
            if r.matches(rel, is_dir) {
                return !r.include;
            }
        }
        false
    }

    /// [`Filter::excludes`] of an entry path as it travels (starting with the source's
    /// base name): a source itself (one component) is never excluded.
    pub fn excludes_entry(&self, entry_path: &[u8], is_dir: bool) -> bool {
        match below_top(entry_path) {
            Some(rel) => self.excludes(rel, is_dir),
            None => false,
        }
    }
}

/// The part of an entry path below its first component (the source's base name), `None`
/// for the source itself.
pub fn below_top(entry_path: &[u8]) -> Option<&[u8]> {
    let slash = entry_path.iter().position(|&b| b == b'/')?;
    Some(&entry_path[slash + 1..])
}

impl Rule {
    fn compile(number: usize, include: bool, text: &[u8]) -> Result<Self> {
        let bad = |why: String| Error::FilterRule {
            rule: number,
            pattern: display_path(text),
            why,
        };
        if text.len() > MAX_PATTERN_BYTES {
            return Err(bad(format!(
                "{} bytes; a pattern holds at most {MAX_PATTERN_BYTES}",
                text.len()
            )));
        }
        if text.contains(&0) {
            return Err(bad("contains a NUL byte, which no path holds".into()));
        }
        let mut p = text;
        let anchored = p.first() == Some(&b'/');
        if anchored {
            p = &p[1..];
        }
        let mut dir_only = false;
        while let Some(rest) = p.strip_suffix(b"/") {
            dir_only = true;
            p = rest;
        }
        let mut dir_itself = None;
        let body: Vec<u8> = if let Some(dir) = p.strip_suffix(b"/***") {
            dir_itself = Some(dir.to_vec());
            [dir, b"/**"].concat()
        } else {
            p.to_vec()
        };
        if body.is_empty() || dir_itself.as_ref().is_some_and(Vec::is_empty) {
            return Err(bad(
                "matches nothing: give a name or a wildcard (e.g. `*.o`, `/build`, `cache/`)"
                    .into(),
            ));
        }
        let tokens = tokenize(&body).map_err(bad)?;
        let double = tokens.contains(&Token::DoubleStar);
        let slashes = tokens.iter().filter(|t| **t == Token::Byte(b'/')).count();
        let scope = if anchored || tokens.first() == Some(&Token::DoubleStar) {
            Scope::Whole
        } else if double {
            Scope::AnySuffix
        } else if slashes > 0 {
            Scope::LastComponents(slashes + 1)
        } else {
            Scope::LastComponent
        };
        let dir_itself = match dir_itself {
            Some(d) => Some(tokenize(&d).map_err(bad)?),
            None => None,
        };
        Ok(Self {
            include,
            text: text.to_vec(),
            dir_only,
            scope,
            tokens,
            dir_itself,
        })
    }

    fn matches(&self, rel: &[u8], is_dir: bool) -> bool {
        if self.dir_only && !is_dir {
            return false;
        }
        if self.matches_tokens(&self.tokens, rel) {
            return true;
        }
        match &self.dir_itself {
            Some(t) if is_dir => self.matches_tokens(t, rel),
            _ => false,
        }
    }

    fn matches_tokens(&self, tokens: &[Token], rel: &[u8]) -> bool {
        match self.scope {
            Scope::Whole => wildmatch(tokens, rel),
            Scope::LastComponent => {
                let start = rel.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
                wildmatch(tokens, &rel[start..])
            }
            Scope::LastComponents(n) => {
                let mut seen = 0;
                let mut start = 0;
                for (i, &b) in rel.iter().enumerate().rev() {
                    if b == b'/' {
                        seen += 1;
                        if seen == n {
                            start = i + 1;
                            break;
                        }
                    }
                }
                wildmatch(tokens, &rel[start..])
            }
            Scope::AnySuffix => {
                wildmatch(tokens, rel)
                    || rel
                        .iter()
                        .enumerate()
                        .filter(|(_, &b)| b == b'/')
                        .any(|(i, _)| wildmatch(tokens, &rel[i + 1..]))
            }
        }
    }
}

/// The pattern's tokens; an unclosed `[` or a trailing `\` is an error.
fn tokenize(p: &[u8]) -> std::result::Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            b'\\' => {
                let b = *p.get(i + 1).ok_or_else(|| {
                    "ends in `\\`, which escapes nothing; write `\\\\` for a backslash".to_string()
                })?;
                out.push(Token::Byte(b));
                i += 2;
            }
            b'?' => {
                out.push(Token::Any);
                i += 1;
            }
            b'*' => {
                let run = p[i..].iter().take_while(|&&b| b == b'*').count();
                // Adjacent stars are one wildcard: `**` and more cross `/`.
                if out.last() != Some(&Token::DoubleStar) && out.last() != Some(&Token::Star) {
                    out.push(if run >= 2 {
                        Token::DoubleStar
                    } else {
                        Token::Star
                    });
                }
                i += run;
            }
            b'[' => {
                let (class, used) = class(&p[i..])?;
                out.push(Token::Class(class));
                i += used;
            }
            b => {
                out.push(Token::Byte(b));
                i += 1;
            }
        }
    }
    Ok(out)
}

/// A bracket expression at the start of `p`: its byte set (`/` never in it) and its
/// length in bytes.
fn class(p: &[u8]) -> std::result::Result<(Box<[bool; 256]>, usize), String> {
    let unclosed = || "has a `[` without its `]`; write `\\[` for a literal bracket".to_string();
    let mut set = Box::new([false; 256]);
    let mut i = 1;
    let negated = matches!(p.get(i), Some(b'!' | b'^'));
    if negated {
        i += 1;
    }
    let mut first = true;
    loop {
        let &b = p.get(i).ok_or_else(unclosed)?;
        if b == b']' && !first {
            i += 1;
            break;
        }
        first = false;
        if b == b'[' && p.get(i + 1) == Some(&b':') {
            let rest = &p[i + 2..];
            let end = rest
                .windows(2)
                .position(|w| w == b":]")
                .ok_or_else(unclosed)?;
            let name = &rest[..end];
            let test: fn(&u8) -> bool = match name {
                b"alnum" => u8::is_ascii_alphanumeric,
                b"alpha" => u8::is_ascii_alphabetic,
                b"digit" => u8::is_ascii_digit,
                b"lower" => u8::is_ascii_lowercase,
                b"upper" => u8::is_ascii_uppercase,
                b"space" => u8::is_ascii_whitespace,
                b"punct" => u8::is_ascii_punctuation,
                b"xdigit" => u8::is_ascii_hexdigit,
                b"blank" => |c: &u8| *c == b' ' || *c == b'\t',
                b"cntrl" => u8::is_ascii_control,
                b"graph" => u8::is_ascii_graphic,
                b"print" => |c: &u8| c.is_ascii_graphic() || *c == b' ',
                other => {
                    return Err(format!(
                        "unknown character class [:{}:]",
                        String::from_utf8_lossy(other)
                    ))
                }
            };
            for c in 0..=255u8 {
                if test(&c) {
                    set[c as usize] = true;
                }
            }
            i += 2 + end + 2;
            continue;
        }
        let (lo, used) = match b {
            b'\\' => (*p.get(i + 1).ok_or_else(unclosed)?, 2),
            _ => (b, 1),
        };
        i += used;
        let hi = if p.get(i) == Some(&b'-') && p.get(i + 1).is_some_and(|&c| c != b']') {
            let (hi, used) = match p[i + 1] {
                b'\\' => (*p.get(i + 2).ok_or_else(unclosed)?, 3),
                c => (c, 2),
            };
            i += used;
            hi
        } else {
            lo
        };
        for c in lo..=hi {
            set[c as usize] = true;
        }
    }
    if negated {
        for v in set.iter_mut() {
            *v = !*v;
        }
    }
    set[b'/' as usize] = false;
    Ok((set, i))
}

/// Whether `tokens` match all of `s`: the set of pattern positions reachable after each
/// byte (a Thompson simulation), so no pattern backtracks exponentially.
fn wildmatch(tokens: &[Token], s: &[u8]) -> bool {
    let n = tokens.len();
    let mut cur = vec![false; n + 1];
    let mut next = vec![false; n + 1];
    cur[0] = true;
    close(tokens, &mut cur);
    for &c in s {
        next.iter_mut().for_each(|v| *v = false);
        let mut any = false;
        for i in 0..n {
            if !cur[i] {
                continue;
            }
            let (stay, advance) = match &tokens[i] {
                Token::Byte(b) => (false, *b == c),
                Token::Any => (false, c != b'/'),
                Token::Class(set) => (false, set[c as usize]),
                Token::Star => (c != b'/', false),
                Token::DoubleStar => (true, false),
            };
            if stay {
                next[i] = true;
                any = true;
            }
            if advance {
                next[i + 1] = true;
                any = true;
            }
        }
        if !any {
            return false;
        }
        close(tokens, &mut next);
        std::mem::swap(&mut cur, &mut next);
    }
    cur[n]
}

/// Adds the positions reachable without a byte (past stars matching nothing).
fn close(tokens: &[Token], set: &mut [bool]) {
    for i in 0..tokens.len() {
        if set[i] && matches!(tokens[i], Token::Star | Token::DoubleStar) {
            set[i + 1] = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(rules: &[(bool, &str)]) -> Filter {
        Filter::new(rules.iter().map(|&(i, p)| (i, p.as_bytes()))).unwrap()
    }
    fn ex(rules: &[&str]) -> Filter {
        f(&rules.iter().map(|&p| (false, p)).collect::<Vec<_>>())
    }

    #[test]
    fn no_rules_include_everything() {
        let none = Filter::default();
        assert!(!none.excludes(b"a", false));
        assert!(!none.excludes(b"a/b", true));
    }

    /// man rsync: `- *.o` excludes every file (and directory) whose name ends in `.o`.
    #[test]
    fn star_o_at_any_depth() {
        let r = ex(&["*.o"]);
        assert!(r.excludes(b"a.o", false));
        assert!(r.excludes(b"sub/deep/x.o", false));
        assert!(r.excludes(b"d.o", true));
        assert!(!r.excludes(b"a.c", false));
        assert!(!r.excludes(b"a.o/b.c", false), "only the last component");
        assert!(!r.excludes(b"a.oo", false));
    }

    /// man rsync: `+ */`, `+ *.c`, `- *` keeps every directory and C source file.
    #[test]
    fn include_dirs_and_c_then_exclude_all() {
        let r = f(&[(true, "*/"), (true, "*.c"), (false, "*")]);
        assert!(!r.excludes(b"src", true));
        assert!(!r.excludes(b"src/deep", true));
        assert!(!r.excludes(b"src/deep/x.c", false));
        assert!(r.excludes(b"src/deep/x.h", false));
        assert!(r.excludes(b"README", false));
        // A file named like a directory is not a directory.
        assert!(r.excludes(b"notes", false));
    }

    /// man rsync: `/foo` matches `foo` at the top only; `foo/` matches directories only.
    #[test]
    fn anchored_and_dir_only() {
        let r = ex(&["/foo"]);
        assert!(r.excludes(b"foo", false));
        assert!(r.excludes(b"foo", true));
        assert!(!r.excludes(b"sub/foo", false));
        let r = ex(&["foo/"]);
        assert!(r.excludes(b"foo", true));
        assert!(r.excludes(b"a/b/foo", true));
        assert!(!r.excludes(b"foo", false));
        let r = ex(&["/foo/"]);
        assert!(r.excludes(b"foo", true) && !r.excludes(b"x/foo", true));
    }

    /// man rsync: `dir/**` matches everything below `dir` (not `dir` itself);
    /// `dir/***` both.
    #[test]
    fn double_star() {
        let r = ex(&["dir/**"]);
        assert!(!r.excludes(b"dir", true));
        assert!(r.excludes(b"dir/a", false));
        assert!(r.excludes(b"dir/b/c", false));
        assert!(r.excludes(b"x/dir/b/c", false), "unanchored: any depth");
        let r = ex(&["/dir/**"]);
        assert!(!r.excludes(b"x/dir/b", false));
        let r = ex(&["dir/***"]);
        assert!(r.excludes(b"dir", true));
        assert!(r.excludes(b"dir/a/b", false));
        assert!(
            !r.excludes(b"dir", false),
            "a file named dir is not the directory"
        );
        let r = ex(&["/a/**/z"]);
        assert!(r.excludes(b"a/b/c/z", false));
        assert!(
            !r.excludes(b"a/z", false),
            "`/**/` needs a directory between"
        );
        let r = ex(&["**/tmp"]);
        assert!(r.excludes(b"x/y/tmp", false));
        assert!(!r.excludes(b"tmp", false), "`**/` needs a directory before");
    }

    /// A `/` inside makes the pattern match the path's last components (rsync: the last
    /// slash count + 1 elements).
    #[test]
    fn inner_slash_matches_the_tail() {
        let r = ex(&["sub/*.o"]);
        assert!(r.excludes(b"sub/a.o", false));
        assert!(r.excludes(b"x/y/sub/a.o", false));
        assert!(!r.excludes(b"xsub/a.o", false));
        assert!(!r.excludes(b"sub/z/a.o", false));
    }

    #[test]
    fn wildcards_and_classes() {
        let r = ex(&["?.[a-c]"]);
        assert!(r.excludes(b"x.b", false));
        assert!(!r.excludes(b"xy.b", false));
        assert!(!r.excludes(b"x.d", false));
        let r = ex(&["[!x]*"]);
        assert!(r.excludes(b"abc", false));
        assert!(!r.excludes(b"xbc", false));
        let r = ex(&["*[[:digit:]]"]);
        assert!(r.excludes(b"log1", false) && !r.excludes(b"log", false));
        let r = ex(&["a\\*"]);
        assert!(r.excludes(b"a*", false) && !r.excludes(b"ab", false));
        let r = ex(&["[]x]"]);
        assert!(r.excludes(b"]", false) && r.excludes(b"x", false));
        // `*` and `?` never cross `/`.
        let r = ex(&["/a*b"]);
        assert!(!r.excludes(b"a/b", false));
        let r = ex(&["/a?b"]);
        assert!(!r.excludes(b"a/b", false));
        let r = ex(&["/a[!x]b"]);
        assert!(!r.excludes(b"a/b", false));
    }

    #[test]
    fn first_match_wins() {
        let r = f(&[(true, "keep.o"), (false, "*.o")]);
        assert!(!r.excludes(b"keep.o", false));
        assert!(r.excludes(b"other.o", false));
        let r = f(&[(false, "*.o"), (true, "keep.o")]);
        assert!(r.excludes(b"keep.o", false));
    }

    #[test]
    fn sources_themselves_are_never_filtered() {
        let r = ex(&["*"]);
        assert!(!r.excludes_entry(b"src", true));
        assert!(r.excludes_entry(b"src/a", false));
        let r = ex(&["/a"]);
        assert!(r.excludes_entry(b"src/a", false));
        assert!(!r.excludes_entry(b"a", false));
        assert!(!r.excludes_entry(b"src/b/a", false));
    }

    #[test]
    fn bounds_and_bad_patterns_are_refused() {
        let many = vec![(false, b"x".to_vec()); MAX_RULES];
        assert!(Filter::new(many.clone()).is_ok());
        let mut more = many;
        more.push((false, b"x".to_vec()));
        let e = Filter::new(more).unwrap_err().to_string();
        assert!(e.contains("more than 1000 rules"), "{e}");
        assert!(Filter::new([(false, vec![b'a'; MAX_PATTERN_BYTES])]).is_ok());
        let e = Filter::new([(false, vec![b'a'; MAX_PATTERN_BYTES + 1])])
            .unwrap_err()
            .to_string();
        assert!(e.contains("4096 bytes"), "{e}");
        for bad in ["", "/", "//", "[abc", "x\\", "a\0b", "[[:nope:]]"] {
            let e = Filter::new([(false, bad.as_bytes())]);
            assert!(e.is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn many_stars_do_not_blow_up() {
        let p = "*a".repeat(2000);
        let r = ex(&[&p]);
        let s = vec![b'a'; 4000];
        assert!(!r.excludes(&[&s[..], b"b"].concat(), false));
        assert!(r.excludes(&s, false));
    }
}
