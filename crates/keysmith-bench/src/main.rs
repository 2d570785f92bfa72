//! `keysmith-bench`: keysmith's lab, outside the product. The benchmarks
//! (allocation rate, block-boundary stalls, the hot path against a bare
//! atomic, HTTP latency, keysmith beside what a user would pick instead)
//! and the network-partition scenario run by hand. Unpublished: run it from
//! a clone of the repository, `cargo run -p keysmith-bench --release --
//! compare ...`. The library has no benchmark code in its public API, and the
//! `keysmith` binary links none of this.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

mod chart;
mod clients;
mod cmd;
mod compare;
mod http;
mod latency;
mod leader;
mod limit;
mod names;
mod partitions;
mod rate;
mod redis;
mod rows;
mod stall;
mod strict;

/// keysmith's lab: benchmarks beside their baselines, and the
/// network-partition scenario (what `keysmith bench` and `keysmith verify
/// --partitions` were).
#[derive(Debug, Parser)]
#[command(name = "keysmith-bench", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: cmd::BenchCommand,
}

/// Options every subcommand takes.
#[derive(Debug, clap::Args)]
pub struct Global {
    /// Store URL of `rate` and `stall`: sqlite://PATH, postgres://USER@HOST/DB,
    /// mysql://USER@HOST/DB, etcd://HOST:PORT[/PREFIX]. Default: $KEYSMITH_STORE,
    /// else sqlite://keysmith.db.
    #[arg(long, global = true, value_name = "URL")]
    store: Option<String>,
    /// Print structured output as JSON.
    #[arg(long, global = true)]
    json: bool,
}

impl Global {
    /// The store URL to use.
    pub fn store_url(&self) -> String {
        self.store
            .clone()
            .unwrap_or_else(keysmith::store::default_url)
    }

    /// Opens the store.
    pub async fn open(&self) -> keysmith::Result<std::sync::Arc<dyn keysmith::store::Store>> {
        keysmith::store::open(&self.store_url()).await
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Errors only unless `RUST_LOG` says otherwise: the output is tables.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
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
    match runtime.block_on(cmd::run(cli.command, &cli.global)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
