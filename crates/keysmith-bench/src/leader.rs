//! `keysmith-bench leader` (issue 41): a leader-ordered sequence over HTTP
//! at 1, 4, 16 and 64 connections beside a cached (unordered) sequence over
//! HTTP and the store's bare durable-write loop, in the same run, each row
//! in slices alternating with the bare loop (as the strict rows are).
//!
//! Both sequences are served by one in-process server (which leads the
//! leader-ordered one) on the store given; both have block 10 000.

use std::time::Duration;

use super::http;
use super::strict::{CONNS, sliced_rates};

/// One measured row.
#[derive(Debug, serde::Serialize)]
pub struct LeaderRow {
    pub store: String,
    pub connections: usize,
    pub cached_per_sec: f64,
    pub leader_per_sec: f64,
    pub leader_p99_us: f64,
    pub bare_loop_per_sec: f64,
    pub leader_vs_cached: f64,
    pub leader_vs_bare_loop: f64,
}

/// Measures the rows of one store (`store_name`: SQLite, PostgreSQL or
/// etcd, as the strict rows name them), `d` per row.
///
/// # Errors
/// A store or server that fails mid-run.
pub async fn rows(store_name: &str, url: &str, d: Duration) -> anyhow::Result<Vec<LeaderRow>> {
    let config = keysmith_server::Config {
        listen: "127.0.0.1:0".parse()?,
        store_url: url.to_owned(),
        // Every connection of the lab comes from one address.
        max_connections_per_ip: usize::MAX,
        ..keysmith_server::Config::default()
    };
    let server = keysmith_server::Server::bind(config).await?;
    let addr = server.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.run(async {
        let _ = stop_rx.await;
    }));
    let dir = std::env::temp_dir();
    let bare_file = dir.join(format!("keysmith-fsync-{:016x}.db", rand::random::<u64>()));
    let tag = rand::random::<u32>();
    let (cached, leader) = (
        format!("cmp-cached-{tag:08x}"),
        format!("cmp-leader-{tag:08x}"),
    );
    let result = async {
        for (name, extra) in [(&cached, ""), (&leader, r#","order":"leader""#)] {
            let (status, body) = http::Conn::open(addr)
                .await?
                .call(&http::json_request(
                    "POST",
                    "/v1/sequences",
                    &format!(r#"{{"name":"{name}","block":10000{extra}}}"#),
                ))
                .await
                .map(|(s, b)| (s, String::from_utf8_lossy(b).into_owned()))?;
            if status != 201 {
                anyhow::bail!("creating {name} over HTTP: {status} {body}");
            }
        }
        let mut out = Vec::new();
        for conns in CONNS {
            let req = http::request("POST", &format!("/v1/sequences/{cached}/next"));
            let (c, _, b1) =
                sliced_rates(addr, store_name, url, &bare_file, d, &req, conns).await?;
            let req = http::request("POST", &format!("/v1/sequences/{leader}/next"));
            let (l, p99, b2) =
                sliced_rates(addr, store_name, url, &bare_file, d, &req, conns).await?;
            let bare = (b1 + b2) / 2.0;
            out.push(LeaderRow {
                store: store_name.to_owned(),
                connections: conns,
                cached_per_sec: c,
                leader_per_sec: l,
                leader_p99_us: p99 as f64 / 1000.0,
                bare_loop_per_sec: bare,
                leader_vs_cached: l / c,
                leader_vs_bare_loop: l / bare,
            });
        }
        Ok(out)
    }
    .await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", bare_file.display()));
    }
    let _ = stop_tx.send(());
    serving.await??;
    result
}

/// The rows as a Markdown table.
pub fn markdown(rows: &[LeaderRow]) -> String {
    let mut out = String::from(
        "| store | connections | cached next/s | leader next/s | leader p99 | bare loop/s | leader / cached | leader / bare loop |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.0} us | {:.0} | {:.2}x | {:.1}x |\n",
            r.store,
            r.connections,
            r.cached_per_sec,
            r.leader_per_sec,
            r.leader_p99_us,
            r.bare_loop_per_sec,
            r.leader_vs_cached,
            r.leader_vs_bare_loop
        ));
    }
    out
}
