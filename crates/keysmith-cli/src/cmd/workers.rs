//! `workers lease|renew|release|list GROUP`: worker-id leases for
//! generators other than keysmith's own, and what a group's worker ids look
//! like in the store. The library does the work
//! ([`keysmith::ids::WorkerLeases`], [`keysmith::ids::list_workers`]); this
//! parses and prints.
//!
//! Tokens are signed with `KEYSMITH_LEASE_SECRET` when it is set (then a
//! token of the CLI opens at a server with the same secret, and the other
//! way round). Without it they are signed with a fixed key, which checks
//! only that a token is whole: whoever runs the CLI holds the store anyway.

use std::time::Duration;

use keysmith::ids::{DEFAULT_GROUP_SIZE, HeldWorker, WorkerLeases, WorkerList};
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
    /// Lists the worker ids of GROUP: held or free, by whom, until when,
    /// fence and time floor (never a lease token).
    List {
        /// The group.
        group: String,
        /// The group's size: worker ids 0..MAX, for the count of free ones
        /// (the store does not keep it; the holders lease with it).
        #[arg(long, default_value_t = DEFAULT_GROUP_SIZE, allow_negative_numbers = true)]
        max: i64,
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

fn print_list(l: &WorkerList, max: i64, json: bool) -> anyhow::Result<()> {
    let o = l.occupancy(max);
    if o.warning {
        eprintln!(
            "warning: {} of the {} worker ids of group {:?} are free (a warning at {}% or less); \
             new holders are refused once none is: use a larger group or release idle leases",
            o.free,
            o.size,
            o.group,
            keysmith::ids::WORKERS_FREE_WARNING_SHARE * 100.0
        );
    }
    if json {
        let mut v = serde_json::to_value(l)?;
        v["occupancy"] = serde_json::to_value(&o)?;
        println!("{v}");
        return Ok(());
    }
    let free = format!(
        "free: {} of {} worker ids ({} held)",
        o.free, o.size, o.held
    );
    if l.workers.is_empty() {
        println!("no worker id of group {:?} was ever leased", l.group);
        println!("{free}");
        return Ok(());
    }
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    println!(
        "{:<8} {:<5} {:<6} {:<15} {:<15} {:<13} holder",
        "worker", "held", "fence", "until_ms", "expires_ms", "expires_in_ms"
    );
    for w in &l.workers {
        println!(
            "{:<8} {:<5} {:<6} {:<15} {:<15} {:<13} {}",
            w.worker,
            if w.held { "yes" } else { "no" },
            w.fence,
            w.until_ms,
            or_dash(w.expires_ms.map(|v| v.to_string())),
            or_dash(w.expires_in_ms.map(|v| v.to_string())),
            or_dash(w.holder.clone()),
        );
    }
    println!("{free}");
    Ok(())
}

/// Runs a workers command.
pub async fn run(cmd: WorkersCommand, global: &Global) -> anyhow::Result<()> {
    if let Some(client) = global.client()? {
        return remote(cmd, &client, global.json).await;
    }
    // Check the input (and the lease key, but a listing signs nothing)
    // before touching the store.
    match cmd {
        WorkersCommand::Lease { group, ttl_ms, max } => {
            let key = key()?;
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
            let key = key()?;
            let ttl = ttl_ms.map(ttl).transpose()?;
            keysmith::validate_name(&group)?;
            let leases = WorkerLeases::new(global.open().await?, key);
            print(&leases.renew(&group, &token, ttl).await?, global.json)
        }
        WorkersCommand::Release { group, token } => {
            let key = key()?;
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
        WorkersCommand::List { group, max } => {
            keysmith::validate_name(&group)?;
            let most = keysmith::store::MAX_WORKERS;
            if !(1..=most).contains(&max) {
                anyhow::bail!("--max must be 1 to {most}, got {max}");
            }
            let store = global.open().await?;
            print_list(
                &keysmith::ids::list_workers(&*store, &group).await?,
                max,
                global.json,
            )
        }
    }
}

/// A workers command against a keysmith server: the same output. The
/// server signs the leases with its own key.
async fn remote(
    cmd: WorkersCommand,
    client: &keysmith_client::Client,
    json: bool,
) -> anyhow::Result<()> {
    let held = |l: keysmith_client::WorkerLease| -> anyhow::Result<HeldWorker> {
        let mut v = l.json;
        v["lease"] = l.token.expose().into();
        Ok(serde_json::from_value(v)?)
    };
    match cmd {
        WorkersCommand::Lease { group, ttl_ms, max } => {
            let ttl = ttl(ttl_ms)?;
            let l = client
                .lease_worker(&group, Some(ttl.as_millis() as u64), Some(max as u64))
                .await?;
            print(&held(l)?, json)
        }
        WorkersCommand::Renew {
            group,
            token,
            ttl_ms,
        } => {
            let ttl = ttl_ms.map(ttl).transpose()?;
            let token = keysmith_client::LeaseToken::from_text(token);
            let l = client
                .renew_worker(&group, &token, ttl.map(|t| t.as_millis() as u64))
                .await?;
            print(&held(l)?, json)
        }
        WorkersCommand::Release { group, token } => {
            let token = keysmith_client::LeaseToken::from_text(token);
            let v = client.release_worker(&group, &token).await?;
            let released = v.get("released").and_then(serde_json::Value::as_bool) == Some(true);
            if json {
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
        WorkersCommand::List { group, max } => {
            let v = client.list_workers(&group).await?;
            let list: WorkerList = serde_json::from_value(v)?;
            print_list(&list, max, json)
        }
    }
}
