//! `keysmith-bench clients`: every client's benchmark entry point against one
//! release `keysmith serve` on a temporary SQLite store (issue #51).
//!
//! Builds nothing: it runs the binary given (or `target/release/keysmith`),
//! creates a sequence per client over HTTP, runs each client's entry point
//! with `--url URL --sequence NAME --seconds S --threads N`, reads the lines
//! `<case>\t<per_second>` it prints, and prints one tab-separated table with
//! the header `client\tcase\tper_second`. A client whose toolchain (or entry
//! point) is missing is skipped with a message on stderr; a client that fails
//! is reported on stderr and the others still run.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::chart::{DURABLE, LIMIT, NOT_DURABLE, err};
use crate::http::{Conn, json_request};
use crate::rows::human;
use plotters::prelude::*;

/// A client of the project, in the order the table lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Java,
    Go,
    Typescript,
    Python,
}

impl Lang {
    /// Every client.
    pub const ALL: [Lang; 4] = [Lang::Java, Lang::Go, Lang::Typescript, Lang::Python];

    /// The client's name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Lang::Java => "java",
            Lang::Go => "go",
            Lang::Typescript => "typescript",
            Lang::Python => "python",
        }
    }

    /// The program and arguments of its entry point (before the protocol's options), run
    /// from the repository root, or why it cannot run here.
    fn command(self, root: &Path) -> Result<(PathBuf, Vec<String>), String> {
        let need = |tool: &str| -> Result<(), String> {
            match Command::new(tool)
                .arg(if tool == "go" { "version" } else { "--version" })
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
            {
                Ok(_) => Ok(()),
                Err(e) => Err(format!("no `{tool}` on PATH ({e})")),
            }
        };
        let file = |rel: &str| -> Result<String, String> {
            let p = root.join(rel);
            if p.exists() {
                Ok(rel.to_string())
            } else {
                Err(format!("no {rel} in this checkout"))
            }
        };
        match self {
            Lang::Java => {
                need("java")?;
                Ok(("bash".into(), vec![file("clients/java/bench.sh")?]))
            }
            Lang::Go => {
                need("go")?;
                Ok(("bash".into(), vec![file("clients/go/bench.sh")?]))
            }
            Lang::Typescript => {
                need("node")?;
                file("clients/typescript/dist/index.js").map_err(|e| {
                    format!("{e}: run `npm ci && npm run build` in clients/typescript first")
                })?;
                Ok(("node".into(), vec![file("clients/typescript/bench.mjs")?]))
            }
            Lang::Python => {
                let venv = root.join("clients/python/.venv/bin/python");
                let python = if venv.exists() {
                    venv
                } else {
                    need("python3")?;
                    PathBuf::from("python3")
                };
                Ok((python, vec![file("clients/python/bench.py")?]))
            }
        }
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A case of the protocol, in the order the table lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Case {
    Bare,
    Bare8,
    Next,
    Next8,
    NextN100,
    WorkerIds,
    Request,
    Livez,
}

impl Case {
    /// Every case.
    pub const ALL: [Case; 8] = [
        Case::Bare,
        Case::Bare8,
        Case::Next,
        Case::Next8,
        Case::NextN100,
        Case::WorkerIds,
        Case::Request,
        Case::Livez,
    ];

    /// The case's name, as the entry points print it.
    pub fn name(self) -> &'static str {
        match self {
            Case::Bare => "bare",
            Case::Bare8 => "bare_8",
            Case::Next => "next",
            Case::Next8 => "next_8",
            Case::NextN100 => "next_n100",
            Case::WorkerIds => "worker_ids",
            Case::Request => "request",
            Case::Livez => "livez",
        }
    }

    fn parse(s: &str) -> Option<Case> {
        Case::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// One figure of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub client: Lang,
    pub case: Case,
    pub per_second: f64,
}

/// The rows of one entry point's stdout: every non-empty line `<case>\t<per_second>`.
///
/// # Errors
/// A line that is not a known case, a tab and a finite number >= 0; a case printed twice.
pub fn parse_output(client: Lang, stdout: &str) -> anyhow::Result<Vec<Row>> {
    let mut rows: Vec<Row> = Vec::new();
    for (i, line) in stdout.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let (case, value) = line.split_once('\t').ok_or_else(|| {
            anyhow::anyhow!(
                "{client}: line {} is not `<case>\\t<per_second>`: {line:?}",
                i + 1
            )
        })?;
        let case = Case::parse(case).ok_or_else(|| {
            let known: Vec<&str> = Case::ALL.iter().map(|c| c.name()).collect();
            anyhow::anyhow!(
                "{client}: line {}: unknown case {case:?} (known: {})",
                i + 1,
                known.join(", ")
            )
        })?;
        let per_second: f64 = value
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{client}: line {}: {value:?} is not a number of operations per second",
                    i + 1
                )
            })?;
        if rows.iter().any(|r| r.case == case) {
            anyhow::bail!("{client}: case {} printed twice", case.name());
        }
        rows.push(Row {
            client,
            case,
            per_second,
        });
    }
    Ok(rows)
}

/// The tab-separated table: header `client\tcase\tper_second`, one line per row.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from("client\tcase\tper_second\n");
    for r in rows {
        out.push_str(&format!(
            "{}\t{}\t{:.0}\n",
            r.client,
            r.case.name(),
            r.per_second
        ));
    }
    out
}

/// What `keysmith-bench clients` was asked for.
pub struct Options {
    pub seconds: f64,
    pub threads: usize,
    pub only: Vec<Lang>,
    pub keysmith_bin: PathBuf,
    pub root: PathBuf,
    pub out: PathBuf,
}

/// A `keysmith serve` of this run, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_server(bin: &Path) -> anyhow::Result<Server> {
    if !bin.exists() {
        anyhow::bail!(
            "no keysmith binary at {} (build it: cargo build --release -p keysmith-cli, or give --keysmith-bin)",
            bin.display()
        );
    }
    let dir = std::env::temp_dir().join(format!("keysmith-bench-clients-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let store = format!("sqlite://{}", dir.join("bench.db").display());
    let mut cmd = Command::new(bin);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("KEYSMITH_") {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd
        .args(["--store", &store, "serve", "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", bin.display()))?;
    let stderr = child.stderr.take().expect("piped");
    let mut reader = BufReader::new(stderr);
    let mut first = String::new();
    reader.read_line(&mut first)?;
    let addr = first.find("http://127.0.0.1:").and_then(|at| {
        let rest = &first[at + "http://".len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ':'))
            .unwrap_or(rest.len());
        rest[..end].parse::<SocketAddr>().ok()
    });
    let Some(addr) = addr else {
        let _ = child.kill();
        let mut rest = String::new();
        let _ = reader.read_to_string(&mut rest);
        anyhow::bail!("keysmith serve did not start: {first}{rest}");
    };
    // drain stderr, so that the server never blocks on a full pipe
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = reader.read_to_end(&mut sink);
    });
    Ok(Server { child, addr, dir })
}

/// Runs the clients and prints the table; writes `clients.tsv` and `clients.svg` to `out`.
///
/// # Errors
/// No keysmith binary, a server that does not start, no client that ran, or files that cannot be written.
pub async fn run(o: &Options) -> anyhow::Result<()> {
    if !(o.seconds > 0.0 && o.seconds <= 600.0) {
        anyhow::bail!(
            "--seconds must be above 0 and at most 600, got {}",
            o.seconds
        );
    }
    if o.threads == 0 || o.threads > 1024 {
        anyhow::bail!("--threads must be between 1 and 1024, got {}", o.threads);
    }
    let server = start_server(&o.keysmith_bin)?;
    let url = format!("http://{}", server.addr);
    let mut rows = Vec::new();
    let langs: Vec<Lang> = if o.only.is_empty() {
        Lang::ALL.to_vec()
    } else {
        Lang::ALL
            .into_iter()
            .filter(|l| o.only.contains(l))
            .collect()
    };
    for lang in langs {
        let (program, mut args) = match lang.command(&o.root) {
            Ok(c) => c,
            Err(why) => {
                eprintln!("skipped {lang}: {why}");
                continue;
            }
        };
        let name = format!("bench-{lang}");
        let mut conn = Conn::open(server.addr).await?;
        let (status, body) = conn
            .call(&json_request(
                "POST",
                "/v1/sequences",
                &format!(r#"{{"name":"{name}"}}"#),
            ))
            .await?;
        if status != 201 {
            anyhow::bail!(
                "creating the sequence {name} answered {status}: {}",
                String::from_utf8_lossy(body)
            );
        }
        args.extend([
            "--url".to_string(),
            url.clone(),
            "--sequence".to_string(),
            name,
            "--seconds".to_string(),
            o.seconds.to_string(),
            "--threads".to_string(),
            o.threads.to_string(),
        ]);
        eprintln!("running {lang}: {} {}", program.display(), args.join(" "));
        let output = Command::new(&program)
            .args(&args)
            .current_dir(&o.root)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", program.display()))?;
        if !output.status.success() {
            eprintln!("{lang} failed ({}): its rows are left out", output.status);
            continue;
        }
        match parse_output(lang, &String::from_utf8_lossy(&output.stdout)) {
            Ok(r) => rows.extend(r),
            Err(e) => eprintln!("{e:#}; its rows are left out"),
        }
    }
    drop(server);
    if rows.is_empty() {
        anyhow::bail!("no client ran (see the messages above)");
    }
    let t = table(&rows);
    print!("{t}");
    std::fs::create_dir_all(&o.out)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", o.out.display()))?;
    let write = |file: &str, text: &str| {
        let p = o.out.join(file);
        std::fs::write(&p, text).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))
    };
    write("clients.tsv", &t)?;
    write("clients.svg", &clients_svg(&rows, o.seconds, o.threads)?)?;
    eprintln!("wrote {}/clients.tsv and clients.svg", o.out.display());
    Ok(())
}

/// `keysmith-bench clients`: a horizontal bar per client and case, operations
/// per second on a log scale; the bare loops and `/livez` (the baselines) grey.
fn clients_svg(rows: &[Row], seconds: f64, threads: usize) -> anyhow::Result<String> {
    let n = rows.len().max(1);
    let height = 80 + 22 * n as u32;
    let max = rows.iter().map(|r| r.per_second).fold(10.0f64, f64::max);
    let top = 10f64.powf(max.log10().ceil() + 0.3);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "keysmith clients: operations per second, log scale ({seconds} s per case, {threads} threads in the _8 cases, one run); grey: baselines (bare loop, /livez)"
                ),
                ("sans-serif", 15),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(200)
            .build_cartesian_2d((1f64..top).log_scale(), 0f64..n as f64)
            .map_err(err)?;
        let names: Vec<String> = rows
            .iter()
            .map(|r| format!("{}: {}", r.client, r.case.name()))
            .collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n * 2 + 1)
            .y_label_formatter(&|y| {
                let i = (n as f64 - y - 0.5).round();
                if (n as f64 - y - 0.5 - i).abs() < 0.01 && i >= 0.0 && (i as usize) < n {
                    names[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .x_label_formatter(&|x| human(*x))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(err)?;
        for (i, row) in rows.iter().enumerate() {
            let y0 = (n - 1 - i) as f64 + 0.15;
            let y1 = y0 + 0.7;
            let v = row.per_second.max(1.0);
            let color = match row.case {
                Case::Bare | Case::Bare8 | Case::Livez => LIMIT,
                Case::Request => NOT_DURABLE,
                _ => DURABLE,
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(1.0, y0), (v, y1)],
                    color.filled(),
                )))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    human(v),
                    (v * 1.08, y0 + 0.55),
                    ("sans-serif", 11),
                )))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_points_lines_become_rows_in_the_tables_shape() {
        let out = "bare\t26200000\nnext\t10500000.4\r\n\nlivez\t2000\n";
        let rows = parse_output(Lang::Python, out).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1].case, Case::Next);
        assert_eq!(rows[1].per_second, 10500000.4);
        assert_eq!(
            table(&rows),
            "client\tcase\tper_second\npython\tbare\t26200000\npython\tnext\t10500000\npython\tlivez\t2000\n"
        );
    }

    #[test]
    fn every_case_of_the_protocol_is_read() {
        let out: String = Case::ALL
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{}\t{}\n", c.name(), i + 1))
            .collect();
        let rows = parse_output(Lang::Go, &out).unwrap();
        assert_eq!(
            rows.iter().map(|r| r.case).collect::<Vec<_>>(),
            Case::ALL.to_vec()
        );
    }

    #[test]
    fn lines_out_of_the_protocol_are_errors_naming_the_client_and_line() {
        let cases = [
            ("bare 100\n", "line 1 is not"),
            ("bare\t100\nfast\t3\n", "line 2: unknown case \"fast\""),
            ("next\tmany\n", "not a number"),
            ("next\t-1\n", "not a number"),
            ("next\tNaN\n", "not a number"),
            ("next\t1\nnext\t2\n", "printed twice"),
        ];
        for (out, want) in cases {
            let e = parse_output(Lang::Java, out).unwrap_err().to_string();
            assert!(e.starts_with("java: ") && e.contains(want), "{out:?}: {e}");
        }
    }
}
