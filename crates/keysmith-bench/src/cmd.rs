//! The subcommands of `keysmith-bench` (what `keysmith bench` had, and
//! `partitions`, once `keysmith verify --partitions`): allocation rate and
//! block-boundary stalls on a store; keysmith beside what a user would pick
//! instead; the network-partition scenario.

use std::path::PathBuf;
use std::time::Duration;

use keysmith::sequence::Strategy;

use crate::chart;
use crate::compare::{self, Options};
use crate::rate::{self, RateReport};
use crate::rows;
use crate::stall::{self, StallReport};
use crate::{latency, limit, partitions};

use crate::Global;

/// Benchmarks.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Every client's benchmark entry point (clients/python/bench.py, node
    /// clients/typescript/bench.mjs, clients/java/bench.sh, clients/go/bench.sh)
    /// against one release `keysmith serve` on a temporary SQLite store: the
    /// bare loop, cached next() on 1 and N threads, next_n(100), worker-lease
    /// ids, one request per value and a /livez loop. Builds nothing; a client
    /// whose toolchain is missing is skipped. Prints `client\tcase\tper_second`
    /// and writes clients.tsv and clients.svg to --out.
    Clients {
        /// Seconds per case.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Threads (or concurrent callers) of the bare_8 and next_8 cases.
        #[arg(long, default_value_t = 8)]
        threads: usize,
        /// Only these clients (repeat or comma-separate).
        #[arg(long, value_enum, value_delimiter = ',')]
        only: Vec<crate::clients::Lang>,
        /// The keysmith binary to serve with (default: target/release/keysmith).
        #[arg(long, value_name = "PATH")]
        keysmith_bin: Option<PathBuf>,
        /// Where to write clients.tsv and clients.svg (default: docs/bench of this checkout).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
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
    /// Cached next() against a bare AtomicU64::fetch_add, in short
    /// alternating slices on one and two threads, each slice with how many
    /// of its threads were on a CPU at once and the load average. Prints a
    /// Markdown summary (--json: every slice).
    Limit {
        /// Seconds per slice.
        #[arg(long, default_value_t = 0.25)]
        slice: f64,
        /// Slices of each (keysmith, atomic) per thread count.
        #[arg(long, default_value_t = 10)]
        rounds: u32,
        /// Thread counts (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [1, 2])]
        threads: Vec<usize>,
    },
    /// Many sequences on one release `keysmith serve` (issue 50): creates N
    /// over HTTP, uses each once, and prints the create rate, the
    /// first-use rate, the hot sequence's next against a server with one
    /// name (alternating slices; during idle eviction and after it), the
    /// cost of a 404 against the same, and
    /// RSS before, at peak and after idle eviction. A Markdown table; with
    /// --out also names.md, names.json and names.svg there.
    Names {
        /// Name counts, each on fresh stores (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [1_000, 10_000])]
        count: Vec<usize>,
        /// Adds a run with 1 000 000 names.
        #[arg(long)]
        large: bool,
        /// Stores (comma-separated); postgres starts a throwaway PostgreSQL.
        #[arg(long = "stores", value_delimiter = ',', default_values = ["sqlite", "postgres"])]
        stores: Vec<crate::names::StoreKind>,
        /// The keysmith binary (a release build); default: the one beside
        /// keysmith-bench.
        #[arg(long, value_name = "PATH")]
        keysmith: Option<PathBuf>,
        /// Seconds of hot next per server.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// The servers' --handle-idle-secs.
        #[arg(long, default_value_t = 2)]
        idle_secs: u64,
        /// 404s per server.
        #[arg(long, default_value_t = 3_000)]
        misses: usize,
        /// Directory for names.md, names.json and names.svg.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Latency of POST next (count=1) at a fixed request rate beside GET
    /// /livez at the same rate, in alternating rows, on an in-process server
    /// over a fresh SQLite file: a sequence that refills during the run, one
    /// that never does and a leader-ordered one; slow requests grouped into
    /// stalls, each with where in its block it happened.
    Latency {
        /// Requests per second.
        #[arg(long, default_value_t = 5000.0)]
        rate: f64,
        /// Seconds per row.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Rounds of the four rows.
        #[arg(long, default_value_t = 3)]
        rounds: u32,
        /// Connections.
        #[arg(long, default_value_t = 16)]
        conns: usize,
        /// Block of the sequence that refills.
        #[arg(long, default_value_t = 10_000)]
        block: i64,
        /// Directory for the SQLite file.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// keysmith beside a bare atomic (the limit), uuid v7, ULID, PostgreSQL
    /// nextval and UPDATE ... RETURNING, MySQL LAST_INSERT_ID and
    /// AUTO_INCREMENT, Redis INCR; in process and over HTTP;
    /// each row with what it guarantees. Prints a Markdown table; with
    /// --out also writes it there with SVG charts and JSON.
    Compare {
        /// Seconds per row.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// keysmith block sizes (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [1, 100, 10_000])]
        block: Vec<i64>,
        /// A PostgreSQL server for its rows and keysmith's (a scratch
        /// sequence and table are created and dropped). Without it those rows
        /// are skipped.
        #[arg(long, value_name = "URL")]
        postgres: Option<String>,
        /// A MySQL/MariaDB database (mysql://...) for keysmith's MySQL rows, one
        /// per strategy, and MySQL's own (scratch tables are created and
        /// dropped; needs the mysql feature).
        #[arg(long, value_name = "URL")]
        mysql: Option<String>,
        /// An etcd server for keysmith's etcd rows (needs the etcd feature).
        #[arg(long, value_name = "URL")]
        etcd: Option<String>,
        /// redis://HOST:PORT of a throwaway Redis server: the bench switches
        /// its persistence (appendfsync always, then none) and puts it back.
        #[arg(long, value_name = "URL")]
        redis: Option<String>,
        /// Skip the HTTP rows.
        #[arg(long)]
        no_http: bool,
        /// Connections of the HTTP throughput rows.
        #[arg(long, default_value_t = 16)]
        conns: usize,
        /// Requests per second of the fixed-rate latency rows.
        #[arg(long, default_value_t = 5000.0)]
        rate: f64,
        /// Directory for the SQLite file of the SQLite rows.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Writes compare.md, compare.json, compare.svg and
        /// http-latency.svg into this directory (created if missing).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// A network partition (once `keysmith verify --partitions`): a
    /// throwaway PostgreSQL and three `keysmith serve`, each in a network
    /// namespace of its own, under load while PostgreSQL is cut off from one
    /// server for --seconds, then healed; every client's history checked.
    /// Needs Linux, root, `ip netns`, PostgreSQL's binaries and the
    /// `keysmith` binary; says what is missing and exits 2 otherwise.
    #[command(visible_alias = "verify-partitions")]
    Partitions {
        /// How long PostgreSQL stays cut off from one server, in seconds
        /// (more than 0, at most 86400).
        #[arg(long, default_value = "10", value_parser = partitions::seconds, allow_negative_numbers = true)]
        seconds: f64,
        /// The `keysmith` binary the servers run (default: `keysmith` beside
        /// this binary, as `cargo build -p keysmith-cli -p keysmith-bench`
        /// leaves it).
        #[arg(long, env = "KEYSMITH_BIN", value_name = "PATH")]
        keysmith: Option<PathBuf>,
    },
    /// A leader-ordered sequence over HTTP at 1, 4, 16 and 64 connections
    /// beside a cached sequence over HTTP and the store's bare durable-write
    /// loop, in the same run (the global --store, and --postgres if given).
    Leader {
        /// Seconds per row.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// A PostgreSQL server for its rows too.
        #[arg(long, value_name = "URL")]
        postgres: Option<String>,
        /// Directory for leader.md, leader.json and leader.svg.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

/// Runs a benchmark and prints a table (or JSON lines).
///
/// # Errors
/// Bad options, or a store or server that fails mid-run.
pub async fn run(cmd: BenchCommand, global: &Global) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Clients {
            seconds,
            threads,
            only,
            keysmith_bin,
            out,
        } => {
            // the checkout this binary was built from: the entry points live there
            let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
            let o = crate::clients::Options {
                seconds,
                threads,
                only,
                keysmith_bin: keysmith_bin.unwrap_or_else(|| root.join("target/release/keysmith")),
                out: out.unwrap_or_else(|| root.join("docs/bench")),
                root,
            };
            crate::clients::run(&o).await
        }
        BenchCommand::Partitions { seconds, keysmith } => {
            partitions::run(seconds, keysmith, global.json).await
        }
        BenchCommand::Leader {
            seconds,
            postgres,
            out,
        } => {
            if !(seconds > 0.0 && seconds <= 3600.0) {
                anyhow::bail!("--seconds must be between 0 and 3600, got {seconds}");
            }
            let d = Duration::from_secs_f64(seconds);
            let url = global.store_url();
            let first = if url.starts_with("postgres") {
                "PostgreSQL"
            } else if url.starts_with("etcd") {
                "etcd"
            } else {
                "SQLite"
            };
            let mut rows = crate::leader::rows(first, &url, d).await?;
            if let Some(pg) = postgres {
                rows.extend(crate::leader::rows("PostgreSQL", &pg, d).await?);
            }
            let table = crate::leader::markdown(&rows);
            if global.json {
                for r in &rows {
                    println!("{}", serde_json::to_string(r)?);
                }
            } else {
                print!("{table}");
            }
            if let Some(dir) = out {
                std::fs::create_dir_all(&dir)?;
                std::fs::write(dir.join("leader.md"), &table)?;
                std::fs::write(
                    dir.join("leader.json"),
                    serde_json::to_string_pretty(&rows)?,
                )?;
                std::fs::write(dir.join("leader.svg"), crate::chart::leader_svg(&rows)?)?;
            }
            Ok(())
        }
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
                println!(
                    "store: {}  strategy: {strategy}  {seconds} s each",
                    keysmith::store::redact_url(&url)
                );
                println!(
                    "{:>8} {:>8} {:>14} {:>14} {:>10}",
                    "block", "clients", "values/s", "reservations", "conflicts"
                );
            }
            for &b in &block {
                for &c in &clients {
                    let r = rate::allocation_rate(
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
                    keysmith::store::redact_url(&global.store_url())
                );
                println!(
                    "{:>9} {:>10} {:>10} {:>12} {:>16}",
                    "prefetch", "p50", "p99.9", "max", "max at boundary"
                );
            }
            for prefetch in [false, true] {
                let r = stall::stall(
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
        BenchCommand::Latency {
            rate,
            seconds,
            rounds,
            conns,
            block,
            dir,
        } => {
            let report = latency::run(&latency::Options {
                rate,
                seconds,
                rounds,
                conns,
                block,
                dir: dir.unwrap_or_else(std::env::temp_dir),
            })
            .await?;
            if global.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", latency::markdown(&report));
            }
            Ok(())
        }
        BenchCommand::Limit {
            slice,
            rounds,
            threads,
        } => {
            let report = limit::run(&limit::Options {
                slice,
                rounds,
                threads,
            })
            .await?;
            if global.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", limit::markdown(&report));
            }
            Ok(())
        }
        BenchCommand::Names {
            mut count,
            large,
            stores,
            keysmith,
            seconds,
            idle_secs,
            misses,
            out,
        } => {
            if large {
                count.push(1_000_000);
            }
            let keysmith =
                crate::partitions::keysmith_binary(keysmith).map_err(|e| anyhow::anyhow!(e))?;
            let rows = crate::names::run(&crate::names::Options {
                counts: count,
                stores,
                keysmith,
                seconds,
                idle_secs,
                misses,
            })
            .await?;
            let table = crate::names::markdown(&rows);
            if global.json {
                println!("{}", serde_json::to_string(&rows)?);
            } else {
                print!("{table}");
            }
            if let Some(dir) = out {
                std::fs::create_dir_all(&dir)?;
                std::fs::write(dir.join("names.md"), &table)?;
                std::fs::write(dir.join("names.json"), serde_json::to_string_pretty(&rows)?)?;
                std::fs::write(dir.join("names.svg"), crate::chart::names_svg(&rows)?)?;
            }
            Ok(())
        }
        BenchCommand::Compare {
            seconds,
            block,
            postgres,
            mysql,
            etcd,
            redis,
            no_http,
            conns,
            rate,
            dir,
            out,
        } => {
            let o = Options {
                seconds,
                blocks: block,
                dir: dir.unwrap_or_else(std::env::temp_dir),
                postgres,
                mysql,
                etcd,
                redis,
                http: !no_http,
                conns,
                rate,
            };
            if let Some(out) = &out {
                std::fs::create_dir_all(out)
                    .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", out.display()))?;
            }
            let report = compare::run(&o).await?;
            let md = rows::markdown(&report);
            if global.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{md}");
            }
            if let Some(out) = &out {
                let write = |name: &str, text: &str| {
                    let p = out.join(name);
                    std::fs::write(&p, text)
                        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))
                };
                write("compare.md", &md)?;
                write("compare.json", &serde_json::to_string_pretty(&report)?)?;
                write("compare.svg", &chart::throughput_svg(&report)?)?;
                if let Some(svg) = chart::latency_svg(&report)? {
                    write("http-latency.svg", &svg)?;
                }
                eprintln!("wrote {}", out.display());
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
