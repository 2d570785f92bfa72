//! keysmith over HTTP: an in-process server per store, its own no-op
//! route as the baseline, and the latency of `next` at a fixed rate.

use super::*;

/// Starts a server over `url` on 127.0.0.1:0 (no adaptive block: each
/// sequence keeps its block), measures its no-op route and `next` per block,
/// `next?count=1000` and `reserve`, and (`latency`) latencies at a fixed rate.
pub(super) async fn http_rows(
    url: &str,
    store_name: &str,
    blocks: &[i64],
    d: Duration,
    o: &Options,
    latency: bool,
) -> anyhow::Result<(Vec<Row>, Vec<LatencyRow>)> {
    let config = keysmith_server::Config {
        listen: "127.0.0.1:0".parse()?,
        store_url: url.to_owned(),
        adaptive: None,
        // The reserve row asks for a million values an answer (reserve is
        // capped by max_count like next).
        max_count: keysmith::sequence::MAX_BATCH,
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
    let result = http_measure(addr, store_name, blocks, d, o, latency).await;
    let _ = stop_tx.send(());
    serving.await??;
    result
}

pub(super) async fn http_measure(
    addr: SocketAddr,
    store_name: &str,
    blocks: &[i64],
    d: Duration,
    o: &Options,
    latency: bool,
) -> anyhow::Result<(Vec<Row>, Vec<LatencyRow>)> {
    let mut rows = Vec::new();
    let mut lat = Vec::new();
    let livez_req = http::request("GET", "/livez");
    // Warm-up, then the baseline.
    http::load(
        addr,
        &livez_req,
        o.conns,
        d.min(Duration::from_millis(300)),
        None,
    )
    .await?;
    let livez = http::load(addr, &livez_req, o.conns, d, None).await?;
    let base = Row {
        requests_per_sec: Some(livez.per_sec()),
        note: format!(
            "the server's no-op route: the HTTP ceiling; {} connections",
            o.conns
        ),
        ..measured(
            "HTTP",
            format!("GET /livez ({store_name} server)"),
            LOCAL,
            livez.per_sec(),
        )
    };
    let tag = format!("{:08x}", rand::random::<u32>());
    let mut created = Vec::new();
    let mut rows_next = Vec::new();
    for &block in blocks {
        let name = format!("cmp-{tag}-{block}");
        // A fresh connection per admin call: the server closes idle ones.
        let mut admin = http::Conn::open(addr).await?;
        let (status, body) = admin
            .call(&http::json_request(
                "POST",
                "/v1/sequences",
                &format!(r#"{{"name":"{name}","block":{block}}}"#),
            ))
            .await?;
        if status != 201 {
            anyhow::bail!(
                "creating {name} over HTTP: {status} {}",
                String::from_utf8_lossy(body)
            );
        }
        created.push(name.clone());
        let req = http::request("POST", &format!("/v1/sequences/{name}/next"));
        // Slices of this route and of /livez in turn, so a change in the
        // machine's load during the row weighs on both alike.
        let (l, paired) = interleaved(addr, &req, &livez_req, o.conns, d).await?;
        check_failed(&l, &name)?;
        let g = if block == 1 { KS_STRICT } else { KS_DURABLE };
        let r = Row {
            requests_per_sec: Some(l.per_sec()),
            note: format!(
                "count=1; p50 {} us, p99.9 {} us at saturation; /livez in the slices between: {}/s",
                us(l.pct(0.5)),
                us(l.pct(0.999)),
                human(paired.per_sec())
            ),
            baseline: Some((
                "GET /livez, interleaved".into(),
                l.per_sec() / paired.per_sec(),
            )),
            ..measured(
                "HTTP",
                format!("POST next, {store_name}, block {block}"),
                g,
                l.per_sec(),
            )
        };
        rows_next.push(r);
    }
    let big = *blocks.iter().max().unwrap_or(&10_000);
    let bulk_name = created.last().cloned().unwrap_or_default();
    let req = http::request(
        "POST",
        &format!("/v1/sequences/{bulk_name}/next?count=1000"),
    );
    let l = http::load(addr, &req, o.conns, d, None).await?;
    check_failed(&l, &bulk_name)?;
    let bulk = Row {
        requests_per_sec: Some(l.per_sec()),
        note: format!("block {big}; a JSON array of 1000 values per answer"),
        ..measured(
            "HTTP",
            format!("POST next?count=1000, {store_name}"),
            KS_DURABLE,
            l.per_sec() * 1000.0,
        )
    };
    let reserve_n: i64 = 1_000_000;
    let req = http::request(
        "POST",
        &format!("/v1/sequences/{bulk_name}/reserve?count={reserve_n}"),
    );
    let l = http::load(addr, &req, o.conns, d, None).await?;
    check_failed(&l, &bulk_name)?;
    let reserve = Row {
        requests_per_sec: Some(l.per_sec()),
        note: format!(
            "a leased range of {reserve_n} values per answer, one store reservation each; the client hands them out"
        ),
        ..measured(
            "HTTP",
            format!("POST reserve?count={reserve_n}, {store_name}"),
            KS_DURABLE,
            l.per_sec() * reserve_n as f64,
        )
    };
    if latency {
        let next_req = http::request("POST", &format!("/v1/sequences/{bulk_name}/next"));
        for (label, req) in [
            ("GET /livez".to_string(), &livez_req),
            (format!("POST next, {store_name}, block {big}"), &next_req),
        ] {
            let l = http::load(addr, req, o.conns, d, Some(o.rate)).await?;
            check_failed(&l, &label)?;
            lat.push(LatencyRow::of(label, o.rate, &l));
        }
    }
    rows.push(base);
    rows.extend(rows_next);
    rows.push(bulk);
    rows.push(reserve);
    for name in created {
        http::Conn::open(addr)
            .await?
            .call(&http::request("DELETE", &format!("/v1/sequences/{name}")))
            .await?;
    }
    Ok((rows, lat))
}

/// `req` and `base` in alternating slices (six each) for `d` in all; the
/// loads of each, summed.
pub(super) async fn interleaved(
    addr: SocketAddr,
    req: &[u8],
    base: &[u8],
    conns: usize,
    d: Duration,
) -> anyhow::Result<(http::Load, http::Load)> {
    const SLICES: u32 = 6;
    let slice = d / (2 * SLICES);
    let (mut a, mut b) = (http::Load::default(), http::Load::default());
    for _ in 0..SLICES {
        for (load, r) in [(&mut a, req), (&mut b, base)] {
            let l = http::load(addr, r, conns, slice, None).await?;
            load.requests += l.requests;
            load.seconds += l.seconds;
            load.failed += l.failed;
            load.latencies.extend(l.latencies);
        }
    }
    a.latencies.sort_unstable();
    b.latencies.sort_unstable();
    Ok((a, b))
}

pub(super) fn check_failed(l: &http::Load, what: &str) -> anyhow::Result<()> {
    if l.failed > 0 {
        anyhow::bail!("{what}: {} of {} requests failed", l.failed, l.requests);
    }
    Ok(())
}
