//! `keysmith bench`: allocation rate and block-boundary stalls on a store.

use std::time::Duration;

use keysmith::bench::{self, RateReport, StallReport};
use keysmith::sequence::Strategy;

use crate::Global;

/// Benchmarks.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Durable allocation rate: clients calling next() for a while.
    Rate {
        /// Block sizes to measure (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [1, 100, 10_000])]
        block: Vec<i64>,
        /// Concurrent clients, each with its own connection (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [1, 8])]
        clients: Vec<usize>,
        /// optimistic, locked or atomic.
        #[arg(long, default_value_t = Strategy::Optimistic)]
        strategy: Strategy,
        /// Seconds per measurement.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
    },
    /// The longest next() while crossing block boundaries, with and without prefetch.
    Stall {
        /// Block size.
        #[arg(long, default_value_t = 1000)]
        block: i64,
        /// Block boundaries to cross.
        #[arg(long, default_value_t = 50)]
        blocks: u64,
        /// Microseconds of client work between calls.
        #[arg(long, default_value_t = 20)]
        pause_us: u64,
    },
}

/// Runs a benchmark and prints a table (or JSON lines).
pub async fn run(cmd: BenchCommand, global: &Global) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Rate {
            block,
            clients,
            strategy,
            seconds,
        } => {
            if !(seconds > 0.0 && seconds <= 3600.0) {
                anyhow::bail!("--seconds must be between 0 and 3600, got {seconds}");
            }
            let url = global.store_url();
            if !global.json {
                println!("store: {url}  strategy: {strategy}  {seconds} s each");
                println!(
                    "{:>8} {:>8} {:>14} {:>14} {:>10}",
                    "block", "clients", "values/s", "reservations", "conflicts"
                );
            }
            for &b in &block {
                for &c in &clients {
                    let r = bench::allocation_rate(
                        &url,
                        b,
                        c,
                        strategy,
                        Duration::from_secs_f64(seconds),
                    )
                    .await?;
                    print_rate(&r, global.json)?;
                }
            }
            Ok(())
        }
        BenchCommand::Stall {
            block,
            blocks,
            pause_us,
        } => {
            let store = global.open().await?;
            if !global.json {
                println!(
                    "store: {}  block {block}, {blocks} boundaries, {pause_us} us of work between calls",
                    global.store_url()
                );
                println!(
                    "{:>9} {:>10} {:>10} {:>12} {:>16}",
                    "prefetch", "p50", "p99.9", "max", "max at boundary"
                );
            }
            for prefetch in [false, true] {
                let r = bench::stall(
                    store.clone(),
                    block,
                    blocks,
                    prefetch,
                    Duration::from_micros(pause_us),
                )
                .await?;
                print_stall(&r, global.json)?;
            }
            Ok(())
        }
    }
}

fn print_rate(r: &RateReport, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
    } else {
        println!(
            "{:>8} {:>8} {:>14.0} {:>14} {:>10}",
            r.block, r.clients, r.values_per_sec, r.reservations, r.conflicts
        );
    }
    Ok(())
}

fn print_stall(r: &StallReport, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
    } else {
        let us = |ns: u64| format!("{:.1} us", ns as f64 / 1000.0);
        println!(
            "{:>9} {:>10} {:>10} {:>12} {:>16}",
            if r.prefetch { "on" } else { "off" },
            us(r.p50_ns),
            us(r.p999_ns),
            us(r.max_ns),
            us(r.max_at_boundary_ns)
        );
    }
    Ok(())
}
