//! `longhaul serve`: the server end of bench runs and of `longhaul cp` transfers
//! (`--root DIR`: the only directory transfers may read and write).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use longhaul_engine::bench::DEFAULT_PORT;
use longhaul_engine::daemon::transfer::ServedFiles;
use longhaul_engine::daemon::{Area, Areas, ServeConfig, ServeLimits, Server};
use longhaul_engine::transport::tls::{ServerIdentity, ServerTls};

use super::common::{duration_long, rate, size, TokenArgs};
use super::serve_config::AreaConfig;
use longhaul_proto::{Keyring, Token};
use longhaul_sys::served_root::ServedRoot;
use longhaul_transfer::session::{CapsSetBy, ListCaps};

/// Arguments of `longhaul serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Settings from a TOML file, as defaults for the flags (each key a flag's long name
    /// with `_` for `-`: `root = "/srv/data"`, `memory = "8GiB"`, `metrics =
    /// "127.0.0.1:9290"`); a flag on the command line wins. See contrib/serve.toml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Address to listen on (default `::`, which takes IPv4 and IPv6).
    #[arg(long)]
    pub listen: Option<IpAddr>,
    /// TCP port for control and data connections (default 5290).
    #[arg(short, long)]
    pub port: Option<u16>,
    /// Serve one session (of a client that proved the token), then exit with its outcome
    /// (a session that only issued a third-party copy's ticket does not count: the
    /// ticket's pull is the one served).
    #[arg(long)]
    pub once: bool,
    /// Receiver-side pacing for runs this server receives: clamp each stream's advertised
    /// window to RATE / streams x RTT (the University of Tokyo's fix for slow receivers).
    #[arg(long, value_name = "RATE", value_parser = rate)]
    pub rx_rate: Option<u64>,
    /// Serve `longhaul cp` transfers below DIR (nothing outside it is ever read or
    /// written); without it, transfers are refused.
    #[arg(long, value_name = "DIR")]
    pub root: Option<std::path::PathBuf>,
    /// Directory holding the server's TLS key and certificate (`server.key`,
    /// `server.crt`), made on first start (default: ~/.config/longhaul). Clients pin the
    /// certificate's fingerprint, printed at start, on first contact.
    #[arg(long, value_name = "DIR")]
    pub identity_dir: Option<std::path::PathBuf>,
    /// Keep the set-user-ID, set-group-ID and sticky bits of pushed files and
    /// directories. By default they are dropped (as an rsync daemon does), so a token
    /// holder cannot place a setuid program, which a server running as root would own.
    /// Only for token holders trusted as much as this server's user.
    #[arg(long)]
    pub keep_setuid: bool,
    /// Memory the server commits to sessions at once (e.g. `4GiB`; default half of
    /// the RAM): each session reserves its streams' socket buffers and, on a push, one
    /// chunk per stream; a push's chunks are made smaller to fit, and a session that
    /// cannot fit is refused with what to lower (`--streams`, `--chunk`, `--window`) or
    /// told the server is full. Logged at start and in every session's line.
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub memory: Option<u64>,
    /// Refuse a push whose files hold more than SIZE together (`500GB`, `2TiB`), before
    /// any data is sent (files already in place count too: the cap is on the request).
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub max_bytes: Option<u64>,
    /// Refuse a push that names more than N files and directories, before any data is
    /// sent.
    #[arg(long, value_name = "N")]
    pub max_files: Option<u64>,
    /// At start, remove the work files (`.NAME.longhaul-part`, `.NAME.longhaul-manifest`)
    /// below the root last changed longer ago than AGE (`7d`), as `longhaul clean` does.
    #[arg(long, value_name = "AGE", value_parser = duration_long)]
    pub clean_stale: Option<std::time::Duration>,
    /// Connections that have not proved the token yet, at most (default 256; a quarter
    /// of it is the soft cap, three quarters the cap for one address). Past it, each
    /// newcomer closes the stalest of them; connections that proved themselves are never
    /// closed for a stranger. Each costs a thread until it proves itself or its 5 s
    /// deadline passes.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max_pending: Option<u32>,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics: connections, refusals by
    /// reason, sessions by outcome and under way, payload bytes each way, the memory
    /// budget. Plain HTTP, no authentication: give a loopback or management address.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<SocketAddr>,
    /// Write the log as JSON lines (`{"time": UNIX_SECONDS, "message": ...}`), for a log
    /// collector, instead of `longhaul serve: ...` text.
    #[arg(long)]
    pub log_json: bool,
    /// Where a third-party copy may make this server pull from (`longhaul cp
    /// longhaul://A/x longhaul://THIS/y`: a client that proved a token names A, and this
    /// server connects there): `any` (the default), `none`, or address blocks
    /// (`10.0.0.0/8,2001:db8::/32`). A source whose address is outside is refused before
    /// any connection.
    #[arg(long, value_name = "NETS", value_parser = clap::value_parser!(longhaul_policy::RelayFrom))]
    pub relay_from: Option<longhaul_policy::RelayFrom>,
    #[command(flatten)]
    pub token: TokenArgs,
    /// The exported areas of the `--config` file (none: `--root` and the one token).
    #[arg(skip)]
    pub areas: Vec<super::serve_config::AreaConfig>,
}

/// Runs `longhaul serve`.
pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    if let Some(file) = args.config.clone() {
        super::serve_config::apply(&mut args, &file)?;
    }
    super::serve_config::check_root(&args)?;
    let log: longhaul_engine::daemon::server::LogFn = if args.log_json {
        Arc::new(|line: &str| {
            let time = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            let line = longhaul_proto::printable(line);
            eprintln!("{}", serde_json::json!({ "time": time, "message": line }));
        })
    } else {
        Arc::new(|line: &str| eprintln!("longhaul serve: {}", longhaul_proto::printable(line)))
    };
    let (files, keyring) = if args.areas.is_empty() {
        let keyring = args.token.load()?.into();
        let files = match &args.root {
            Some(dir) => ServedFiles::Root(Arc::new(open_root(dir, "--root")?)),
            None => ServedFiles::Nothing,
        };
        (files, keyring)
    } else {
        served_areas(&args.areas, &log)?
    };
    if let Some(age) = args.clean_stale {
        let roots = match &files {
            ServedFiles::Root(root) => vec![root.as_ref()],
            ServedFiles::Areas(areas) => areas.list().iter().map(|a| a.root.as_ref()).collect(),
            _ => Vec::new(),
        };
        for root in roots {
            super::clean::clean_root(root, age, false, &mut |line| log(line))?;
        }
    }
    let id_dir = match &args.identity_dir {
        Some(d) => d.clone(),
        None => longhaul_engine::token::default_token_path()?
            .parent()
            .map(|p| p.to_path_buf())
            .context("no directory for the server's identity; pass --identity-dir DIR")?,
    };
    let (identity, made) = ServerIdentity::load_or_create(&id_dir)?;
    let tls = ServerTls::new(&identity)?;
    log(&format!(
        "TLS certificate {} ({} {})",
        tls.fingerprint(),
        if made { "made now in" } else { "from" },
        id_dir.display()
    ));
    let listen = SocketAddr::new(
        args.listen.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
        args.port.unwrap_or(DEFAULT_PORT),
    );
    let server = Server::bind(
        ServeConfig {
            listen,
            keyring,
            once: args.once,
            rx_rate_bps: args.rx_rate,
            files,
            tls,
            keep_setuid: args.keep_setuid,
            caps: ListCaps {
                max_bytes: args.max_bytes,
                max_files: args.max_files,
                set_by: CapsSetBy::Flags,
            },
            relay_from: args.relay_from.clone().unwrap_or_default(),
        },
        log.clone(),
    )
    .with_context(|| format!("cannot listen on {listen}"))?;
    let server = match args.max_pending {
        Some(n) => server.with_limits(ServeLimits::with_max_pending(n as usize)),
        None => server,
    };
    let server = match args.memory {
        Some(bytes) if bytes < 64 << 20 => {
            anyhow::bail!("--memory {bytes} is below the 64 MiB a single session needs")
        }
        Some(bytes) => server.with_memory(bytes),
        None => server,
    };
    log(&format!(
        "{}{}",
        server.memory_report(),
        if args.memory.is_none() {
            " (default: half of the RAM; --memory SIZE)"
        } else {
            ""
        }
    ));
    if let Some(at) = args.metrics {
        let listener = std::net::TcpListener::bind(at)
            .with_context(|| format!("cannot serve --metrics on {at}"))?;
        let figures = server.metrics();
        std::thread::Builder::new()
            .name("lh-metrics".into())
            .spawn(move || longhaul_engine::daemon::metrics::serve_metrics(listener, figures))
            .context("starting the metrics endpoint")?;
        log(&format!("metrics at http://{at}/metrics"));
    }
    let addr = server.local_addr()?;
    log(&format!("listening on {addr}"));
    match server.serve(None).context("accepting connections")? {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            log(&format!("the session failed: {e}"));
            Ok(ExitCode::from(1))
        }
    }
}

/// Opens a directory to serve; the error says which setting named it.
fn open_root(dir: &Path, setting: &str) -> anyhow::Result<ServedRoot> {
    ServedRoot::open(dir).with_context(|| {
        format!(
            "cannot serve {} ({setting} must name an existing directory)",
            dir.display()
        )
    })
}

/// The areas of the config file, and the keyring of every token that opens one.
fn served_areas(
    areas: &[AreaConfig],
    log: &longhaul_engine::daemon::server::LogFn,
) -> anyhow::Result<(ServedFiles, Keyring)> {
    let mut loaded: Vec<Vec<Token>> = Vec::new();
    for area in areas {
        let mut mine = Vec::new();
        for file in &area.token_files {
            let (token, _) = longhaul_engine::token::load_token(Some(file))
                .with_context(|| format!("area {}", area.name))?;
            mine.push(token);
        }
        loaded.push(mine);
    }
    // The keyring keeps a token named by several areas once; each area holds its places.
    let keyring =
        Keyring::new(loaded.iter().flatten().cloned().collect()).context("the config's areas")?;
    let mut list = Vec::new();
    for (area, mine) in areas.iter().zip(&loaded) {
        let tokens = mine.iter().filter_map(|t| keyring.position(t)).collect();
        let setting = format!("the root of area {}", area.name);
        let user = area
            .user
            .as_deref()
            .map(|name| run_as(&area.name, name))
            .transpose()?;
        list.push(Area {
            name: area.name.clone(),
            root: Arc::new(open_root(&area.root, &setting)?),
            read_only: area.read_only,
            caps: ListCaps {
                max_bytes: area.max_bytes,
                max_files: area.max_files,
                set_by: CapsSetBy::Area,
            },
            tokens,
            user,
        });
        log(&format!(
            "area {}: {} ({}, {} token{}{})",
            area.name,
            area.root.display(),
            if area.read_only {
                "read-only"
            } else {
                "read-write"
            },
            area.token_files.len(),
            if area.token_files.len() == 1 { "" } else { "s" },
            area.user
                .as_deref()
                .map(|u| format!(", as user {u}"))
                .unwrap_or_default()
        ));
    }
    let areas = Areas::new(list).map_err(|e| anyhow::anyhow!("the config's areas: {e}"))?;
    Ok((ServedFiles::Areas(Arc::new(areas)), keyring))
}

/// The local user area `area`'s sessions run as; only a server started as root can.
fn run_as(area: &str, name: &str) -> anyhow::Result<longhaul_sys::creds::UserCreds> {
    let me = longhaul_sys::creds::thread_uids().1;
    if me != 0 {
        anyhow::bail!(
            "area {area}: user = {name:?} needs the server started as root (it runs as uid \
             {me}); start it as root, or leave user out and the area is served as uid {me}"
        );
    }
    let who = longhaul_sys::creds::lookup_user(name)
        .with_context(|| format!("area {area}: user = {name:?}"))?;
    if who.uid == 0 {
        anyhow::bail!(
            "area {area}: user = {name:?} is root: name the unprivileged user the area's \
             files belong to, or leave user out"
        );
    }
    Ok(who)
}
