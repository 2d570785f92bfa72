//! Commands that moved out of the product into `keysmith-bench`, the
//! repository's lab binary: `keysmith bench ...` and `keysmith verify
//! --partitions`. Deprecated aliases: each says where the command went and
//! how to run it, changes nothing, and exits 2.

use std::ffi::OsString;

use super::UsageError;

/// `keysmith bench ...` (deprecated): whatever follows is taken and not
/// parsed, so every old command line gets the message.
#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct BenchArgs {
    /// What followed `bench`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

/// The subcommands `keysmith bench` had, which `keysmith-bench` has too.
const BENCH_SUBCOMMANDS: [&str; 5] = ["rate", "stall", "limit", "latency", "compare"];

/// Where the lab went, and that the installed binary does not carry it.
const LAB: &str = "keysmith-bench, the repository's lab binary (it is not published or \
                   installed with keysmith)";

/// `keysmith bench ...`: the usage error that says how to run it now. Names
/// the subcommand given (if it is one), never the rest of the command line,
/// which may hold a database password.
pub fn bench(args: &BenchArgs) -> UsageError {
    let sub = args
        .args
        .first()
        .and_then(|a| a.to_str())
        .filter(|a| BENCH_SUBCOMMANDS.contains(a))
        .unwrap_or("compare");
    UsageError(format!(
        "`keysmith bench` moved to {LAB}. From a clone of the repository run: \
         cargo run -p keysmith-bench --release -- {sub} [the same options] \
         (a global --store URL goes after `--` too; `-- --help` lists the subcommands)"
    ))
}

/// `keysmith verify --partitions`: the usage error that says how to run it
/// now.
pub fn verify_partitions(seconds: f64) -> UsageError {
    UsageError(format!(
        "`keysmith verify --partitions` moved to {LAB}, as `keysmith-bench partitions`. From \
         a clone of the repository, as root: cargo build --release -p keysmith-cli -p \
         keysmith-bench && target/release/keysmith-bench partitions --seconds {seconds} \
         (`keysmith verify` without --partitions still checks your own store)"
    ))
}
