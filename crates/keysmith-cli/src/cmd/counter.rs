//! `counter next`, `counter peek`: per-host `<hostname>/<number>` names.

use std::io::Write;
use std::path::PathBuf;

use keysmith::names::{HostCounter, MAX_COUNT};

use crate::Global;

/// Where the counter lives and which host name prefixes its names.
#[derive(Debug, clap::Args)]
pub struct CounterArgs {
    /// Host name that prefixes the names (default: the system host name).
    /// No '/', no whitespace.
    #[arg(long, value_name = "H")]
    host: Option<String>,
    /// Counter directory. Default: $KEYSMITH_COUNTER_DIR, else
    /// $XDG_DATA_HOME/keysmith, else ~/.local/share/keysmith.
    /// Every process on a host that hands out names must use the same one.
    #[arg(long, value_name = "D")]
    dir: Option<PathBuf>,
}

/// Host counter commands.
#[derive(Debug, clap::Subcommand)]
pub enum CounterCommand {
    /// Takes names from the host counter and prints them, one a line
    /// (`<host>/<number>`). Each name is on disk before it is printed.
    Next {
        /// How many names (1 to 2^40).
        #[arg(long, short = 'n', default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
        count: u64,
        /// Names taken from the counter per file write (default: all at
        /// once). Smaller batches lose fewer names when the process is killed
        /// and interleave with other processes.
        #[arg(long, value_name = "B", value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
        batch: Option<u64>,
        #[command(flatten)]
        at: CounterArgs,
    },
    /// Prints the last number handed out (0 for a new counter) without
    /// taking one.
    Peek {
        #[command(flatten)]
        at: CounterArgs,
    },
}

/// Runs a counter command.
pub async fn run(cmd: CounterCommand, global: &Global) -> anyhow::Result<()> {
    match cmd {
        CounterCommand::Next { count, batch, at } => {
            let counter = at.open()?;
            print_names(&counter, count, batch.unwrap_or(count), global.json)
        }
        CounterCommand::Peek { at } => {
            let counter = at.open()?;
            let value = counter.peek()?;
            if global.json {
                let json = serde_json::json!({
                    "host": counter.host(),
                    "path": counter.path(),
                    "value": value,
                });
                println!("{json}");
            } else {
                println!("{value}");
            }
            Ok(())
        }
    }
}

impl CounterArgs {
    fn open(&self) -> keysmith::Result<HostCounter> {
        let dir = match &self.dir {
            Some(d) => d.clone(),
            None => HostCounter::default_dir()?,
        };
        match &self.host {
            Some(h) => HostCounter::open_with_host(dir, h),
            None => HostCounter::open(dir),
        }
    }
}

/// Takes `count` names, `batch` at a time, printing each batch once it is on
/// disk.
fn print_names(counter: &HostCounter, count: u64, batch: u64, json: bool) -> anyhow::Result<()> {
    const CHUNK: u64 = 65_536;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if json {
        write!(out, "{{\"names\":[")?;
    }
    let mut first = true;
    let mut left = count;
    let mut buf = String::new();
    while left > 0 {
        let names = counter.next_n(left.min(batch))?;
        left -= names.len();
        // Print a large batch in chunks rather than building it whole.
        let mut values = names.values().peekable();
        while values.peek().is_some() {
            buf.clear();
            for v in values.by_ref().take(CHUNK as usize) {
                if json {
                    if !first {
                        buf.push(',');
                    }
                    first = false;
                    buf.push_str(&serde_json::to_string(&format!("{}/{v}", names.host()))?);
                } else {
                    buf.push_str(names.host());
                    buf.push('/');
                    buf.push_str(&v.to_string());
                    buf.push('\n');
                }
            }
            out.write_all(buf.as_bytes())?;
        }
        out.flush()?;
    }
    if json {
        writeln!(out, "]}}")?;
    }
    Ok(())
}
