//! The status page in a real browser: headless Chromium loads `GET /`, runs
//! its script (which refreshes the tables from `/v1/status`), and the
//! rendered DOM shows what a person would see: the names as written (markup
//! in a name stays text), next values, block sizes, values served.
//!
//! Skips with a message when Chromium is not installed, unless
//! `KEYSMITH_REQUIRE_BACKENDS=1`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{TestServer, enc};
use reqwest::Method;

const CHROMIUM: &[&str] = &["/usr/bin/chromium", "/usr/bin/chromium-browser"];

fn chromium() -> Option<PathBuf> {
    let found = CHROMIUM.iter().map(PathBuf::from).find(|p| p.exists());
    if found.is_none() {
        let msg = "SKIP status_page: chromium is not installed (apt-get install chromium)";
        if std::env::var("KEYSMITH_REQUIRE_BACKENDS").as_deref() == Ok("1") {
            panic!("{msg}, and KEYSMITH_REQUIRE_BACKENDS=1");
        }
        eprintln!("{msg}");
    }
    found
}

/// Runs headless Chromium on `url` with `extra` arguments; returns stdout.
fn run_chromium(bin: &Path, url: &str, extra: &[String]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            // Lets the page's script fetch /v1/status and render before the dump.
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("chromium did not finish within two minutes");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Decodes the entities a DOM serializer writes in text.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The text of every cell of every body row of the table with `id`.
fn table_rows(dom: &str, id: &str) -> Vec<Vec<String>> {
    let start = dom
        .find(&format!("<table id=\"{id}\""))
        .unwrap_or_else(|| panic!("no table {id} in\n{dom}"));
    let table = &dom[start..start + dom[start..].find("</table>").unwrap()];
    let body = &table[table.find("<tbody>").unwrap()..];
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let inner = &cell[cell.find('>').unwrap() + 1..cell.find("</td>").unwrap()];
                    // Drop inner tags (the "(default)" span), keep their text.
                    let mut text = String::new();
                    let mut in_tag = false;
                    for c in inner.chars() {
                        match c {
                            '<' => in_tag = true,
                            '>' => in_tag = false,
                            c if !in_tag => text.push(c),
                            _ => {}
                        }
                    }
                    unescape(&text)
                })
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_shows_what_the_server_does() {
    let Some(bin) = chromium() else { return };
    let srv = TestServer::start().await;
    let tricky = r#"<img/src=x/onerror=alert(1)>&"q'"#;
    srv.create("orders", 50).await;
    srv.create(tricky, 10).await;
    srv.create("unused", 100).await;
    for _ in 0..12 {
        srv.next("orders", 10).await;
    }
    srv.next(&enc(tricky), 3).await;
    let (st, _) = srv
        .call(
            Method::POST,
            "/v1/pools",
            Some(serde_json::json!({"name": "tickets", "size": 20})),
        )
        .await;
    assert_eq!(st, 201);
    let (st, _) = srv
        .call(Method::POST, "/v1/pools/tickets/next?count=5", None)
        .await;
    assert_eq!(st, 200);
    let (_, orders) = srv.call(Method::GET, "/v1/sequences/orders", None).await;

    let url = srv.url("/");
    let dom = tokio::task::spawn_blocking({
        let (bin, url) = (bin.clone(), url.clone());
        move || run_chromium(&bin, &url, &["--dump-dom".into()])
    })
    .await
    .unwrap();

    assert!(
        dom.contains("data-refreshed=\"yes\""),
        "the page's script did not refresh from /v1/status:\n{dom}"
    );
    assert!(!dom.contains("<img"), "a name became markup:\n{dom}");
    let rows = table_rows(&dom, "sequences");
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    let mut want = vec!["orders", tricky, "unused"];
    want.sort();
    assert_eq!(names, want);
    // Columns: name, next in store, block, rate, remaining, runway, served,
    // last served, refills.
    let row = |name: &str| rows.iter().find(|r| r[0] == name).unwrap().clone();
    let o = row("orders");
    assert_eq!(o[1], orders["next"].to_string(), "next in store");
    assert_eq!(o[2], orders["server"]["block"].to_string(), "block size");
    assert!(o[3].ends_with("/s"), "rate {:?}", o[3]);
    assert_eq!(
        o[4].replace('\u{2009}', ""),
        orders["remaining"].to_string(),
        "remaining (exact, past 2^53, in groups of three digits)"
    );
    // No rate mark a second old yet: no runway.
    assert_eq!(o[5], "–", "runway");
    assert_eq!(o[6], "120");
    assert_eq!(o[7], "120");
    let t = row(tricky);
    assert_eq!((t[6].as_str(), t[7].as_str()), ("3", "3"));
    let u = row("unused");
    assert_eq!(u[1], "1");
    assert_eq!(u[2], "100 (default)");
    assert_eq!(u[7], "–");

    // Pools: name, size, start, rate, runway, served, conflict rate.
    let pools = table_rows(&dom, "pools");
    assert_eq!(pools.len(), 1);
    let p = &pools[0];
    assert_eq!(
        (
            p[0].as_str(),
            p[1].as_str(),
            p[2].as_str(),
            p[4].as_str(),
            p[5].as_str(),
            p[6].as_str()
        ),
        ("tickets", "20", "1", "–", "5", "0.0%")
    );

    // A picture for a person to look at (KEYSMITH_SCREENSHOT=path keeps it).
    let shot = match std::env::var("KEYSMITH_SCREENSHOT") {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => srv.dir.path().join("status.png"),
    };
    tokio::task::spawn_blocking({
        let shot = shot.clone();
        move || {
            run_chromium(
                &bin,
                &url,
                &[
                    format!("--screenshot={}", shot.display()),
                    "--window-size=1280,600".into(),
                ],
            )
        }
    })
    .await
    .unwrap();
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
}

/// The `<tr>` of `name` in the table `id` of `html`, as markup.
fn row_markup<'a>(html: &'a str, id: &str, name: &str) -> Option<&'a str> {
    let table = html.split(&format!("<table id=\"{id}\">")).nth(1)?;
    let table = table.split("</table>").next()?;
    table
        .split("<tr>")
        .find(|r| r.contains(&format!("<td class=\"name\">{name}</td>")))
}

/// How many points the `n`th chart of a row draws (0: none yet).
fn chart_points(row: &str, n: usize) -> usize {
    row.split("data-points=\"")
        .nth(n + 1)
        .and_then(|r| r.split('"').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_draws_each_names_rate_and_runway_of_the_last_hour_on_the_server() {
    let Some(bin) = chromium() else { return };
    let srv = TestServer::start().await;
    let tricky = r#"<img/src=x/onerror=alert(1)>&"q'"#;
    srv.create("orders", 50).await;
    srv.create("users", 20).await;
    srv.create(tricky, 10).await;
    // Load until the server has sampled both charts of "orders" at least
    // twice (a sample every 10 s; the runway needs a rate mark a second old).
    let until = Instant::now() + Duration::from_secs(180);
    let html = loop {
        for _ in 0..20 {
            srv.next("orders", 25).await;
            srv.next("users", 3).await;
        }
        srv.next(&enc(tricky), 1).await;
        let html = srv
            .req(Method::GET, "/")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let ready = ["orders", "users"].iter().all(|n| {
            row_markup(&html, "charts", n)
                .is_some_and(|r| chart_points(r, 0) >= 2 && chart_points(r, 1) >= 2)
        });
        if ready {
            break html;
        }
        assert!(
            Instant::now() < until,
            "no charts of two points within three minutes:\n{html}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Drawn by the server: the SVG is in the page as served.
    let orders = row_markup(&html, "charts", "orders").unwrap();
    assert_eq!(orders.matches("<svg").count(), 2, "{orders}");
    assert!(orders.contains("<polyline"), "{orders}");
    assert!(
        orders.contains("values per second over the last hour"),
        "{orders}"
    );
    assert!(orders.contains("runway over the last hour"), "{orders}");

    // No script draws them: the page's one script never touches the charts.
    let script = html.split("<script>").nth(1).unwrap();
    assert!(
        !script.contains("charts") && !script.contains("svg"),
        "the page's script touches the charts"
    );

    // In Chromium, after the page's script refreshed the tables: the charts
    // are there, and the name with markup in it stays text.
    let url = srv.url("/");
    let dom = tokio::task::spawn_blocking({
        let (bin, url) = (bin.clone(), url.clone());
        move || run_chromium(&bin, &url, &["--dump-dom".into()])
    })
    .await
    .unwrap();
    assert!(
        dom.contains("data-refreshed=\"yes\""),
        "the page's script did not refresh from /v1/status:\n{dom}"
    );
    assert!(!dom.contains("<img"), "a name became markup:\n{dom}");
    let rows = table_rows(&dom, "charts");
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    let mut want = vec!["orders", "users", tricky];
    want.sort();
    let mut names = names;
    names.sort();
    assert_eq!(names, want);
    let o = rows.iter().find(|r| r[0] == "orders").unwrap();
    assert!(o[1].contains("/s now, peak"), "{o:?}");
    assert!(o[2].contains(" now, lowest "), "{o:?}");
    for n in ["orders", "users"] {
        let r = row_markup(&dom, "charts", n).unwrap();
        assert!(
            r.matches("<svg").count() == 2 && r.contains("<polyline"),
            "no charts of {n} in the browser's DOM:\n{r}"
        );
    }

    // The guide's picture (KEYSMITH_CHARTS_SCREENSHOT=path keeps it:
    // docs/book/src/operations/status-charts.png).
    let shot = match std::env::var("KEYSMITH_CHARTS_SCREENSHOT") {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => srv.dir.path().join("charts.png"),
    };
    tokio::task::spawn_blocking({
        let shot = shot.clone();
        move || {
            run_chromium(
                &bin,
                &url,
                &[
                    format!("--screenshot={}", shot.display()),
                    "--window-size=1280,820".into(),
                ],
            )
        }
    })
    .await
    .unwrap();
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
}
