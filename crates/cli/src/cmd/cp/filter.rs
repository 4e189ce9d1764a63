//! The tree filter's arguments (`--exclude`, `--include`, `--delete`), shared by `cp` and
//! `sync`, and their parsing from clap's matches.

/// `--exclude PATTERN`, `--include PATTERN` (repeatable; their order on the command line is
/// kept across both, as rsync's) and `--delete`, for any command that copies trees (`cp`,
/// `sync`): flatten it into the command's arguments.
#[derive(Debug, Clone, Default)]
pub struct FilterArgs {
    /// `(include, pattern)` in command-line order.
    pub rules: Vec<(bool, Vec<u8>)>,
    /// `--delete`.
    pub delete: bool,
}

impl FilterArgs {
    /// The compiled rules (a bad pattern is refused, naming it).
    pub fn filter(&self) -> anyhow::Result<longhaul_transfer::Filter> {
        longhaul_transfer::Filter::new(self.rules.iter().map(|(i, p)| (*i, p.as_slice())))
            .map_err(|e| anyhow::anyhow!("{e}"))
    }
}

impl clap::FromArgMatches for FilterArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        use std::os::unix::ffi::OsStrExt;
        let mut rules: Vec<(usize, bool, Vec<u8>)> = Vec::new();
        for (id, include) in [("exclude", false), ("include", true)] {
            if let (Some(values), Some(at)) =
                (m.get_many::<std::ffi::OsString>(id), m.indices_of(id))
            {
                rules.extend(
                    values
                        .zip(at)
                        .map(|(v, i)| (i, include, v.as_bytes().to_vec())),
                );
            }
        }
        rules.sort_by_key(|r| r.0);
        Ok(Self {
            rules: rules.into_iter().map(|(_, i, p)| (i, p)).collect(),
            delete: m.get_flag("delete"),
        })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for FilterArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        use clap::{Arg, ArgAction};
        let rule = |id: &'static str, help: &'static str| {
            Arg::new(id)
                .long(id)
                .value_name("PATTERN")
                .action(ArgAction::Append)
                .allow_hyphen_values(true)
                .value_parser(clap::value_parser!(std::ffi::OsString))
                .help(help)
        };
        cmd.arg(rule(
            "exclude",
            "Leave out what PATTERN matches (rsync's rules: `*.o`, `/build`, `cache/`, \
             `dir/**`; first matching --exclude/--include wins; a leading / anchors at the \
             top of each source directory). Repeatable.",
        ))
        .arg(rule(
            "include",
            "Keep what PATTERN matches even if a later --exclude would leave it out \
             (`--include '*/' --include '*.c' --exclude '*'`). Repeatable.",
        ))
        .arg(
            Arg::new("delete")
                .long("delete")
                .action(ArgAction::SetTrue)
                .help(
                    "Remove from the destination what the source lacks, inside the \
                     directories the copy sends (needs -r); what --exclude leaves out is \
                     kept.",
                ),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}
