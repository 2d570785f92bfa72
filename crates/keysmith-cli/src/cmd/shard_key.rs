//! `shard-key encode`, `shard-key decode`, `shard-key range ...`.

use keysmith::shard_key::{Id, IdType, KeySchema, ShardKey, ShardKeyCodec, ShardRanges};

use crate::Global;

const SECRET_HELP: &str = "External strings are signed (HMAC-SHA-256) with the secret in \
$KEYSMITH_SHARD_KEY_SECRET (at least 16 bytes) when it is set; the secret is never taken \
from the command line. Without it they carry only a checksum, which catches typing \
mistakes but NOT tampering.";

/// Shard keys: external strings and identity ranges.
#[derive(Debug, clap::Subcommand)]
pub enum ShardKeyCommand {
    /// Prints the external string of a key.
    #[command(after_help = SECRET_HELP)]
    Encode {
        /// Data origin: one ASCII letter or digit naming the record type ('0' is reserved).
        #[arg(long)]
        origin: char,
        /// Shard id, 0 to 65535.
        #[arg(long)]
        shard: u16,
        /// Record id: an integer (an i64) or TYPE:VALUE, e.g. u32:42, string:abc,
        /// uuid:67e55044-10b1-426f-9247-bb680e5fe0c8, datetime:2024-05-01T12:00:00Z, duration:1.5s.
        #[arg(long, value_parser = parse_id, allow_hyphen_values = true)]
        record: Id,
        /// A child id, in the same forms as --record; up to three, outermost first.
        #[arg(long = "child", value_name = "ID", value_parser = parse_id, allow_hyphen_values = true)]
        children: Vec<Id>,
    },
    /// Prints the JSON form of an external string (with --json: an object with id types).
    #[command(after_help = SECRET_HELP)]
    Decode {
        /// The external string.
        string: String,
        /// Fail unless the key has this origin.
        #[arg(long)]
        origin: Option<char>,
        /// Fail unless the record id has this type (needs --origin): i8..i64, u8..u64,
        /// bool, char, string, uuid, datetime, duration.
        #[arg(long, requires = "origin", value_parser = parse_type)]
        record_type: Option<IdType>,
        /// With --record-type: the type of each child id, outermost first.
        #[arg(long = "child-type", value_name = "TYPE", requires = "record_type", value_parser = parse_type)]
        child_types: Vec<IdType>,
    },
    /// Identity ranges: one block of ids per shard.
    #[command(subcommand)]
    Range(RangeCommand),
}

/// Identity range commands.
#[derive(Debug, clap::Subcommand)]
pub enum RangeCommand {
    /// Prints the shard and local position of a global id.
    Locate {
        #[command(flatten)]
        layout: Layout,
        /// The global id.
        #[arg(allow_hyphen_values = true)]
        id: i64,
    },
    /// Prints the global id of a shard's local position (0-based).
    Global {
        #[command(flatten)]
        layout: Layout,
        /// The shard.
        shard: u16,
        /// The position within the shard's range, from 0.
        local: i64,
    },
    /// Creates one sequence per shard in the store (PREFIX.shard-N), each
    /// covering exactly its shard's range; existing ones with the same range are kept.
    Create {
        #[command(flatten)]
        layout: Layout,
        /// Sequence name prefix.
        prefix: String,
        /// Default block size of the sequences.
        #[arg(long, default_value_t = 100)]
        block: i64,
    },
}

/// How ids are split between shards.
#[derive(Debug, clap::Args)]
pub struct Layout {
    /// The first id of shard 0.
    #[arg(long, default_value_t = 0)]
    base: i64,
    /// Ids per shard.
    #[arg(long)]
    size: i64,
    /// Number of shards (1 to 65536).
    #[arg(long)]
    shards: u32,
}

impl Layout {
    fn ranges(&self) -> keysmith::Result<ShardRanges> {
        ShardRanges::new(self.base, self.size, self.shards)
    }
}

fn parse_id(s: &str) -> Result<Id, String> {
    s.parse().map_err(|e: keysmith::Error| e.to_string())
}

fn parse_type(s: &str) -> Result<IdType, String> {
    s.parse().map_err(|e: keysmith::Error| e.to_string())
}

/// Runs a shard-key command.
pub async fn run(cmd: ShardKeyCommand, global: &Global) -> anyhow::Result<()> {
    match cmd {
        ShardKeyCommand::Encode {
            origin,
            shard,
            record,
            children,
        } => {
            let codec = ShardKeyCodec::from_env()?;
            let key = ShardKey::from_parts(origin, shard, record, children)?;
            let external = codec.encode(&key);
            if global.json {
                let out = serde_json::json!({"external": external, "key": key.describe()});
                println!("{out}");
            } else {
                println!("{external}");
            }
        }
        ShardKeyCommand::Decode {
            string,
            origin,
            record_type,
            child_types,
        } => {
            let codec = ShardKeyCodec::from_env()?;
            let key = match (origin, record_type) {
                (Some(origin), Some(record)) => {
                    let mut schema = KeySchema::new(origin, record)?;
                    for ty in child_types {
                        schema = schema.with_child(ty)?;
                    }
                    codec.decode(&string, &schema)?
                }
                (Some(origin), None) => {
                    let key = codec.decode_any(&string)?;
                    key.check_origin(origin)?;
                    key
                }
                (None, _) => codec.decode_any(&string)?,
            };
            if global.json {
                println!("{}", key.describe());
            } else {
                println!("{key}");
            }
        }
        ShardKeyCommand::Range(RangeCommand::Locate { layout, id }) => {
            let (shard, local) = layout.ranges()?.locate(id)?;
            if global.json {
                println!(
                    "{}",
                    serde_json::json!({"id": id, "shard": shard, "local": local})
                );
            } else {
                println!("shard {shard} local {local}");
            }
        }
        ShardKeyCommand::Range(RangeCommand::Global {
            layout,
            shard,
            local,
        }) => {
            let id = layout.ranges()?.global_id(shard, local)?;
            if global.json {
                println!(
                    "{}",
                    serde_json::json!({"id": id, "shard": shard, "local": local})
                );
            } else {
                println!("{id}");
            }
        }
        ShardKeyCommand::Range(RangeCommand::Create {
            layout,
            prefix,
            block,
        }) => {
            let ranges = layout.ranges()?;
            let store = global.open().await?;
            let rows = ranges
                .create_sequences(store.as_ref(), &prefix, block)
                .await?;
            if global.json {
                println!("{}", serde_json::to_string(&rows)?);
            } else {
                for row in rows {
                    println!("{} {} {}", row.name, row.start, row.max);
                }
            }
        }
    }
    Ok(())
}
