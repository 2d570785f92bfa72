//! The `keysmith` command: parses arguments, calls the library, prints.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod cmd;

/// keysmith hands out unique keys: durable sequences, value pools, shard keys,
/// host counters.
#[derive(Debug, Parser)]
#[command(name = "keysmith", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Options every subcommand takes.
#[derive(Debug, clap::Args)]
pub struct Global {
    /// Store URL: sqlite://PATH, postgres://USER@HOST/DB, mysql://USER@HOST/DB, etcd://HOST:PORT[/PREFIX].
    /// Default: $KEYSMITH_STORE, else sqlite://keysmith.db.
    #[arg(long, global = true, value_name = "URL")]
    store: Option<String>,
    /// Print structured output as JSON.
    #[arg(long, global = true)]
    json: bool,
    /// A keysmith server to use instead of a store (https://HOST:PORT);
    /// several (repeated, or comma-separated) fail over in order. Default:
    /// $KEYSMITH_SERVER unless --store is given. Not with --store.
    #[arg(long, global = true, value_name = "URL", value_delimiter = ',')]
    server: Vec<String>,
    /// With --server: a file holding the bearer token (default:
    /// $KEYSMITH_TOKEN). A trailing newline is ignored.
    #[arg(long, global = true, value_name = "PATH")]
    token_file: Option<std::path::PathBuf>,
    /// With --server: the CA certificate (PEM) that signed the server's
    /// certificate (default: the system's CAs).
    #[arg(long, global = true, value_name = "PEM")]
    ca_file: Option<std::path::PathBuf>,
    /// With --server: a client certificate (PEM), for servers that ask for
    /// one; with --key-file.
    #[arg(long, global = true, value_name = "PEM", requires = "key_file")]
    cert_file: Option<std::path::PathBuf>,
    /// With --cert-file: its private key (PEM).
    #[arg(long, global = true, value_name = "PEM", requires = "cert_file")]
    key_file: Option<std::path::PathBuf>,
}

/// The environment variable naming the server(s) of `--server`.
pub const SERVER_ENV: &str = "KEYSMITH_SERVER";
/// The environment variable holding the token of `--server`.
pub const TOKEN_ENV: &str = "KEYSMITH_TOKEN";

impl Global {
    /// The store URL to use.
    pub fn store_url(&self) -> String {
        self.store
            .clone()
            .unwrap_or_else(keysmith::store::default_url)
    }

    /// The client config file ([`cmd::client_config`]), unless `--store`
    /// is given (a store needs none of it).
    fn config(&self) -> Result<Option<cmd::client_config::ClientConfig>, cmd::UsageError> {
        if self.store.is_some() {
            return Ok(None);
        }
        cmd::client_config::load()
    }

    /// The servers to use and where they were named: `--server`, else
    /// `$KEYSMITH_SERVER` when no `--store` is given, else the config file's
    /// `server` when `$KEYSMITH_STORE` is not set either (the environment
    /// wins over the file); empty for a store.
    fn servers(
        &self,
        config: Option<&cmd::client_config::ClientConfig>,
    ) -> Result<(Vec<String>, String), cmd::UsageError> {
        if !self.server.is_empty() {
            if self.store.is_some() {
                return Err(cmd::UsageError(
                    "--server and --store name two different places to take keys from; give one"
                        .into(),
                ));
            }
            return Ok((self.server.clone(), "--server".into()));
        }
        if self.store.is_some() {
            return Ok((Vec::new(), String::new()));
        }
        let from_env: Vec<String> = std::env::var(SERVER_ENV)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if !from_env.is_empty() {
            return Ok((from_env, format!("${SERVER_ENV}")));
        }
        if std::env::var_os("KEYSMITH_STORE").is_some() {
            return Ok((Vec::new(), String::new()));
        }
        Ok(match config {
            Some(c) if !c.servers.is_empty() => (
                c.servers.clone(),
                format!("the config file {}", c.path.display()),
            ),
            _ => (Vec::new(), String::new()),
        })
    }

    /// The client of the server(s) to use, `None` for a store. Each setting
    /// comes from its flag, else the environment, else the config file.
    ///
    /// # Errors
    /// A [`cmd::UsageError`] for `--server` with `--store` or a bad config
    /// file; the client's setup errors (a bad token, token file, CA file or
    /// certificate).
    pub fn client(&self) -> anyhow::Result<Option<keysmith_client::Client>> {
        let config = self.config()?;
        let (servers, _) = self.servers(config.as_ref())?;
        if servers.is_empty() {
            return Ok(None);
        }
        let file = config.unwrap_or_default();
        let token = match &self.token_file {
            Some(p) => Some(keysmith_client::Token::from_file(p)?),
            None => match keysmith_client::Token::from_env(TOKEN_ENV)? {
                Some(t) => Some(t),
                None => file
                    .token_file
                    .as_ref()
                    .map(|p| keysmith_client::Token::from_file(p.as_path()))
                    .transpose()?,
            },
        };
        let mut b = keysmith_client::Client::builder();
        for s in servers {
            b = b.url(s);
        }
        if let Some(t) = token {
            b = b.token(t);
        }
        if let Some(ca) = self.ca_file.as_ref().or(file.ca_file.as_ref()) {
            b = b.ca_file(ca);
        }
        let pair = match (&self.cert_file, &self.key_file) {
            (Some(c), Some(k)) => Some((c, k)),
            _ => file.cert_file.as_ref().zip(file.key_file.as_ref()),
        };
        if let Some((c, k)) = pair {
            b = b.client_cert(c, k);
        }
        Ok(Some(b.build()?))
    }

    /// Opens the store, creating an SQLite file that is not there.
    ///
    /// # Errors
    /// When a server is meant (`--server`, `$KEYSMITH_SERVER`, or
    /// `$KEYSMITH_TOKEN` with no `--store`): a command that does not work
    /// against a server says so and opens nothing. Else the store's errors.
    pub async fn open(&self) -> anyhow::Result<std::sync::Arc<dyn keysmith::store::Store>> {
        self.refuse_server()?;
        Ok(keysmith::store::open(&self.store_url()).await?)
    }

    /// Opens the store for a command that only reads or takes: an SQLite
    /// file that is not there is an error (a fresh file has nothing to read
    /// and would hand out values another store hands out too).
    ///
    /// # Errors
    /// As [`Global::open`]; a missing SQLite file.
    pub async fn open_existing(
        &self,
    ) -> anyhow::Result<std::sync::Arc<dyn keysmith::store::Store>> {
        self.refuse_server()?;
        let url = self.store_url();
        if let Some(path) = url.strip_prefix("sqlite://") {
            let path = path.split('?').next().unwrap_or_default();
            if !path.is_empty() && path != ":memory:" && !std::path::Path::new(path).exists() {
                anyhow::bail!(
                    "there is no store at {path} (store {url}); nothing was created. To use a shared keysmith \
                     service give --server URL (or $KEYSMITH_SERVER); for a local store, make it with \
                     `keysmith create NAME` or name it with --store"
                );
            }
        }
        Ok(keysmith::store::open(&url).await?)
    }

    /// An error when a server is meant and this command runs on a store.
    fn refuse_server(&self) -> anyhow::Result<()> {
        let config = self.config()?;
        let (servers, named_by) = self.servers(config.as_ref())?;
        if !servers.is_empty() {
            anyhow::bail!(
                "this command works on a store, not against a keysmith server (named by {named_by}); \
                 give --store URL to run it on a store"
            );
        }
        if self.store.is_none() && std::env::var_os("KEYSMITH_STORE").is_none() {
            if std::env::var_os(TOKEN_ENV).is_some() {
                anyhow::bail!(
                    "${TOKEN_ENV} is set but no server is named: give --server URL (or ${SERVER_ENV}) to use \
                     the shared keysmith service, or --store URL to use a store; no local store was opened"
                );
            }
            if self.token_file.is_some() || self.ca_file.is_some() || self.cert_file.is_some() {
                return Err(cmd::UsageError(
                    "--token-file, --ca-file and --cert-file go with --server URL".into(),
                )
                .into());
            }
        }
        Ok(())
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(flatten)]
    Sequence(cmd::sequence::SequenceCommand),
    /// Value pools: N free numbers, taken with little contention.
    #[command(subcommand)]
    Pool(cmd::pool::PoolCommand),
    /// Deprecated: the benchmarks moved to the repository's lab binary,
    /// keysmith-bench (`cargo run -p keysmith-bench --release -- compare`).
    /// Says so and exits 2.
    #[command(hide = true, disable_help_flag = true)]
    Bench(cmd::moved::BenchArgs),
    /// Per-host counters: `<hostname>/<number>` names without a store.
    #[command(subcommand)]
    Counter(cmd::counter::CounterCommand),
    /// Structured row names: parse them, allocate revision numbers.
    #[command(subcommand)]
    RowName(cmd::row_name::RowNameCommand),
    /// Shard keys: encode and decode external strings, identity ranges per shard.
    #[command(subcommand)]
    ShardKey(cmd::shard_key::ShardKeyCommand),
    /// Shard sets: record each shard's id in its database, check a configuration.
    #[command(subcommand)]
    ShardSet(cmd::shard_set::ShardSetCommand),
    /// Time-ordered 64-bit ids: worker ids leased from the store, time guarded by it.
    #[command(subcommand)]
    Ids(cmd::ids::IdsCommand),
    /// Worker-id leases for other generators (sonyflake, bwmarrin/snowflake):
    /// lease, renew, release.
    #[command(subcommand)]
    Workers(cmd::workers::WorkersCommand),
    /// Gap-free numbers (sequences created with --gapless): take one with a
    /// ticket, then commit or release it.
    #[command(subcommand)]
    Ticket(cmd::ticket::TicketCommand),
    /// Prints the state of the store, or with --server of the server: per
    /// sequence and pool, what exists, its runway and rate.
    ///
    /// One line per sequence (next, remaining, max, the rate every process
    /// reserves at by the store's rate marks, the runway to max at that
    /// rate, values no clean close accounted for) and per pool (start,
    /// size, runway). Rates and runways need a second of history ("-" and
    /// "–" before); they are read for the first 100 sequences and pools.
    /// With --server the lines are those the server's GET /v1/status gives
    /// (the names the token may read), each followed by what that server's
    /// own handle served and at what rate over its last ten seconds, which
    /// a store does not record; a sequence a server holds a block of shows
    /// that block as reserved (next is past it).
    Status(cmd::status::StatusArgs),
    /// Moves from Meituan Leaf or Didi Tinyid.
    ///
    /// Makes one sequence per row of their MySQL table, starting above its
    /// max_id. Needs a keysmith built with MySQL support (cargo feature
    /// `mysql`).
    Import(cmd::import::ImportArgs),
    /// A live view of the busiest names: rates, runways, leader leases.
    ///
    /// Redrawn every second; the keys r, n and w sort by rate, name and
    /// runway, q quits. On a store (--store) or a server (--server);
    /// --once prints one snapshot as text.
    Top(cmd::top::TopArgs),
    /// Runs the HTTP service (default 127.0.0.1:7878) until SIGTERM or ctrl-c.
    Serve(Box<cmd::serve::ServeArgs>),
    /// Access files of `serve --access-file`: hash a token, check a file.
    #[command(subcommand)]
    Access(cmd::access::AccessCommand),
    /// Checks no value repeats on this store.
    ///
    /// Worker processes allocate from a scratch sequence and pool while some
    /// are killed with SIGKILL.
    Verify(cmd::verify::VerifyArgs),
    /// One worker of `verify` (started by it, not by hand).
    #[command(hide = true)]
    VerifyWorker(cmd::verify::WorkerArgs),
    /// Prints a shell completion script (bash, zsh, fish, elvish, powershell).
    ///
    /// For the whole command tree, e.g.
    /// `keysmith completions bash > /etc/bash_completion.d/keysmith`.
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Prints the man page keysmith(1), or keysmith-SUBCOMMAND(1), in roff.
    ///
    /// E.g. `keysmith man | man -l -`, `keysmith man serve > keysmith-serve.1`.
    Man {
        /// A subcommand whose page to print (`serve`, `pool`, ...).
        subcommand: Option<String>,
    },
}

/// What a command logs when `RUST_LOG` is not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogDefault {
    /// `keysmith serve`: keysmith's own `info` (handles handed back, shutdown)
    /// and every crate's warnings.
    Service,
    /// One-shot commands: errors only (a command reports its own failure on
    /// stderr; its output is for scripts).
    Command,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event (colours on a terminal).
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `message`, the event's
    /// fields, `target`, and `span` with the request's `request_id`, `method`
    /// and `path` for lines written while a request runs.
    Json,
}

/// Installs the log subscriber: to stderr, filtered by `RUST_LOG`
/// (`tracing-subscriber`'s env filter syntax, e.g.
/// `RUST_LOG=keysmith=debug`), else by `default`. Installs nothing the
/// second time.
pub fn init_logging(default: LogDefault, format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(match default {
            LogDefault::Service => "warn,keysmith=info,keysmith_server=info,keysmith_cli=info",
            LogDefault::Command => "error",
        })
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
}

/// Parses the command line; for `serve --config FILE`, with the file's
/// options added where the command line did not give them
/// ([`cmd::serve_config`]). Exits 2 with a message on a usage error, in the
/// file too.
fn parse_cli() -> Cli {
    let args: Vec<OsString> = std::env::args_os().collect();
    let matches = Cli::command().get_matches_from(&args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let Command::Serve(serve) = &cli.command else {
        return cli;
    };
    let Some(file) = serve.config_file() else {
        return cli;
    };
    let Some(given) = matches.subcommand_matches("serve") else {
        return cli;
    };
    let mut command = Cli::command();
    command.build();
    let Some(serve_command) = command.find_subcommand("serve") else {
        return cli;
    };
    let on_command_line = |id: &str| given.value_source(id) == Some(ValueSource::CommandLine);
    let usage_error = |msg: String| -> ! {
        eprintln!("error: {msg}");
        std::process::exit(2)
    };
    let extra = match cmd::serve_config::options_from_file(file, serve_command, on_command_line) {
        Ok(extra) => extra,
        Err(e) => usage_error(format!("{e:#}")),
    };
    let all = args.into_iter().chain(extra);
    Cli::try_parse_from(all).unwrap_or_else(|e| {
        let msg = e.render().to_string();
        usage_error(format!(
            "in the config file {}: {}",
            file.display(),
            msg.trim_start_matches("error: ").trim_end()
        ))
    })
}

/// jemalloc, whose freed pages go back to the system ten seconds or so
/// after they fall idle: a server's RSS follows its open handles, where
/// glibc's malloc kept what a burst of handles had used (issue 50).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = parse_cli();
    // jemalloc's purging thread, for the process that lives long; without
    // it (it failed to start) pages are purged as allocations go on.
    #[cfg(not(target_env = "msvc"))]
    if matches!(cli.command, Command::Serve(_)) {
        let _ = tikv_jemalloc_ctl::background_thread::write(true);
    }
    // `serve` installs its subscriber once it has printed its address: that
    // line comes first.
    if !matches!(cli.command, Command::Serve(_)) {
        init_logging(LogDefault::Command, LogFormat::Text);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Sequence(c) => cmd::sequence::run(c, &cli.global).await,
            Command::Pool(c) => cmd::pool::run(c, &cli.global).await,
            Command::Bench(a) => Err(cmd::moved::bench(&a).into()),
            Command::Counter(c) => cmd::counter::run(c, &cli.global).await,
            Command::RowName(c) => cmd::row_name::run(c, &cli.global).await,
            Command::ShardKey(c) => cmd::shard_key::run(c, &cli.global).await,
            Command::ShardSet(c) => cmd::shard_set::run(c, &cli.global).await,
            Command::Ids(c) => cmd::ids::run(c, &cli.global).await,
            Command::Ticket(c) => cmd::ticket::run(c, &cli.global).await,
            Command::Workers(c) => cmd::workers::run(c, &cli.global).await,
            Command::Import(a) => cmd::import::run(a, &cli.global).await,
            Command::Top(a) => cmd::top::run(a, &cli.global).await,
            Command::Status(a) => cmd::status::run(a, &cli.global).await,
            Command::Serve(a) => cmd::serve::run(*a, &cli.global).await,
            Command::Access(c) => cmd::access::run(c, &cli.global).await,
            Command::Verify(a) => cmd::verify::run(a, &cli.global).await,
            Command::VerifyWorker(a) => cmd::verify::worker(a, &cli.global).await,
            Command::Completions { shell } => cmd::docs::completions(shell),
            Command::Man { subcommand } => cmd::docs::man(subcommand.as_deref()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            // The library names the operation; the CLI names its command.
            if let Some(a) = e
                .downcast_ref::<keysmith::Error>()
                .and_then(|e| e.fence_advice())
            {
                let skip = a.min_skip.map_or_else(|| "N".to_owned(), |s| s.to_string());
                eprintln!("hint: keysmith fence {} --skip {skip}", a.name);
            }
            if e.downcast_ref::<cmd::UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

#[cfg(test)]
mod help_tests {
    use clap::CommandFactory;

    /// Every command and subcommand says what it does, and every argument
    /// and option what it is: `--help` never lists a bare flag.
    #[test]
    fn every_command_and_argument_has_help() {
        let mut root = super::Cli::command();
        root.build();
        root.clone().debug_assert();
        let mut missing = Vec::new();
        let mut stack = vec![(String::from("keysmith"), root)];
        while let Some((path, cmd)) = stack.pop() {
            if cmd.get_about().is_none() && path != "keysmith" {
                missing.push(format!("{path}: no about"));
            }
            for arg in cmd.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !builtin && !arg.is_hide_set() && arg.get_help().is_none() {
                    missing.push(format!("{path} {}: no help", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_name() != "help" && !sub.is_hide_set() {
                    stack.push((format!("{path} {}", sub.get_name()), sub.clone()));
                }
            }
        }
        assert!(missing.is_empty(), "{missing:#?}");
    }
}
