//! The other systems' own ways, beside keysmith: PostgreSQL, MySQL and
//! Redis as their users call them.

use super::*;

/// Whether this build has the store's backend (etcd and MySQL are features).
pub(super) fn built_in(store_name: &str) -> bool {
    (store_name != "etcd" || cfg!(feature = "etcd"))
        && (store_name != "MySQL" || cfg!(feature = "mysql"))
}

pub(super) fn mysql_names() -> Vec<(String, Guarantees)> {
    vec![
        (
            "UPDATE ... SET v = LAST_INSERT_ID(v + 1) per value".into(),
            Guarantees::new(true, Unique::Yes, Order::Global),
        ),
        (
            "INSERT into an AUTO_INCREMENT table per value".into(),
            Guarantees::new(true, Unique::Yes, Order::PerHandle),
        ),
    ]
}

/// MySQL's own ways of numbering, on one connection with the store's TLS,
/// credentials and session (autocommit: each statement a durable commit).
#[cfg(feature = "mysql")]
pub(super) async fn mysql_rows(url: &str, d: Duration) -> anyhow::Result<Vec<Row>> {
    use keysmith::store::mysql::mysql_async::prelude::Queryable;
    let mut conn = keysmith::store::mysql::connect(url).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot connect to MySQL at {}: {e}",
            keysmith::store::redact_url(url)
        )
    })?;
    let tag = format!("{:016x}", rand::random::<u64>());
    let (t, a) = (
        format!("ks_cmp_counter_{tag}"),
        format!("ks_cmp_auto_{tag}"),
    );
    conn.query_drop(format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB"
    ))
    .await?;
    conn.query_drop(format!("INSERT INTO {t} VALUES (1, 0)"))
        .await?;
    conn.query_drop(format!(
        "CREATE TABLE {a} (id BIGINT AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB"
    ))
    .await?;
    let stmts = [
        format!("UPDATE {t} SET v = LAST_INSERT_ID(v + 1) WHERE id = 1"),
        format!("INSERT INTO {a} () VALUES ()"),
    ];
    let notes = [
        "the MySQL sequence-table idiom: one durable commit per value, the value from the OK packet",
        "one durable commit per value (and a row per value); the counter survives restarts since MySQL 8 and MariaDB 10.2",
    ];
    let conn = tokio::sync::Mutex::new(conn);
    let mut out = Vec::new();
    for (((name, g), sql), note) in mysql_names().into_iter().zip(stmts).zip(notes) {
        let rate = async_rate(d, || async {
            let mut c = conn.lock().await;
            c.exec_drop(&sql, ()).await?;
            black_box(c.last_insert_id());
            Ok(())
        })
        .await?;
        out.push(Row {
            note: note.into(),
            ..measured("MySQL", name, g, rate)
        });
    }
    let mut conn = conn.into_inner();
    conn.query_drop(format!("DROP TABLE {t}, {a}")).await?;
    let _ = conn.disconnect().await;
    Ok(out)
}

pub(super) fn postgres_names() -> Vec<(String, Guarantees)> {
    let nextval = Guarantees::new(false, Unique::UntilCrash, Order::Global);
    vec![
        ("nextval, no cache".into(), nextval),
        (
            "nextval, CACHE 1000".into(),
            Guarantees::new(false, Unique::UntilCrash, Order::PerHandle),
        ),
        (
            "UPDATE ... RETURNING per value".into(),
            Guarantees::new(true, Unique::Yes, Order::Global),
        ),
    ]
}

pub(super) async fn postgres_rows(url: &str, d: Duration) -> anyhow::Result<Vec<Row>> {
    // The store's own connector: the URL's TLS settings and credentials.
    let client = keysmith::store::postgres::connect(url).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot connect to PostgreSQL at {}: {e}",
            keysmith::store::redact_url(url)
        )
    })?;
    let tag = format!("{:016x}", rand::random::<u64>());
    let (s0, s1, t) = (
        format!("ks_cmp_nocache_{tag}"),
        format!("ks_cmp_cache_{tag}"),
        format!("ks_cmp_counter_{tag}"),
    );
    client
        .batch_execute(&format!(
            "CREATE SEQUENCE {s0}; CREATE SEQUENCE {s1} CACHE 1000;
             CREATE TABLE {t} (id int PRIMARY KEY, v bigint NOT NULL);
             INSERT INTO {t} VALUES (1, 0);"
        ))
        .await?;
    let mut out = Vec::new();
    let names = postgres_names();
    let stmts = [
        format!("SELECT nextval('{s0}')"),
        format!("SELECT nextval('{s1}')"),
        format!("UPDATE {t} SET v = v + 1 WHERE id = 1 RETURNING v"),
    ];
    for ((name, g), sql) in names.into_iter().zip(stmts) {
        let stmt = client.prepare(&sql).await?;
        let rate = async_rate(d, || async {
            let r = client.query_one(&stmt, &[]).await?;
            black_box(r.get::<_, i64>(0));
            Ok(())
        })
        .await?;
        let note = if g.durable {
            "one synchronously committed UPDATE per value"
        } else {
            "WAL written once per 32 values (or per cache refill), commit waits for nothing: see BENCHMARKS.md"
        };
        out.push(Row {
            note: note.into(),
            ..measured("PostgreSQL", name, g, rate)
        });
    }
    client
        .batch_execute(&format!(
            "DROP SEQUENCE {s0}; DROP SEQUENCE {s1}; DROP TABLE {t};"
        ))
        .await?;
    drop(client);
    Ok(out)
}

pub(super) fn redis_names() -> Vec<(String, Guarantees)> {
    vec![
        (
            "INCR, appendfsync always".into(),
            Guarantees::new(true, Unique::Yes, Order::Global),
        ),
        (
            "INCR, no persistence".into(),
            Guarantees::new(false, Unique::UntilCrash, Order::Global),
        ),
    ]
}

/// Sets the server's persistence for each row and puts it back afterwards:
/// give a throwaway server.
pub(super) async fn redis_rows(url: &str, d: Duration) -> anyhow::Result<Vec<Row>> {
    let mut r = Redis::connect(url).await?;
    let before_aof = r.config_get("appendonly").await?;
    let before_fsync = r.config_get("appendfsync").await?;
    let before_save = r.config_get("save").await?;
    let key = format!("keysmith-compare-{:016x}", rand::random::<u64>());
    let mut out = Vec::new();
    for (i, (name, g)) in redis_names().into_iter().enumerate() {
        if i == 0 {
            r.call(&["CONFIG", "SET", "appendonly", "yes"]).await?;
            r.call(&["CONFIG", "SET", "appendfsync", "always"]).await?;
            // Enabling the log rewrites it in the background first.
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(10) {
                let info = r.call(&["INFO", "persistence"]).await?;
                let busy = matches!(&info, super::super::redis::Reply::Bulk(Some(b))
                    if String::from_utf8_lossy(b).contains("aof_rewrite_in_progress:1"));
                if !busy {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        } else {
            r.call(&["CONFIG", "SET", "appendonly", "no"]).await?;
            r.call(&["CONFIG", "SET", "save", ""]).await?;
        }
        let t = Instant::now();
        let mut n = 0u64;
        while t.elapsed() < d {
            black_box(r.incr(&key).await?);
            n += 1;
        }
        let note = if g.durable {
            "every write fsynced before the reply"
        } else {
            "memory only: a restart starts the counter again"
        };
        out.push(Row {
            note: note.into(),
            ..measured("Redis", name, g, n as f64 / t.elapsed().as_secs_f64())
        });
    }
    r.call(&["DEL", &key]).await?;
    if let Some(v) = before_save {
        r.call(&["CONFIG", "SET", "save", &v]).await?;
    }
    if let Some(v) = before_aof {
        r.call(&["CONFIG", "SET", "appendonly", &v]).await?;
    }
    if let Some(v) = before_fsync {
        r.call(&["CONFIG", "SET", "appendfsync", &v]).await?;
    }
    Ok(out)
}
