//! `create`, `next`, `show`, `list`, `drop`.

use std::io::Write;

use std::time::Duration;

use keysmith::fence::{FenceTarget, fence};
use keysmith::numbers::{self, Numbering, Numbers, Period};
use keysmith::sequence::{
    self, AdoptAction, AdoptReport, AdoptSource, AlterSpec, DEFAULT_RANGE_WARNING_SHARE, MAX_BATCH,
    Sequence, SequenceInfo, Strategy,
};
use keysmith::store::{
    DEFAULT_BLOCK, DEFAULT_START, JS_SAFE_MAX, MAX_VALUE, SequenceSpec, js_safe_max,
};
use keysmith::{AnySequence, DEFAULT_RETRY_BUDGET};

use crate::Global;

/// The most values one `next` prints (it streams them a block at a time).
const MAX_COUNT: i64 = 1_000_000_000;

/// `create --format`'s help: the template's placeholders, shown literally.
const FORMAT_HELP: &str = "How numbers are printed: literal text with {n} (or {n:04}, zero-padded) \
    once, and {period} once with --period, e.g. INV-{period}-{n:04}. Default with --period: \
    {period}-{n}";

/// Sequence commands.
#[derive(Debug, clap::Subcommand)]
pub enum SequenceCommand {
    /// Creates a sequence.
    Create {
        /// Its name: 1 to 512 bytes, no whitespace or control characters.
        name: String,
        /// The first value.
        #[arg(long, default_value_t = DEFAULT_START)]
        start: i64,
        /// The last value (inclusive). Default: 9223372036854775806, or
        /// 2^53-1 with --js-safe.
        #[arg(long)]
        max: Option<i64>,
        /// JavaScript-safe: the max is 2^53-1 (9007199254740991), the largest
        /// integer a JavaScript number holds exactly; a larger --max is
        /// refused.
        #[arg(long)]
        js_safe: bool,
        /// Default block size of handles: values reserved per store round trip.
        #[arg(long, default_value_t = DEFAULT_BLOCK)]
        block: i64,
        /// Gap-free numbers: taken with `keysmith ticket take`, then committed
        /// or released; `next` is refused. One store round trip per number.
        #[arg(long)]
        gapless: bool,
        /// Numbers restart every day, month or year (UTC, by the store's
        /// clock); the period is part of every number.
        #[arg(long, value_name = "day|month|year")]
        period: Option<String>,
        // How numbers are printed (FORMAT_HELP; through `literal_help`, as
        // clap would print a doc comment's `{n}` as a line break).
        #[arg(long, value_name = "TEMPLATE", help = super::literal_help(FORMAT_HELP))]
        format: Option<String>,
        /// Values are the bit reversal of an internal counter: positive,
        /// unique, spread over the whole i64 range (no hot spot at the end of
        /// an index). One store round trip per `next`.
        #[arg(long)]
        bit_reversed: bool,
        /// With --bit-reversed: values A..B (B excluded) are never handed out.
        #[arg(long, value_name = "A..B", requires = "bit_reversed")]
        skip_range: Option<String>,
        /// Opaque values: each value is a keyed permutation of an internal
        /// counter (the key, secret, lives in the store), so values show
        /// neither order nor volume. Values are 1 to --max; the counter runs
        /// to a sixteenth of that. `keysmith decode` maps a value back. One
        /// store round trip per `next`.
        #[arg(long)]
        opaque: bool,
        /// Values are printed as fixed-width strings that sort as the
        /// numbers do, with a check character: base32 (Crockford) or base62.
        #[arg(long, value_name = "base32|base62")]
        encoding: Option<String>,
        /// With --encoding: a typed prefix, lower-case letters and digits
        /// (`ord` prints ord_...).
        #[arg(long, value_name = "P", requires = "encoding")]
        prefix: Option<String>,
        /// A residue class: every value is --offset modulo --increment.
        #[command(flatten)]
        class: super::ClassArgs,
        /// How far next moves forward when a reservation finds the store in a
        /// new generation (a failover to a replica, a restore). Default:
        /// automatic, the larger of 1 000 000, 100 blocks and ten minutes at
        /// the sequence's peak rate.
        #[arg(long, value_name = "N", allow_negative_numbers = true)]
        failover_skip: Option<i64>,
        /// Start at --start even if a dropped sequence of this name handed
        /// out values at or above it. By default creating a dropped name
        /// continues above the values it handed out; use this only when none
        /// of them is in use any more.
        #[arg(long)]
        start_below_dropped: bool,
        /// The order values are handed out in: cached (the default: blocks
        /// per process, increasing per process; strict with --block 1) or
        /// leader (one process at a time, the holder of the sequence's leader
        /// lease, hands every value out in the order calls arrive: a running
        /// `keysmith serve`, or this command's own `next` when no server
        /// leads). Not with the numbering options.
        #[arg(long, value_name = "cached|leader", value_parser = parse_order)]
        order: Option<keysmith::store::Order>,
    },
    /// Maps a value an opaque, encoded or bit-reversed sequence handed out
    /// (an integer, or an encoded string) back to its plain counter.
    Decode {
        /// The sequence.
        name: String,
        /// A value `next` printed.
        #[arg(allow_negative_numbers = true)]
        value: String,
    },
    /// Maps a value of a bit-reversed sequence back to its internal counter.
    DecodeReversed {
        /// The sequence.
        name: String,
        /// A value `next` printed.
        #[arg(allow_negative_numbers = true)]
        value: String,
    },
    /// Splits a number a formatted sequence printed into its period and
    /// counter.
    Parse {
        /// The sequence.
        name: String,
        /// The number, as `next` or `ticket take` printed it.
        text: String,
    },
    /// Prints the next values, one a line.
    Next {
        /// The sequence.
        name: String,
        /// How many values.
        #[arg(long, short = 'n', default_value_t = 1)]
        count: i64,
        /// Values reserved per store round trip (default: the sequence's own).
        /// 1 is strict: values from all handles in time order.
        #[arg(long)]
        block: Option<i64>,
        /// optimistic, locked or atomic (the default: one server-side step on
        /// PostgreSQL and etcd, never retried from a stale row; the locked
        /// transaction on SQLite and MySQL).
        #[arg(long, default_value_t = Strategy::default())]
        strategy: Strategy,
        /// How long one block reservation keeps retrying races lost to other
        /// writers, in milliseconds, before giving up with a contention error.
        #[arg(long, default_value_t = DEFAULT_RETRY_BUDGET.as_millis() as u64, value_name = "MS")]
        retry_budget_ms: u64,
        /// At most this many attempts per block reservation (default: no
        /// limit but the retry budget).
        #[arg(long, value_name = "N")]
        max_attempts: Option<u32>,
    },
    /// Changes a sequence's next value, maximum or block size.
    ///
    /// Safe while handles allocate: next only moves forward, max never below the values
    /// reserved so far. Prints the sequence after the change.
    Alter {
        /// The sequence.
        name: String,
        /// The next value to hand out (forward only; the values skipped are
        /// never handed out).
        #[arg(long, allow_negative_numbers = true)]
        next: Option<i64>,
        /// The last value (inclusive).
        #[arg(long, allow_negative_numbers = true)]
        max: Option<i64>,
        /// Default block size of handles opened from now on.
        #[arg(long, allow_negative_numbers = true)]
        block: Option<i64>,
        /// The failover margin, set by hand from now on (see `create`).
        #[arg(long, allow_negative_numbers = true, value_name = "N")]
        failover_skip: Option<i64>,
        /// An opaque sequence: a new key maps the values handed out from now
        /// on (into their own part of the range); values handed out before
        /// keep decoding. At most 16 keys over a sequence's life.
        #[arg(long, conflicts_with_all = ["next", "max", "block", "failover_skip"])]
        rotate_key: bool,
    },
    /// Moves sequences forward by N values after the store went back.
    ///
    /// For a going back keysmith cannot see (a file copy put back, a backup restored into the
    /// same generation). Prints each before and after.
    Fence {
        /// The sequence (or --all).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        /// Every block-based sequence of the store.
        #[arg(long)]
        all: bool,
        /// How many values to move forward.
        #[arg(long, value_name = "N", allow_negative_numbers = true)]
        skip: i64,
        /// Say what would change, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Moves a sequence's next value above the largest value a table holds.
    ///
    /// The table is in an SQLite, PostgreSQL or MySQL database; new keys then
    /// never collide with the old ones. Prints what it did, or would do.
    Adopt {
        /// The sequence.
        name: String,
        /// The database holding the table: sqlite://PATH, postgres://USER@HOST/DB or mysql://USER@HOST/DB.
        #[arg(long, value_name = "URL")]
        database: String,
        /// The table (PostgreSQL: optionally schema.table; MySQL: database.table).
        #[arg(long)]
        table: String,
        /// Its integer key column.
        #[arg(long)]
        column: String,
        /// Say what would change, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Create the sequence, starting above the table's values, if it is missing.
        #[arg(long)]
        create: bool,
    },
    /// Shows a sequence.
    Show {
        /// The sequence.
        name: String,
    },
    /// Lists sequences.
    List,
    /// Drops a sequence for good.
    Drop {
        /// The sequence.
        name: String,
    },
}

/// Runs a sequence command.
pub async fn run(cmd: SequenceCommand, global: &Global) -> anyhow::Result<()> {
    // Check what can be checked before touching the store.
    if let SequenceCommand::Next { count, .. } = &cmd
        && !(1..=MAX_COUNT).contains(count)
    {
        anyhow::bail!("--count must be between 1 and {MAX_COUNT}, got {count}");
    }
    let numbering = match &cmd {
        SequenceCommand::Create { .. } => numbering_of(&cmd)?,
        _ => None,
    };
    let reversed_value = match &cmd {
        SequenceCommand::DecodeReversed { value, .. } => {
            Some(value.trim().parse::<i64>().map_err(|_| {
                anyhow::anyhow!("{value:?} is not a value: expected a whole number")
            })?)
        }
        _ => None,
    };
    if let Some(client) = global.client()? {
        return remote(cmd, numbering, &client, global).await;
    }
    let store = match &cmd {
        SequenceCommand::Create { .. }
        | SequenceCommand::Adopt { create: true, .. }
        | SequenceCommand::Fence { .. } => global.open().await?,
        _ => global.open_existing().await?,
    };
    match cmd {
        SequenceCommand::Create {
            name,
            start,
            max,
            js_safe,
            block,
            failover_skip,
            start_below_dropped,
            ..
        } => {
            let max = match js_safe {
                true => js_safe_max(
                    max,
                    numbering.as_ref().is_some_and(|n| n.bit_reversed.is_some()),
                )
                .map_err(|e| anyhow::anyhow!("--js-safe: {e}"))?,
                false => max.unwrap_or(MAX_VALUE),
            };
            let spec = SequenceSpec {
                name,
                start,
                max,
                block,
                failover_skip,
                start_below_dropped,
            };
            let info = match &numbering {
                Some(n) => numbers::create(&*store, &spec, n).await?,
                None => sequence::create(&*store, &spec).await?,
            };
            if let Some(first) = info.continued_above_dropped {
                eprintln!("{}", super::continued_note("sequence", &spec.name, first));
            }
            // Opaque and encoded settings are completed by the create (the
            // key, the width): show them as stored, without the key.
            let numbering = match numbering {
                Some(n) if n.opaque.is_some() || n.encoding.is_some() => {
                    numbers::numbering(&*store, &spec.name).await?
                }
                other => other,
            };
            print_info(&info, numbering.as_ref(), global.json)
        }
        SequenceCommand::Decode { name, value } => {
            let h = Numbers::open(store, &name).await?;
            let d = h.decode(&value)?;
            if global.json {
                println!("{}", serde_json::to_string(&d)?);
            } else {
                println!("{}", d.counter);
            }
            Ok(())
        }
        SequenceCommand::DecodeReversed { name, .. } => {
            let value = reversed_value.unwrap_or_default();
            let h = Numbers::open(store, &name).await?;
            let counter = h.decode_reversed(value)?;
            if global.json {
                println!(
                    "{}",
                    serde_json::json!({ "value": value, "counter": counter })
                );
            } else {
                println!("{counter}");
            }
            Ok(())
        }
        SequenceCommand::Parse { name, text } => {
            let h = Numbers::open(store, &name).await?;
            let n = h.parse(&text)?;
            if global.json {
                println!("{}", serde_json::to_string(&n)?);
            } else {
                match n.period {
                    Some(p) => println!("period={p} n={}", n.n),
                    None => println!("n={}", n.n),
                }
            }
            Ok(())
        }
        SequenceCommand::Next {
            name,
            count,
            block,
            strategy,
            retry_budget_ms,
            max_attempts,
        } => {
            let mut b = Sequence::builder()
                .strategy(strategy)
                .retry_budget(Duration::from_millis(retry_budget_ms));
            if let Some(n) = max_attempts {
                b = b.max_attempts(n);
            }
            if let Some(block) = block {
                b = b.block(block);
            }
            let seq = AnySequence::open(store, &name, b).await?;
            let result = print_values(&seq, count, global.json).await;
            // Hand the unused tail back, also after an error.
            let closed = seq.close().await;
            result?;
            closed?;
            Ok(())
        }
        SequenceCommand::Alter {
            name,
            next,
            max,
            block,
            failover_skip,
            rotate_key,
        } => {
            if rotate_key {
                let numbering = numbers::rotate_key(&*store, &name).await?;
                let info = sequence::show(&*store, &name).await?;
                return print_info(&info, Some(&numbering), global.json);
            }
            let spec = AlterSpec {
                next,
                max,
                block,
                failover_skip,
            };
            let info = sequence::alter(&*store, &name, &spec).await?;
            print_info(&info, None, global.json)
        }
        SequenceCommand::Fence {
            name,
            all,
            skip,
            dry_run,
        } => {
            let target = match name {
                Some(n) if !all => FenceTarget::One(n),
                _ => FenceTarget::All,
            };
            let report = fence(&*store, &target, skip, dry_run).await?;
            if global.json {
                println!("{}", serde_json::to_string(&report)?);
                return Ok(());
            }
            let verb = if dry_run { "would move" } else { "moved" };
            for c in &report.changes {
                println!(
                    "{} {}: {verb} next {} -> {}",
                    c.kind, c.name, c.before, c.after
                );
            }
            for why in &report.left_alone {
                println!("left alone: {why}");
            }
            if report.changes.is_empty() {
                println!("nothing to fence");
            }
            Ok(())
        }
        SequenceCommand::Adopt {
            name,
            database,
            table,
            column,
            dry_run,
            create,
        } => {
            let source = AdoptSource {
                database,
                table,
                column,
            };
            let r = sequence::adopt(&*store, &name, &source, create, dry_run).await?;
            if global.json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!("{}", describe_adoption(&r));
            }
            Ok(())
        }
        SequenceCommand::Show { name } => {
            let info = sequence::show(&*store, &name).await?;
            let numbering = numbers::numbering(&*store, &name).await?;
            print_info(&info, numbering.as_ref(), global.json)
        }
        SequenceCommand::List => {
            let all = sequence::list(&*store).await?;
            if global.json {
                println!("{}", serde_json::to_string(&all)?);
            } else {
                for i in &all {
                    println!(
                        "{}\tnext={}\tmax={}\tblock={}",
                        i.row.name, i.row.next, i.row.max, i.row.block
                    );
                }
            }
            Ok(())
        }
        SequenceCommand::Drop { name } => {
            sequence::remove(&*store, &name).await?;
            if global.json {
                println!("{}", serde_json::json!({ "dropped": name }));
            }
            Ok(())
        }
    }
}

/// Prints values as they are allocated, a batch at a time, so a large count
/// streams and every printed value has been durably reserved.
async fn print_values(seq: &AnySequence, count: i64, json: bool) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let batch = seq.batch(MAX_BATCH);
    let mut left = count;
    if json {
        write!(out, "{{\"values\":[")?;
    }
    let mut first = true;
    while left > 0 {
        let n = left.min(batch);
        let taken = seq.next_n(n).await?;
        let mut buf = String::with_capacity(taken.len() * 12);
        if json {
            for v in taken.json_values(false) {
                if !first {
                    buf.push(',');
                }
                first = false;
                buf.push_str(&v.to_string());
            }
        } else {
            for t in taken.texts() {
                buf.push_str(&t);
                buf.push('\n');
            }
        }
        out.write_all(buf.as_bytes())?;
        out.flush()?;
        left -= n;
    }
    if json {
        writeln!(out, "]}}")?;
    }
    Ok(())
}

/// One line saying what `adopt` did or would do.
fn describe_adoption(r: &AdoptReport) -> String {
    let column = format!("{}.{}", r.source.table, r.source.column);
    let largest = match r.largest {
        Some(v) => format!("the largest {column} is {v}"),
        None => format!("{} is empty", r.source.table),
    };
    let would = if r.dry_run { "would " } else { "" };
    match (r.action, r.next_before) {
        (AdoptAction::Created, _) => format!(
            "{}: {would}create it starting at {} ({largest})",
            r.sequence, r.next_after
        ),
        (AdoptAction::Moved, Some(before)) => format!(
            "{}: {would}move next from {before} to {} ({largest})",
            r.sequence, r.next_after
        ),
        _ => format!(
            "{}: next {} is above every value already ({largest}); nothing to do",
            r.sequence, r.next_after
        ),
    }
}

/// The numbering `create` asks for, if any: checked before the store is
/// touched.
fn numbering_of(cmd: &SequenceCommand) -> anyhow::Result<Option<Numbering>> {
    let SequenceCommand::Create {
        gapless,
        period,
        format,
        bit_reversed,
        skip_range,
        class,
        opaque,
        encoding,
        prefix,
        order,
        ..
    } = cmd
    else {
        return Ok(None);
    };
    let (gapless, bit_reversed, opaque) = (*gapless, *bit_reversed, *opaque);
    let (period, format, residue) = (period.clone(), format.clone(), class.residue()?);
    let order = order.unwrap_or_default();
    let (skip_range, encoding, prefix) = (
        skip_range.as_deref(),
        encoding.as_deref(),
        prefix.as_deref(),
    );
    if !gapless
        && period.is_none()
        && format.is_none()
        && !bit_reversed
        && residue.is_none()
        && !opaque
        && encoding.is_none()
        && order.is_cached()
    {
        return Ok(None);
    }
    let encoding = encoding
        .map(|e| {
            let a = e
                .parse::<numbers::Alphabet>()
                .map_err(|e| anyhow::anyhow!("--encoding: {e}"))?;
            numbers::Encoding::new(a, prefix).map_err(|e| anyhow::anyhow!("--prefix: {e}"))
        })
        .transpose()?;
    let skip = skip_range
        .map(str::parse::<numbers::SkipRange>)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--skip-range: {e}"))?;
    let period = period
        .map(|p| p.parse::<Period>())
        .transpose()
        .map_err(|e| anyhow::anyhow!("--period: {e}"))?;
    let has_format = format.is_some();
    let n = Numbering {
        gapless,
        period,
        template: format,
        bit_reversed: bit_reversed.then_some(numbers::BitReversed { skip }),
        residue,
        opaque: opaque.then(numbers::Opaque::default),
        encoding,
        order,
    };
    n.validate().map_err(|e| {
        if has_format {
            anyhow::anyhow!("--format: {e}")
        } else {
            e.into()
        }
    })?;
    Ok(Some(n))
}

/// ` (2^53-1, JavaScript-safe)` for the JavaScript-safe max, else nothing.
fn js_note(max: i64) -> &'static str {
    if max == JS_SAFE_MAX {
        " (2^53-1, JavaScript-safe)"
    } else {
        ""
    }
}

/// `--order`'s value, as the library parses it.
fn parse_order(s: &str) -> Result<keysmith::store::Order, String> {
    s.parse().map_err(|e: keysmith::Error| e.to_string())
}

fn print_info(
    info: &SequenceInfo,
    numbering: Option<&Numbering>,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        let mut v = serde_json::to_value(info)?;
        if let Some(obj) = v.as_object_mut() {
            if let Some(n) = numbering {
                obj.insert("numbering".into(), serde_json::to_value(n.public())?);
            }
            let top = numbering
                .and_then(|n| n.opaque.as_ref())
                .map_or(info.row.max, |o| o.value_max);
            obj.insert("js_safe".into(), (top <= JS_SAFE_MAX).into());
            obj.insert(
                "range_left_share".into(),
                serde_json::json!(info.range_left_share()),
            );
            if let Some(w) = info.range_warning(DEFAULT_RANGE_WARNING_SHARE) {
                obj.insert("range_warning".into(), w.to_string().into());
            }
        }
        println!("{v}");
    } else {
        let r = &info.row;
        println!("name:      {}", r.name);
        // A numbered sequence's numbers come from its period counter.
        println!(
            "next:      {}",
            info.numbers.as_ref().map_or(r.next, |n| n.next)
        );
        println!("start:     {}", r.start);
        let opaque = numbering.and_then(|n| n.opaque.as_ref());
        match opaque {
            Some(o) => println!(
                "max:       {} (counter; values 1 to {}{})",
                r.max,
                o.value_max,
                js_note(o.value_max)
            ),
            None => println!("max:       {}{}", r.max, js_note(r.max)),
        }
        println!("block:     {}", r.block);
        println!("remaining: {}", info.remaining);
        println!("version:   {}", r.version);
        println!(
            "failover:  skip {} ({}), skipped at failover {}, generation {}",
            r.failover_skip,
            if r.failover_skip_set {
                "set"
            } else {
                "automatic"
            },
            r.failover_skipped,
            r.generation.as_deref().unwrap_or("-")
        );
        if let Some(r) = &info.residue {
            println!("{}", super::class_line(r));
        }
        if let Some(w) = info.range_warning(DEFAULT_RANGE_WARNING_SHARE) {
            println!("warning:   {w}");
        }
        if numbering.is_some_and(Numbering::is_leader) {
            println!("order:     leader (one leased leader hands values out in arrival order)");
        }
        if let Some(n) = numbering.filter(|n| n.residue.is_none() && !n.is_leader()) {
            if let Some(o) = &n.opaque {
                println!(
                    "opaque:    yes, key {} of {} (keyed permutation; the key is secret and never shown)",
                    o.keys.len().saturating_sub(1),
                    numbers::KEY_SLOTS
                );
            }
            if let Some(e) = &n.encoding {
                println!(
                    "encoding:  {}, {} digits and a check character{}",
                    e.alphabet,
                    e.width,
                    e.prefix
                        .as_ref()
                        .map_or(String::new(), |p| format!(", prefix {p}_"))
                );
            }
            if let Some(b) = &n.bit_reversed {
                match &b.skip {
                    Some(s) => println!("reversed:  yes (skipping {}..{})", s.start, s.end),
                    None => println!("reversed:  yes"),
                }
            }
            println!("gapless:   {}", if n.gapless { "yes" } else { "no" });
            println!("period:    {}", n.period.map_or("none", |p| p.as_str()));
            if let Some(t) = keysmith::numbers::Template::for_numbering(n)? {
                println!("format:    {t}");
            }
            if let Some(u) = &info.numbers {
                println!("numbers:   {}", numbers_line(u, n.gapless));
            }
        }
        if let Some(u) = &info.usage {
            let per_s = u
                .rate_per_second
                .map_or("-".to_owned(), |r| format!("{r:.1}/s"));
            println!("rate:      {per_s}");
            println!(
                "runway:    {}",
                super::words::runway_words(u.runway_seconds)
            );
            println!(
                "reserved:  {} (handed out {}, handed back {}, gaps {}, skipped {}, unaccounted {})",
                u.reserved, u.handed_out, u.handed_back, u.abandoned, u.skipped, u.unaccounted
            );
        }
    }
    Ok(())
}

/// Where a numbered sequence's numbers are, in words: the last one given
/// out in the current period and, with tickets, how many are committed,
/// held and released.
fn numbers_line(u: &keysmith::sequence::NumbersUsage, gapless: bool) -> String {
    let period = if u.period == 0 {
        String::new()
    } else {
        format!(" in period {}", u.period)
    };
    let Some(last) = u.last else {
        return format!("none taken yet{period}");
    };
    if !gapless {
        return format!("last {last}{period}, {} handed out", u.taken);
    }
    format!(
        "last {last}{period}, {} taken: {} committed, {} held by a ticket, {} released (taken again first)",
        u.taken, u.committed, u.held, u.released
    )
}

/// A sequence command against a keysmith server (`--server`): the same
/// output as against a store.
async fn remote(
    cmd: SequenceCommand,
    numbering: Option<Numbering>,
    client: &keysmith_client::Client,
    global: &Global,
) -> anyhow::Result<()> {
    match cmd {
        SequenceCommand::Create {
            name,
            start,
            max,
            js_safe,
            block,
            failover_skip,
            start_below_dropped,
            ..
        } => {
            let mut body = serde_json::json!({
                "name": name, "start": start, "block": block, "js_safe": js_safe,
                "start_below_dropped": start_below_dropped,
            });
            let obj = body.as_object_mut().expect("an object");
            if let Some(m) = max {
                obj.insert("max".into(), m.into());
            }
            if let Some(f) = failover_skip {
                obj.insert("failover_skip".into(), f.into());
            }
            if let Some(n) = &numbering {
                obj.insert("gapless".into(), n.gapless.into());
                obj.insert("opaque".into(), n.opaque.is_some().into());
                obj.insert("bit_reversed".into(), n.bit_reversed.is_some().into());
                if let Some(p) = n.period {
                    obj.insert("period".into(), p.as_str().into());
                }
                if let Some(t) = &n.template {
                    obj.insert("format".into(), t.clone().into());
                }
                if let Some(s) = n.bit_reversed.as_ref().and_then(|b| b.skip.as_ref()) {
                    obj.insert("skip_range".into(), serde_json::to_value(s)?);
                }
                if let Some(r) = &n.residue {
                    obj.insert("increment".into(), r.increment.into());
                    obj.insert("offset".into(), r.offset.into());
                }
                if let Some(e) = &n.encoding {
                    obj.insert("encoding".into(), e.alphabet.to_string().into());
                    if let Some(p) = &e.prefix {
                        obj.insert("prefix".into(), p.clone().into());
                    }
                }
                if n.is_leader() {
                    obj.insert("order".into(), "leader".into());
                }
            }
            let v = client.create_sequence(body).await?;
            if let Some(first) = v.info.continued_above_dropped {
                eprintln!("{}", super::continued_note("sequence", &name, first));
            }
            print_info(&v.info, v.numbering.as_ref(), global.json)
        }
        SequenceCommand::Decode { name, value } => {
            let arg = match value.trim().parse::<i64>() {
                Ok(n) => serde_json::Value::from(n),
                Err(_) => serde_json::Value::from(value),
            };
            let d = client.decode(&name, arg).await?;
            if global.json {
                println!("{d}");
            } else {
                println!("{}", d.get("counter").cloned().unwrap_or_default());
            }
            Ok(())
        }
        SequenceCommand::Next { name, count, .. } => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            let mut left = count;
            let mut first = true;
            if global.json {
                write!(out, "{{\"values\":[")?;
            }
            while left > 0 {
                let n = left.min(MAX_BATCH);
                let values = client.next_values(&name, n).await?;
                let mut buf = String::new();
                for v in &values {
                    if global.json {
                        if !first {
                            buf.push(',');
                        }
                        first = false;
                        buf.push_str(&v.to_string());
                    } else {
                        match v {
                            serde_json::Value::String(s) => buf.push_str(s),
                            other => buf.push_str(&other.to_string()),
                        }
                        buf.push('\n');
                    }
                }
                out.write_all(buf.as_bytes())?;
                out.flush()?;
                left -= (values.len() as i64).max(1);
            }
            if global.json {
                writeln!(out, "]}}")?;
            }
            Ok(())
        }
        SequenceCommand::Alter {
            name,
            next,
            max,
            block,
            failover_skip,
            rotate_key,
        } => {
            if rotate_key {
                client.rotate_key(&name).await?;
                let v = client.show_sequence(&name).await?;
                return print_info(&v.info, v.numbering.as_ref(), global.json);
            }
            let mut change = serde_json::Map::new();
            for (k, v) in [
                ("next", next),
                ("max", max),
                ("block", block),
                ("failover_skip", failover_skip),
            ] {
                if let Some(v) = v {
                    change.insert(k.into(), v.into());
                }
            }
            let v = client.alter_sequence(&name, change.into()).await?;
            print_info(&v.info, None, global.json)
        }
        SequenceCommand::Show { name } => {
            let v = client.show_sequence(&name).await?;
            print_info(&v.info, v.numbering.as_ref(), global.json)
        }
        SequenceCommand::List => {
            let all = client.list_sequences().await?;
            if global.json {
                let infos: Vec<&SequenceInfo> = all.iter().map(|v| &v.info).collect();
                println!("{}", serde_json::to_string(&infos)?);
            } else {
                for v in &all {
                    let i = &v.info;
                    println!(
                        "{}\tnext={}\tmax={}\tblock={}",
                        i.row.name, i.row.next, i.row.max, i.row.block
                    );
                }
            }
            Ok(())
        }
        SequenceCommand::Drop { name } => {
            client.drop_sequence(&name).await?;
            if global.json {
                println!("{}", serde_json::json!({ "dropped": name }));
            }
            Ok(())
        }
        SequenceCommand::Parse { name, text } => {
            let v = client
                .request(
                    keysmith_client::Method::POST,
                    &format!(
                        "/v1/sequences/{}/parse",
                        keysmith_client::encode_segment(&name)
                    ),
                    Some(serde_json::json!({ "value": text })),
                )
                .await?;
            if global.json {
                println!("{v}");
            } else {
                match v.get("period").filter(|p| !p.is_null()) {
                    Some(p) => println!("period={p} n={}", v.get("n").cloned().unwrap_or_default()),
                    None => println!("n={}", v.get("n").cloned().unwrap_or_default()),
                }
            }
            Ok(())
        }
        SequenceCommand::DecodeReversed { .. }
        | SequenceCommand::Fence { .. }
        | SequenceCommand::Adopt { .. } => anyhow::bail!(
            "this command works on a store, not against a keysmith server; give --store URL \
             (decode-reversed: use `keysmith decode`, which the server answers)"
        ),
    }
}
