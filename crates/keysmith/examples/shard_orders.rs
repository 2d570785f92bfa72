//! Orders on three SQLite shards, read through a shard set.
//!
//! ```sh
//! cargo run -p keysmith --example shard_orders            # in a temporary directory
//! cargo run -p keysmith --example shard_orders -- ./demo  # or in ./demo, kept afterwards
//! ```
//!
//! It writes `shards.toml` (three `[[shard]]` tables) and three shard files
//! with an `orders` table, records each shard's id in its own file (what
//! `keysmith shard-set init --config shards.toml` does), then reads every
//! order from every shard in parallel, builds each order's key from its row
//! (the shard id from the connection, the customer's key from the row's
//! customer columns, which may point at another shard), and prints the
//! orders merged by key with their external strings. Last, it looks two
//! orders up again from their external strings: only their shards are
//! asked.
//!
//! External strings are signed with `$KEYSMITH_SHARD_KEY_SECRET` when it is
//! set (16 bytes or more), else they carry only a checksum.

use std::io::Write;
use std::path::{Path, PathBuf};

use keysmith::shard_key::{Duplicates, IdType, KeyMapping, KeySchema, ShardKey, ShardKeyCodec};
use keysmith::shard_set::{ShardConnection, ShardSet, sqlite_error};

/// One order as the program sees it.
#[derive(Debug)]
struct Order {
    key: ShardKey,
    customer: Option<ShardKey>,
    item: String,
}

/// Orders are keyed by their `order_id` on the shard they live on.
fn order_mapping() -> keysmith::Result<KeyMapping> {
    KeyMapping::new('o', "order_id")?
        .with_types(KeySchema::new('o', IdType::U32)?)
        .map(KeyMapping::required)
}

/// An order's customer: on the shard in `customer_shard` (NULL for a guest).
fn customer_mapping() -> keysmith::Result<KeyMapping> {
    KeyMapping::foreign("customer_shard", 'c', "customer_id")?
        .with_types(KeySchema::new('c', IdType::U32)?)
}

/// Reads the orders of one shard: all of them, or those among `keys`.
async fn read_orders(conn: ShardConnection, keys: Vec<ShardKey>) -> keysmith::Result<Vec<Order>> {
    let shard = conn.shard();
    let (orders, customers) = (order_mapping()?, customer_mapping()?);
    conn.sqlite()?
        .run(move |db| {
            let sql = "SELECT order_id, customer_shard, customer_id, item FROM orders";
            let mut out = Vec::new();
            let mut read = |row: &rusqlite::Row<'_>| -> keysmith::Result<()> {
                out.push(Order {
                    key: orders.from_sqlite_row(row, shard)?.expect("required"),
                    customer: customers.from_sqlite_row(row, shard)?,
                    item: row.get("item").map_err(sqlite_error)?,
                });
                Ok(())
            };
            if keys.is_empty() {
                let mut stmt = db.prepare(sql).map_err(sqlite_error)?;
                let mut rows = stmt.query([]).map_err(sqlite_error)?;
                while let Some(row) = rows.next().map_err(sqlite_error)? {
                    read(row)?;
                }
            } else {
                let mut stmt = db
                    .prepare(&format!("{sql} WHERE order_id = ?1"))
                    .map_err(sqlite_error)?;
                for key in &keys {
                    let params = rusqlite::params_from_iter(orders.params(key)?);
                    let mut rows = stmt.query(params).map_err(sqlite_error)?;
                    while let Some(row) = rows.next().map_err(sqlite_error)? {
                        read(row)?;
                    }
                }
            }
            Ok(out)
        })
        .await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (dir, _temp) = match std::env::args_os().nth(1) {
        Some(d) => (PathBuf::from(d), None),
        None => {
            let t = tempfile::tempdir()?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let codec = ShardKeyCodec::from_env()?;
    // A locked stdout and writeln!: a closed pipe (`| head`) is an error, not a panic.
    run(&dir, &codec, &mut std::io::stdout().lock()).await
}

/// Writes the shard files and `shards.toml` in `dir`, then reads the orders
/// through the shard set and prints them to `out`.
async fn run(
    dir: &Path,
    codec: &ShardKeyCodec,
    out: &mut impl Write,
) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;

    // The configuration: relative paths are taken from the file's directory.
    let config = dir.join("shards.toml");
    let mut toml = String::new();
    for shard in 1..=3 {
        toml.push_str(&format!(
            "[[shard]]\nid = {shard}\nurl = \"sqlite://orders-{shard}.db\"\n\n"
        ));
    }
    std::fs::write(&config, toml)?;

    // Some orders on each shard (what the application would have written).
    for shard in 1u32..=3 {
        let db = rusqlite::Connection::open(dir.join(format!("orders-{shard}.db")))?;
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS orders (
                 order_id INTEGER PRIMARY KEY,
                 customer_shard INTEGER,
                 customer_id INTEGER,
                 item TEXT NOT NULL
             );",
        )?;
        let (a, b) = (shard * 100 + 1, shard * 100 + 2);
        let other = shard % 3 + 1;
        db.execute(
            "INSERT OR IGNORE INTO orders VALUES (?1, ?2, 7, 'tea'), (?3, NULL, NULL, 'cake')",
            rusqlite::params![a, other, b],
        )?;
    }

    let set = ShardSet::from_toml_file(&config)?;
    set.init().await?; // records each shard's id in its own file, once

    let orders = set
        .query_all(Duplicates::Reject, |o: &Order| &o.key, read_orders)
        .await?;
    writeln!(
        out,
        "{:<24} {:<14} {:<14} item",
        "external", "order", "customer"
    )?;
    for o in &orders {
        let customer = o
            .customer
            .as_ref()
            .map_or("-".to_owned(), ToString::to_string);
        writeln!(
            out,
            "{:<24} {:<14} {:<14} {}",
            codec.encode(&o.key),
            o.key.to_string(),
            customer,
            o.item
        )?;
    }

    // Back from external strings: only the shards of the first and the last
    // order are asked.
    let schema = KeySchema::new('o', IdType::U32)?;
    let wanted: Vec<ShardKey> = [orders.first(), orders.last()]
        .into_iter()
        .flatten()
        .map(|o| codec.decode(&codec.encode(&o.key), &schema))
        .collect::<keysmith::Result<_>>()?;
    let found = set
        .query_by_keys(&wanted, Duplicates::Reject, |o: &Order| &o.key, read_orders)
        .await?;
    for o in found {
        writeln!(
            out,
            "looked up {} on shard {}: {}",
            o.key,
            o.key.shard(),
            o.item
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the user guide shows (Shard keys and shard sets), run by `cargo test` (the example has `test = true`).
    #[tokio::test]
    async fn prints_every_order_with_its_external_string_then_finds_two() {
        let dir = tempfile::tempdir().unwrap();
        let codec = ShardKeyCodec::unsigned();
        // Twice: running it again on the same files changes nothing.
        for _ in 0..2 {
            let mut out = Vec::new();
            run(dir.path(), &codec, &mut out).await.unwrap();
            let text = String::from_utf8(out).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 1 + 6 + 2, "{text}");
            let mut shards = Vec::new();
            for line in &lines[1..7] {
                let external = line.split_whitespace().next().unwrap();
                let key = codec.decode_any(external).unwrap();
                assert!(line.contains(&key.to_string()), "{line}");
                shards.push(key.shard());
            }
            assert_eq!(shards, [1, 1, 2, 2, 3, 3]);
            assert!(lines[3].contains(r#"["o",2,201]"#) && lines[3].contains(r#"["c",3,7]"#));
            assert!(lines[4].contains(r#"["o",2,202]"#) && lines[4].contains(" - "));
            assert_eq!(lines[7], r#"looked up ["o",1,101] on shard 1: tea"#);
            assert_eq!(lines[8], r#"looked up ["o",3,302] on shard 3: cake"#);
        }
        // The set it wrote is what `keysmith shard-set check` accepts.
        ShardSet::from_toml_file(dir.path().join("shards.toml"))
            .unwrap()
            .check()
            .await
            .unwrap();
    }
}
