//! `shard-set init`, `shard-set check`.

use std::path::PathBuf;

use keysmith::shard_set::{InitAction, ShardSet};

use crate::Global;

const CONFIG_HELP: &str = "FILE is TOML with one [[shard]] table per shard: id (0 to 65535) \
and url (sqlite://PATH, a relative PATH taken from FILE's directory, or \
postgres://USER@HOST/DB[?schema=NAME]). Each database records its shard id in the table \
keysmith_shard_identity (for PostgreSQL in the URL's schema, keysmith by default).";

/// Shard sets: which database is which shard.
#[derive(Debug, clap::Subcommand)]
pub enum ShardSetCommand {
    /// Records each shard's id inside its own database.
    ///
    /// Every shard is read
    /// first: if any records a different id or cannot be reached, nothing is
    /// written anywhere. Running it again is harmless.
    #[command(after_help = CONFIG_HELP)]
    Init {
        /// The shard set file.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
    /// Checks that every shard's database records the id the file gives it.
    ///
    /// Exits 1 naming the ids when one differs (a swapped configuration).
    /// Changes nothing.
    #[command(after_help = CONFIG_HELP)]
    Check {
        /// The shard set file.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

/// Runs a shard-set command.
pub async fn run(cmd: ShardSetCommand, global: &Global) -> anyhow::Result<()> {
    match cmd {
        ShardSetCommand::Init { config } => {
            let set = ShardSet::from_toml_file(&config)?;
            let done = set.init().await?;
            let word = |a: InitAction| match a {
                InitAction::Recorded => "recorded",
                InitAction::AlreadyRecorded => "already recorded",
            };
            if global.json {
                let shards: Vec<_> = done
                    .iter()
                    .map(|&(id, a)| {
                        serde_json::json!({"id": id, "url": set.url(id), "action": word(a)})
                    })
                    .collect();
                println!("{}", serde_json::json!({ "shards": shards }));
            } else {
                for (id, a) in done {
                    println!("shard {id} {} {}", set.url(id).unwrap_or(""), word(a));
                }
            }
        }
        ShardSetCommand::Check { config } => {
            let set = ShardSet::from_toml_file(&config)?;
            let reports = set.check().await?;
            if global.json {
                let shards: Vec<_> = reports
                    .iter()
                    .map(|r| serde_json::json!({"id": r.shard, "url": r.url, "recorded": r.shard}))
                    .collect();
                println!("{}", serde_json::json!({ "shards": shards, "ok": true }));
            } else {
                for r in reports {
                    println!("shard {} {} ok", r.shard, r.url);
                }
            }
        }
    }
    Ok(())
}
