//! `kura`: the command-line entry point. `kura server` runs the
//! memcached-compatible server; `kura bench` loads a server and measures it;
//! `kura log` checks and repairs an update-log directory; `kura ring`
//! prints which server of a cluster holds each key; `kura http` runs the
//! caching reverse proxy (kura-http); `kura proxy` the memcached router
//! (kura-proxy).

mod generate;
mod log;
mod logging;
mod memcached_conf;
mod process;
mod ring;

use clap::{Parser, Subcommand};
use kura_server::{Server, ServerArgs};

#[derive(Parser)]
#[command(
    name = "kura",
    version,
    propagate_version = true,
    about = "kura (蔵): a caching toolkit for busy web backends"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines are written: text (coloured only on a terminal) or
    /// json (one object a line, for log shippers)
    #[arg(long, global = true, value_name = "text|json")]
    log_format: Option<logging::LogFormat>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the memcached-compatible cache server (memcached's flags).
    #[command(disable_version_flag = true)]
    Server(Box<ServerArgs>),
    /// Load a memcached-protocol server and measure throughput and latency.
    Bench(Box<kura_bench::BenchArgs>),
    /// Inspect or repair an update-log directory.
    #[command(subcommand)]
    Log(log::LogCommand),
    /// Print the server of each key read from stdin, as a client places it.
    Ring(ring::RingArgs),
    /// Run the caching HTTP reverse proxy (RFC 9111) in front of a backend.
    Http(Box<HttpCommand>),
    /// Run the memcached router (text, meta and binary clients) in front of
    /// pools of memcached-protocol servers.
    Proxy(Box<ProxyCommand>),
    /// Write kura's man pages or shell completions (for packages).
    #[command(subcommand, hide = true)]
    Generate(generate::GenerateCommand),
}

/// `kura proxy`'s flags, with the verbosity the other commands have.
#[derive(clap::Args)]
struct ProxyCommand {
    #[command(flatten)]
    args: kura_proxy::ProxyArgs,
    /// Log more (-v info, -vv debug, -vvv trace).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
}

/// `kura http`'s flags, with the verbosity the other commands have.
#[derive(clap::Args)]
struct HttpCommand {
    #[command(flatten)]
    args: kura_http::HttpArgs,
    /// Log more (-v info, -vv debug, -vvv trace).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
}

fn main() {
    // Debian's /etc/memcached.conf, read as memcached's flags.
    let (args, conf_warnings) = match memcached_conf::expand(std::env::args_os().collect()) {
        Ok(expanded) => expanded,
        Err(e) => {
            eprintln!("kura: {e:#}");
            std::process::exit(64);
        }
    };
    let cli = Cli::parse_from(args);
    let log_format = cli.log_format;
    let result = match cli.command {
        Command::Server(args) => run_server(*args, log_format, conf_warnings),
        Command::Bench(args) => run_bench(&args),
        Command::Log(cmd) => std::process::exit(log::run(cmd)),
        Command::Http(cmd) => run_http(*cmd, log_format.unwrap_or_default()),
        Command::Proxy(cmd) => run_proxy(*cmd, log_format.unwrap_or_default()),
        Command::Generate(cmd) => generate::run::<Cli>(&cmd),
        Command::Ring(args) => ring::run(
            &args,
            std::io::stdin().lock(),
            std::io::BufWriter::new(std::io::stdout().lock()),
        ),
    };
    if let Err(e) = result {
        eprintln!("kura: {e:#}");
        std::process::exit(64);
    }
}

/// Exits with status 1 when the run counted errors (wrong values, error
/// replies, failed connections), so that scripts notice.
fn run_bench(args: &kura_bench::BenchArgs) -> anyhow::Result<()> {
    let report = kura_bench::run(args, &mut std::io::stdout().lock())?;
    let errors = report.errors();
    if errors > 0 {
        eprintln!("kura bench: {errors} errors");
        std::process::exit(1);
    }
    Ok(())
}

fn run_http(cmd: HttpCommand, log_format: logging::LogFormat) -> anyhow::Result<()> {
    logging::init(cmd.verbose.max(1), log_format);
    let config = kura_http::Config::load(&cmd.args)?;
    kura_http::run(config).map_err(|e| anyhow::anyhow!(e))
}

fn run_proxy(cmd: ProxyCommand, log_format: logging::LogFormat) -> anyhow::Result<()> {
    if let Some(path) = &cmd.args.from_nutcracker {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let t = kura_proxy::nutcracker::translate(&text, &path.display().to_string())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        print!("{}", t.toml);
        for note in &t.notes {
            eprintln!("kura proxy: not translated: {note}");
        }
        return Ok(());
    }
    logging::init(cmd.verbose.max(1), log_format);
    let config = kura_proxy::Config::load(&cmd.args)?;
    if cmd.args.check_config {
        let backends: std::collections::BTreeSet<String> = config
            .pools
            .iter()
            .filter_map(|p| p.ring.as_ref())
            .flat_map(|r| r.servers().iter().map(|s| s.address()))
            .collect();
        println!(
            "kura proxy: configuration OK: {} pools, {} backends, {} routes",
            config.pools.len(),
            backends.len(),
            config.routes.len()
        );
        return Ok(());
    }
    Ok(kura_proxy::run(config)?)
}

fn run_server(
    args: ServerArgs,
    log_format: Option<logging::LogFormat>,
    conf_warnings: Vec<String>,
) -> anyhow::Result<()> {
    if args.version {
        // What `memcached -V` prints, which scripts read, then kura's own.
        println!("memcached {}", kura_server::VERSION);
        println!("kura {}", kura_server::KURA_VERSION);
        return Ok(());
    }
    let (config, opts, warnings) = args.into_config()?;
    config.validate()?;
    if opts.daemonize {
        process::daemonize()?;
    }
    logging::init(config.verbosity, log_format.unwrap_or(config.log_format));
    let signals = process::Signals::catch()?;
    for w in conf_warnings.into_iter().chain(warnings) {
        tracing::warn!("{w}");
    }
    process::raise_fd_limit(config.max_connections);
    if opts.enable_coredumps {
        process::enable_coredumps();
    }
    if opts.lock_memory {
        process::lock_memory();
    }
    let server = Server::bind(config.clone())?;
    if let Some(user) = &config.user {
        process::switch_user(user)?;
    }
    if let Some(path) = &config.pidfile {
        std::fs::write(path, format!("{}\n", std::process::id()))
            .map_err(|e| anyhow::anyhow!("cannot write pid file {}: {e}", path.display()))?;
    }
    // As memcached: a port file that cannot be written is reported, not fatal.
    if let Some(path) = std::env::var_os(kura_server::port_file::ENV) {
        let path = std::path::PathBuf::from(path);
        if let Err(e) = server.write_port_file(&path) {
            tracing::error!("cannot write the port file {}: {e}", path.display());
        }
    }
    if let Some(addr) = server.local_addr() {
        tracing::info!(
            "kura {} serving memcached {} on {addr}",
            kura_server::KURA_VERSION,
            kura_server::VERSION
        );
    }
    let handle = server.start()?;
    kura_service::ready();
    signals.wait_for_stop(handle.shared());
    let durable = handle.shared().keyspace.durable().cloned();
    handle.shutdown();
    handle.join();
    if let Some(path) = &config.pidfile {
        let _ = std::fs::remove_file(path);
    }
    // A server stopped by its log's failure says so to its supervisor
    // (Restart=on-failure restarts it).
    if durable.is_some_and(|d| d.health().failed()) {
        anyhow::bail!("stopped: the update log failed (see above)");
    }
    Ok(())
}
