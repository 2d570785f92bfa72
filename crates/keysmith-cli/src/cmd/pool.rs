//! `pool create`, `pool take`, `pool show`, `pool members`, `pool list`,
//! `pool drop`.

use std::io::Write;

use keysmith::DEFAULT_RETRY_BUDGET;
use keysmith::pool::{self, DEFAULT_SAMPLE, MAX_BATCH, PoolInfo, ValuePool};
use keysmith::store::{DEFAULT_POOL_START, PoolSpec};

use crate::Global;

/// Value pool commands.
#[derive(Debug, clap::Subcommand)]
pub enum PoolCommand {
    /// Creates a pool holding the numbers START..START+SIZE (with
    /// --increment, the SIZE values of the class from START on).
    Create {
        /// Its name: 1 to 512 bytes, no whitespace or control characters.
        name: String,
        /// How many numbers the pool holds at all times.
        #[arg(long, allow_negative_numbers = true)]
        size: i64,
        /// The first number (with --increment, rounded up into the class).
        #[arg(long, default_value_t = DEFAULT_POOL_START, allow_negative_numbers = true)]
        start: i64,
        /// A residue class: every number is --offset modulo --increment.
        #[command(flatten)]
        class: super::ClassArgs,
        /// Start at --start even if a dropped pool of this name handed out
        /// numbers at or above it. By default creating a dropped name
        /// continues above the numbers it handed out; use this only when
        /// none of them is in use any more.
        #[arg(long)]
        start_below_dropped: bool,
    },
    /// Takes numbers from a pool and prints them, one a line, each as soon
    /// as it is taken.
    Take {
        /// The pool.
        name: String,
        /// How many numbers.
        #[arg(long, short = 'n', default_value_t = 1, allow_negative_numbers = true)]
        count: i64,
        /// Members read per sample.
        #[arg(long, default_value_t = DEFAULT_SAMPLE)]
        sample: usize,
        /// How long one take keeps trying when others take its candidates
        /// first, in milliseconds, before giving up with a contention error.
        #[arg(long, default_value_t = DEFAULT_RETRY_BUDGET.as_millis() as u64, value_name = "MS")]
        retry_budget_ms: u64,
        /// At most this many samples per take (default: no limit but the
        /// retry budget).
        #[arg(long, value_name = "N")]
        max_rounds: Option<u32>,
        /// Try the unused candidates of the previous take before sampling again.
        #[arg(long)]
        reuse_sample: bool,
        /// Print what the takes cost (samples, swaps, conflicts) to stderr.
        #[arg(long)]
        stats: bool,
    },
    /// Shows a pool: its size, class, lowest and highest member, numbers taken.
    Show {
        /// The pool.
        name: String,
    },
    /// Prints the free numbers of a pool, ascending, one a line.
    Members {
        /// The pool.
        name: String,
    },
    /// Lists pools.
    List,
    /// Drops a pool for good.
    Drop {
        /// The pool.
        name: String,
    },
}

/// Runs a pool command.
pub async fn run(cmd: PoolCommand, global: &Global) -> anyhow::Result<()> {
    // Check what can be checked before touching the store.
    if let PoolCommand::Take { count, .. } = &cmd
        && !(1..=MAX_BATCH).contains(count)
    {
        anyhow::bail!("--count must be between 1 and {MAX_BATCH}, got {count}");
    }
    // A create's arguments are checked whole, before the store is opened:
    // a bad one is a usage error.
    if let PoolCommand::Create {
        name,
        size,
        start,
        class,
        start_below_dropped,
    } = &cmd
    {
        create_spec(name, *size, *start, class, *start_below_dropped)?;
    }
    if let Some(client) = global.client()? {
        return remote(cmd, &client, global.json).await;
    }
    let store = match &cmd {
        PoolCommand::Create { .. } => global.open().await?,
        _ => global.open_existing().await?,
    };
    match cmd {
        PoolCommand::Create {
            name,
            size,
            start,
            class,
            start_below_dropped,
        } => {
            let spec = create_spec(&name, size, start, &class, start_below_dropped)?;
            let created = pool::create(&*store, &spec).await?;
            if let Some(first) = created.continued_above_dropped {
                eprintln!("{}", super::continued_note("pool", &name, first));
            }
            print_info(
                &pool::describe(&*store, &created.row.name).await?,
                global.json,
            )
        }
        PoolCommand::Take {
            name,
            count,
            sample,
            retry_budget_ms,
            max_rounds,
            reuse_sample,
            stats,
        } => {
            let mut b = ValuePool::builder()
                .store(store)
                .name(name)
                .sample(sample)
                .retry_budget(std::time::Duration::from_millis(retry_budget_ms))
                .reuse_sample(reuse_sample);
            if let Some(r) = max_rounds {
                b = b.max_rounds(r);
            }
            let pool = b.build().await?;
            let result = print_values(&pool, count, global.json).await;
            if stats {
                let s = pool.stats();
                eprintln!(
                    "takes={} samples={} attempts={} conflicts={}",
                    s.takes, s.samples, s.attempts, s.conflicts
                );
            }
            result
        }
        PoolCommand::Show { name } => {
            print_info(&pool::describe(&*store, &name).await?, global.json)
        }
        PoolCommand::Members { name } => {
            let members = pool::members(&*store, &name).await?;
            let mut out = std::io::stdout().lock();
            if global.json {
                writeln!(out, "{}", serde_json::to_string(&members)?)?;
            } else {
                for m in members {
                    writeln!(out, "{m}")?;
                }
            }
            Ok(())
        }
        PoolCommand::List => {
            let all = pool::list(&*store).await?;
            if global.json {
                println!("{}", serde_json::to_string(&all)?);
            } else {
                for p in &all {
                    match &p.residue {
                        None => println!("{}\tstart={}\tsize={}", p.name, p.start, p.size),
                        Some(r) => println!(
                            "{}\tstart={}\tsize={}\tincrement={}\toffset={}",
                            p.name, p.start, p.size, r.increment, r.offset
                        ),
                    }
                }
            }
            Ok(())
        }
        PoolCommand::Drop { name } => {
            pool::remove(&*store, &name).await?;
            if global.json {
                println!("{}", serde_json::json!({ "dropped": name }));
            }
            Ok(())
        }
    }
}

/// The spec `pool create` asks for, checked as [`pool::create`] will.
///
/// # Errors
/// A [`super::UsageError`] with the library's message.
fn create_spec(
    name: &str,
    size: i64,
    start: i64,
    class: &super::ClassArgs,
    start_below_dropped: bool,
) -> Result<PoolSpec, super::UsageError> {
    let spec = PoolSpec {
        name: name.to_owned(),
        start,
        size,
        residue: class.residue()?,
        start_below_dropped,
    };
    spec.validate()
        .map_err(|e| super::UsageError(e.to_string()))?;
    Ok(spec)
}

/// Prints each number as soon as its swap is committed, flushed, so a
/// process killed mid-run has printed every number it took but the one in
/// flight.
async fn print_values(pool: &ValuePool, count: i64, json: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        write!(out, "{{\"values\":[")?;
    }
    let mut first = true;
    pool.take_each(count, |v| {
        if json {
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            write!(out, "{v}")?;
        } else {
            writeln!(out, "{v}")?;
        }
        out.flush()?;
        Ok::<(), anyhow::Error>(())
    })
    .await?;
    if json {
        writeln!(out, "]}}")?;
    }
    Ok(())
}

fn print_info(info: &PoolInfo, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(info)?);
    } else {
        println!("name:      {}", info.row.name);
        println!("start:     {}", info.row.start);
        println!("size:      {}", info.row.size);
        if let Some(r) = &info.row.residue {
            println!("{}", super::class_line(r));
        }
        println!("lowest:    {}", info.lowest);
        println!("highest:   {}", info.highest);
        println!("taken:     {}", info.taken);
        println!("max value: {}", info.max_value);
        let per_s = info
            .rate_per_second
            .map_or("-".to_owned(), |r| format!("{r:.1}/s"));
        println!("rate:      {per_s}");
        println!(
            "runway:    {}",
            super::words::runway_words(info.runway_seconds)
        );
    }
    Ok(())
}

/// A pool command against a keysmith server: the same output.
async fn remote(
    cmd: PoolCommand,
    client: &keysmith_client::Client,
    json: bool,
) -> anyhow::Result<()> {
    use keysmith_client::{Method, encode_segment};
    let path = |name: &str| format!("/v1/pools/{}", encode_segment(name));
    let show = async |name: &str| -> anyhow::Result<PoolInfo> {
        let v = client.request(Method::GET, &path(name), None).await?;
        Ok(serde_json::from_value(v)?)
    };
    match cmd {
        PoolCommand::Create {
            name,
            size,
            start,
            class,
            start_below_dropped,
        } => {
            let mut body = serde_json::json!({
                "name": name, "size": size, "start": start,
                "start_below_dropped": start_below_dropped,
            });
            if let Some(r) = class.residue()? {
                body["increment"] = r.increment.into();
                body["offset"] = r.offset.into();
            }
            let created = client
                .request(Method::POST, "/v1/pools", Some(body))
                .await?;
            if let Some(first) = created
                .get("continued_above_dropped")
                .and_then(serde_json::Value::as_i64)
            {
                eprintln!("{}", super::continued_note("pool", &name, first));
            }
            print_info(&show(&name).await?, json)
        }
        PoolCommand::Take { name, count, .. } => {
            let v = client
                .request(
                    Method::POST,
                    &format!("{}/next?count={count}", path(&name)),
                    None,
                )
                .await?;
            let values = v.get("values").cloned().unwrap_or_default();
            if json {
                println!("{}", serde_json::json!({ "values": values }));
            } else {
                for v in values.as_array().into_iter().flatten() {
                    println!("{v}");
                }
            }
            Ok(())
        }
        PoolCommand::Show { name } => print_info(&show(&name).await?, json),
        PoolCommand::Members { .. } => anyhow::bail!(
            "`pool members` reads the store; against a server use `pool show`, or give --store URL"
        ),
        PoolCommand::List => {
            let v = client.request(Method::GET, "/v1/pools", None).await?;
            let all: Vec<keysmith::store::PoolRow> =
                serde_json::from_value(v.get("pools").cloned().unwrap_or_default())?;
            if json {
                println!("{}", serde_json::to_string(&all)?);
            } else {
                for p in &all {
                    match &p.residue {
                        None => println!("{}\tstart={}\tsize={}", p.name, p.start, p.size),
                        Some(r) => println!(
                            "{}\tstart={}\tsize={}\tincrement={}\toffset={}",
                            p.name, p.start, p.size, r.increment, r.offset
                        ),
                    }
                }
            }
            Ok(())
        }
        PoolCommand::Drop { name } => {
            client.request(Method::DELETE, &path(&name), None).await?;
            if json {
                println!("{}", serde_json::json!({ "dropped": name }));
            }
            Ok(())
        }
    }
}
