//! `ids next`, `ids decode`, `ids layout`: time-ordered 64-bit ids, and
//! UUIDv7s over the same time, worker and sequence (`--format uuidv7`).

use std::io::Write;
use std::time::Duration;

use keysmith::ids::{DEFAULT_GROUP, IdConfig, IdFormat, IdGenerator, IdValues, Layout};

use crate::Global;

/// Time-ordered id commands.
#[derive(Debug, clap::Subcommand)]
pub enum IdsCommand {
    /// Makes ids and prints them, one a line (worker id leased from the store).
    Next {
        /// How many ids.
        #[arg(long, short = 'n', default_value_t = 1, allow_negative_numbers = true)]
        count: i64,
        /// integer (64-bit time ids) or uuidv7 (RFC 9562 version-7 UUIDs of
        /// the same time, worker id and sequence, unique by construction).
        #[arg(long, default_value = "integer", value_parser = parse_format)]
        format: IdFormat,
        #[command(flatten)]
        layout: LayoutArgs,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Takes an id apart: time, worker and sequence.
    Decode {
        /// The id.
        #[arg(allow_negative_numbers = true)]
        id: String,
        /// integer (an id of the layout) or uuidv7 (a UUID `ids next
        /// --format uuidv7` printed: its time, worker id and counter).
        #[arg(long, default_value = "integer", value_parser = parse_format)]
        format: IdFormat,
        #[command(flatten)]
        layout: LayoutArgs,
    },
    /// Prints the smallest and largest id made in a time window (both ends
    /// included), for range queries: `WHERE id BETWEEN min AND max`.
    Bounds {
        /// The window's start: RFC 3339 (2026-11-24T17:00:00Z) or ms since 1970.
        #[arg(long, allow_negative_numbers = true)]
        from: String,
        /// The window's end (included): RFC 3339 or ms since 1970.
        #[arg(long, allow_negative_numbers = true)]
        to: String,
        #[command(flatten)]
        layout: LayoutArgs,
    },
    /// Prints a layout's lifetime, workers and ids per time unit.
    Layout {
        #[command(flatten)]
        layout: LayoutArgs,
    },
}

/// `--format`: the library parses, naming the formats.
fn parse_format(text: &str) -> Result<IdFormat, String> {
    text.parse().map_err(|e: keysmith::Error| e.to_string())
}

/// The bit layout: a preset, and any part of it overridden.
#[derive(Debug, Clone, clap::Args)]
pub struct LayoutArgs {
    /// snowflake (41/10/12 bits, 1 ms) or js-safe (37/8/8 bits, 10 ms: ids below 2^53).
    #[arg(long, default_value = "snowflake")]
    preset: String,
    /// Bits of time.
    #[arg(long, value_name = "BITS")]
    time_bits: Option<u32>,
    /// Bits of worker id.
    #[arg(long, value_name = "BITS")]
    worker_bits: Option<u32>,
    /// Bits of sequence per time unit.
    #[arg(long, value_name = "BITS")]
    sequence_bits: Option<u32>,
    /// Milliseconds per time unit.
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    unit_ms: Option<i64>,
    /// Time zero, milliseconds since 1970 (default 2024-01-01).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    epoch_ms: Option<i64>,
    /// Accept a layout whose ids run out within 30 years.
    #[arg(long)]
    allow_short_lifetime: bool,
}

impl LayoutArgs {
    fn layout(&self) -> keysmith::Result<Layout> {
        let mut l = Layout::preset(&self.preset)?;
        if let Some(v) = self.time_bits {
            l.time_bits = v;
        }
        if let Some(v) = self.worker_bits {
            l.worker_bits = v;
        }
        if let Some(v) = self.sequence_bits {
            l.sequence_bits = v;
        }
        if let Some(v) = self.unit_ms {
            l.unit_ms = v;
        }
        if let Some(v) = self.epoch_ms {
            l.epoch_ms = v;
        }
        l.validate()?;
        Ok(l)
    }
}

/// How a generator runs.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The group whose worker ids are leased.
    #[arg(long, default_value = DEFAULT_GROUP)]
    group: String,
    /// Lease worker ids 0..N only (default: all the layout holds).
    #[arg(long, value_name = "N")]
    workers: Option<i64>,
    /// The worker lease's time to live, ms.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    ttl_ms: u64,
    /// How far ids may run ahead of a clock that went back, ms.
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    max_borrow_ms: u64,
}

/// Runs an ids command.
pub async fn run(cmd: IdsCommand, global: &Global) -> anyhow::Result<()> {
    let served = matches!(
        cmd,
        IdsCommand::Next { .. }
            | IdsCommand::Bounds { .. }
            | IdsCommand::Decode {
                format: IdFormat::Integer,
                ..
            }
    );
    if served && let Some(client) = global.client()? {
        return remote(cmd, &client, global.json).await;
    }
    match cmd {
        IdsCommand::Next {
            count,
            format,
            layout,
            run,
        } => {
            if count < 1 {
                anyhow::bail!("--count must be 1 or more, got {count}");
            }
            let mut config = IdConfig::new(layout.layout()?);
            config.allow_short_lifetime = layout.allow_short_lifetime;
            config.group = run.group;
            config.max_workers = run.workers;
            config.ttl = Duration::from_millis(run.ttl_ms);
            config.window = config.ttl;
            config.max_borrow = Duration::from_millis(run.max_borrow_ms);
            // Check before touching the store.
            let now = keysmith::ids::wall_ms();
            config
                .validate(now)
                .map_err(|e| with_flag_hint(e, &config.layout, now, config.allow_short_lifetime))?;
            format.check(&config.layout)?;
            let store = global.open().await?;
            let ids = IdGenerator::builder()
                .store(store)
                .config(config)
                .build()
                .await?;
            let result = print_ids(&ids, count, format, global.json).await;
            let closed = ids.close().await;
            result?;
            closed?;
            Ok(())
        }
        IdsCommand::Decode {
            id,
            format: IdFormat::Uuidv7,
            ..
        } => {
            let d = keysmith::ids::decode_uuidv7(&id)?;
            if global.json {
                println!("{}", serde_json::to_string(&d)?);
            } else {
                println!("time:     {} ({} ms)", d.time, d.time_ms);
                println!("worker:   {}", d.worker);
                println!("counter:  {}", d.counter);
            }
            Ok(())
        }
        IdsCommand::Decode {
            id,
            format: IdFormat::Integer,
            layout,
        } => {
            let l = layout.layout()?;
            let d = l.decode_str(&id)?;
            if global.json {
                println!("{}", serde_json::to_string(&d)?);
            } else {
                println!("time:     {} ({} ms)", d.time, d.time_ms);
                println!("worker:   {}", d.worker);
                println!("sequence: {}", d.sequence);
            }
            Ok(())
        }
        IdsCommand::Bounds { from, to, layout } => {
            let l = layout.layout()?;
            let b = l.bounds(
                keysmith::ids::parse_time_ms(&from)?,
                keysmith::ids::parse_time_ms(&to)?,
            )?;
            if global.json {
                println!("{}", serde_json::to_string(&b)?);
            } else {
                println!("from:  {} ({} ms)", b.from, b.from_ms);
                println!("to:    {} ({} ms)", b.to, b.to_ms);
                println!("min:   {}", b.min_id);
                println!("max:   {}", b.max_id);
            }
            Ok(())
        }
        IdsCommand::Layout { layout } => {
            let l = layout.layout()?;
            let now = keysmith::ids::wall_ms();
            let r = l.report(now);
            if global.json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!("bits:        {}", l.bits());
                println!("epoch:       {}", r.epoch);
                println!("ends:        {}", r.ends);
                println!(
                    "lifetime:    {} years ({} years from now)",
                    r.lifetime_years, r.years_left
                );
                println!("workers:     {}", r.workers);
                println!("ids/unit:    {} per worker", r.ids_per_unit);
                println!("ids/second:  {} per worker", r.ids_per_second_per_worker);
                println!("max id:      {}", r.max_id);
                println!(
                    "runway:      {} (time bits run out on {})",
                    super::words::runway_words(Some(r.runway.seconds_left)),
                    r.runway.ends
                );
                println!(
                    "JS-safe:     {}",
                    if r.javascript_safe {
                        "yes (below 2^53)"
                    } else {
                        "no"
                    }
                );
            }
            if r.runway.warning {
                eprintln!(
                    "warning: the time bits of layout {} run out in {} ({}), under the {} warning threshold; \
                     plan a new layout or epoch",
                    l.bits(),
                    super::words::runway_words(Some(r.runway.seconds_left)),
                    r.runway.ends,
                    super::words::runway_words(Some(keysmith::ids::RUNWAY_WARNING_SECONDS))
                );
            }
            // Tell, and fail, when the layout would be refused.
            l.check(now, 1, layout.allow_short_lifetime)
                .map_err(|e| with_flag_hint(e, &l, now, layout.allow_short_lifetime))?;
            Ok(())
        }
    }
}

/// Prints ids a batch at a time, each batch flushed as soon as it is made:
/// one a line, or `{"ids":[...]}` (UUIDs as JSON strings).
async fn print_ids(
    ids: &IdGenerator,
    count: i64,
    format: IdFormat,
    json: bool,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        write!(out, "{{\"ids\":[")?;
    }
    let mut left = count;
    let mut first = true;
    while left > 0 {
        let n = left.min(1000);
        let batch = ids.next_as(n, format).await?;
        let mut put = |out: &mut std::io::StdoutLock, v: &dyn std::fmt::Display, quote: bool| {
            let q = if json && quote { "\"" } else { "" };
            let sep = if json && !first { "," } else { "" };
            first = false;
            if json {
                write!(out, "{sep}{q}{v}{q}")
            } else {
                writeln!(out, "{v}")
            }
        };
        match &batch {
            IdValues::Integers(v) => {
                for id in v {
                    put(&mut out, id, false)?;
                }
            }
            IdValues::Uuids(v) => {
                for id in v {
                    put(&mut out, &id.hyphenated(), true)?;
                }
            }
        }
        out.flush()?;
        left -= n;
    }
    if json {
        writeln!(out, "]}}")?;
    }
    Ok(())
}

/// `e` with the CLI's flag named when the layout was refused for its short
/// lifetime (the library names its parameter, `allow_short_lifetime`).
fn with_flag_hint(
    e: keysmith::Error,
    layout: &keysmith::ids::Layout,
    now_ms: i64,
    allowed: bool,
) -> anyhow::Error {
    if !allowed && layout.report(now_ms).years_left < keysmith::ids::MIN_LIFETIME_YEARS {
        anyhow::anyhow!("{e} (pass --allow-short-lifetime to accept it)")
    } else {
        e.into()
    }
}

/// `ids next`, `ids decode` (integers) and `ids bounds` against a keysmith
/// server: its layout and worker lease; the same output as on a store.
async fn remote(
    cmd: IdsCommand,
    client: &keysmith_client::Client,
    json: bool,
) -> anyhow::Result<()> {
    let field = |v: &serde_json::Value, k: &str| -> String {
        match v.get(k) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }
    };
    match cmd {
        IdsCommand::Next { count, format, .. } => {
            if count < 1 {
                anyhow::bail!("--count must be 1 or more, got {count}");
            }
            let uuid = matches!(format, IdFormat::Uuidv7);
            let mut out = std::io::stdout().lock();
            if json {
                write!(out, "{{\"ids\":[")?;
            }
            let (mut left, mut first) = (count, true);
            while left > 0 {
                let n = left.min(1000);
                let ids = client.next_ids(n, uuid).await?;
                for id in &ids {
                    if json {
                        write!(out, "{}{id}", if first { "" } else { "," })?;
                    } else {
                        match id {
                            serde_json::Value::String(s) => writeln!(out, "{s}")?,
                            other => writeln!(out, "{other}")?,
                        }
                    }
                    first = false;
                }
                out.flush()?;
                left -= (ids.len() as i64).max(1);
            }
            if json {
                writeln!(out, "]}}")?;
            }
        }
        IdsCommand::Decode { id, .. } => {
            let d = client.decode_id(id.trim()).await?;
            if json {
                println!("{d}");
            } else {
                println!(
                    "time:     {} ({} ms)",
                    field(&d, "time"),
                    field(&d, "time_ms")
                );
                println!("worker:   {}", field(&d, "worker"));
                println!("sequence: {}", field(&d, "sequence"));
            }
        }
        IdsCommand::Bounds { from, to, .. } => {
            let b = client.id_bounds(&from, &to).await?;
            if json {
                println!("{b}");
            } else {
                println!("from:  {} ({} ms)", field(&b, "from"), field(&b, "from_ms"));
                println!("to:    {} ({} ms)", field(&b, "to"), field(&b, "to_ms"));
                println!("min:   {}", field(&b, "min_id"));
                println!("max:   {}", field(&b, "max_id"));
            }
        }
        IdsCommand::Layout { .. } => unreachable!("layout runs locally"),
    }
    Ok(())
}
