//! `workers lease|renew|release GROUP`: worker-id leases for generators
//! other than keysmith's own. The library does the work
//! ([`keysmith::ids::WorkerLeases`]); this parses and prints.
//!
//! Tokens are signed with `KEYSMITH_LEASE_SECRET` when it is set (then a
//! token of the CLI opens at a server with the same secret, and the other
//! way round). Without it they are signed with a fixed key, which checks
//! only that a token is whole: whoever runs the CLI holds the store anyway.

use std::time::Duration;

use keysmith::ids::{DEFAULT_GROUP_SIZE, HeldWorker, WorkerLeases};
use keysmith::sequence::lease::LeaseKey;

use crate::Global;

/// Worker-id lease commands.
#[derive(Debug, clap::Subcommand)]
pub enum WorkersCommand {
    /// Leases the lowest free worker id of GROUP; prints it and its token.
    Lease {
        /// The group (a name).
        group: String,
        /// The lease's time to live, ms (1 to 86400000).
        #[arg(long, default_value_t = 10_000, allow_negative_numbers = true)]
        ttl_ms: i64,
        /// Worker ids are 0..MAX (every holder of a group must use the same).
        #[arg(long, default_value_t = DEFAULT_GROUP_SIZE, allow_negative_numbers = true)]
        max: i64,
    },
    /// Renews a lease; prints it with its new token.
    Renew {
        /// The group.
        group: String,
        /// The token the last lease or renewal printed.
        token: String,
        /// A new time to live, ms (default: the lease's own).
        #[arg(long, allow_negative_numbers = true)]
        ttl_ms: Option<i64>,
    },
    /// Releases a lease: its worker id is free at once.
    Release {
        /// The group.
        group: String,
        /// The token the last lease or renewal printed.
        token: String,
    },
}

fn ttl(ms: i64) -> anyhow::Result<Duration> {
    let max = keysmith::store::MAX_WORKER_TTL;
    u64::try_from(ms)
        .ok()
        .map(Duration::from_millis)
        .filter(|t| !t.is_zero() && *t <= max)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--ttl-ms must be 1 to {} (a day), got {ms}",
                max.as_millis()
            )
        })
}

fn key() -> anyhow::Result<LeaseKey> {
    Ok(match LeaseKey::from_env()? {
        Some(k) => k,
        None => LeaseKey::new(b"keysmith cli worker leases, no secret set")?,
    })
}

fn print(h: &HeldWorker, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(h)?);
    } else {
        println!("worker:        {}", h.worker);
        println!("fence:         {}", h.fence);
        println!("not_before_ms: {}", h.not_before_ms);
        println!("until_ms:      {}", h.until_ms);
        println!("expires_ms:    {}", h.expires_ms);
        println!("lease:         {}", h.lease);
    }
    Ok(())
}

/// Runs a workers command.
pub async fn run(cmd: WorkersCommand, global: &Global) -> anyhow::Result<()> {
    // Check the input before touching the store.
    let key = key()?;
    match cmd {
        WorkersCommand::Lease { group, ttl_ms, max } => {
            let ttl = ttl(ttl_ms)?;
            keysmith::validate_name(&group)?;
            let most = keysmith::store::MAX_WORKERS;
            if !(1..=most).contains(&max) {
                anyhow::bail!("--max must be 1 to {most}, got {max}");
            }
            let leases = WorkerLeases::new(global.open().await?, key);
            print(&leases.lease(&group, ttl, max).await?, global.json)
        }
        WorkersCommand::Renew {
            group,
            token,
            ttl_ms,
        } => {
            let ttl = ttl_ms.map(ttl).transpose()?;
            keysmith::validate_name(&group)?;
            let leases = WorkerLeases::new(global.open().await?, key);
            print(&leases.renew(&group, &token, ttl).await?, global.json)
        }
        WorkersCommand::Release { group, token } => {
            keysmith::validate_name(&group)?;
            let leases = WorkerLeases::new(global.open().await?, key);
            let released = leases.release(&group, &token).await?;
            if global.json {
                println!("{}", serde_json::json!({ "released": released }));
            } else if released {
                println!("released");
            } else {
                println!(
                    "not released: the lease was lost already (another holder leased the worker id)"
                );
            }
            Ok(())
        }
    }
}
