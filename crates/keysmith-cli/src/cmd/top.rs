//! `keysmith top`: the busiest names, their rates, runways and leader
//! leases, redrawn every second on the terminal. The rows come from the
//! library (`keysmith::top::snapshot` on a store, `Client::top` against a
//! server); this module only draws them.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keysmith::top::{self, DEFAULT_TOP_NAMES, NameActivity, SortKey};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table};

use crate::Global;

/// The shortest refresh interval accepted.
const MIN_INTERVAL_MS: u64 = 100;

/// `keysmith top`'s arguments.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// The column to sort by first: rate (busiest first), name, or runway
    /// (shortest first). While it runs, the keys r, n and w change it.
    #[arg(long, default_value = "rate", value_parser = parse_sort)]
    sort: SortKey,
    /// Print one snapshot as text (with --json, a JSON array) and exit,
    /// instead of drawing on the terminal: for scripts and pipes.
    #[arg(long)]
    once: bool,
    /// On a store: how many sequences and pools each to read in full
    /// (rate, runway, lease; a few store reads each); those past it are
    /// listed without a rate.
    #[arg(long, default_value_t = DEFAULT_TOP_NAMES, value_name = "N")]
    limit: usize,
    /// How often to read again, in milliseconds (at least 100).
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    interval_ms: u64,
}

/// `--sort`'s value, as the library parses it.
fn parse_sort(s: &str) -> Result<SortKey, String> {
    s.parse().map_err(|e: keysmith::Error| e.to_string())
}

/// Where the rows come from.
enum Source {
    Store(Arc<dyn keysmith::store::Store>, usize),
    Server(keysmith_client::Client),
}

impl Source {
    async fn rows(&self, key: SortKey) -> anyhow::Result<Vec<NameActivity>> {
        Ok(match self {
            Source::Store(store, limit) => top::snapshot(&**store, *limit, key).await?,
            Source::Server(client) => client.top(key).await?,
        })
    }
}

/// Runs `keysmith top`.
///
/// # Errors
/// A [`super::UsageError`] for a bad interval, or without a terminal and
/// without `--once`; the store's or the server's errors on the first read
/// (later ones are shown on the screen, and it reads again).
pub async fn run(args: TopArgs, global: &Global) -> anyhow::Result<()> {
    if args.interval_ms < MIN_INTERVAL_MS {
        return Err(super::UsageError(format!(
            "--interval-ms must be at least {MIN_INTERVAL_MS}, got {}",
            args.interval_ms
        ))
        .into());
    }
    let terminal = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    if !args.once && !terminal {
        return Err(super::UsageError(
            "keysmith top draws on a terminal, and its input or output is not one; give --once to \
             print one snapshot as text"
                .into(),
        )
        .into());
    }
    let source = match global.client()? {
        Some(client) => Source::Server(client),
        None => Source::Store(global.open_existing().await?, args.limit),
    };
    let rows = source.rows(args.sort).await?;
    if args.once {
        return print_once(&rows, global.json);
    }
    live(
        &source,
        rows,
        args.sort,
        Duration::from_millis(args.interval_ms),
    )
    .await
}

/// One snapshot as text: a header, then a line per name, tab-separated.
fn print_once(rows: &[NameActivity], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(rows)?);
        return Ok(());
    }
    println!("NAME\tKIND\tRATE\tRUNWAY\tLEFT\tLEASE");
    for r in rows {
        let [name, kind, rate, runway, left, lease] = columns(r);
        println!("{name}\t{kind}\t{rate}\t{runway}\t{left}\t{lease}");
    }
    Ok(())
}

/// A row's cells, as both views show them.
fn columns(r: &NameActivity) -> [String; 6] {
    [
        r.name.clone(),
        r.kind.as_str().to_owned(),
        r.rate_per_second
            .map_or_else(|| "-".to_owned(), |v| format!("{v:.1}/s")),
        super::words::runway_words(r.runway_seconds),
        r.remaining
            .map_or_else(|| "-".to_owned(), |v| v.to_string()),
        lease_words(r.lease.as_ref()),
    ]
}

/// A leader lease in words: who holds it and for how long, or that no one
/// does; "-" for a name without one.
fn lease_words(lease: Option<&top::LeaderLease>) -> String {
    let Some(l) = lease else {
        return "-".to_owned();
    };
    match l.expires_in_ms {
        Some(ms) => {
            let who = l
                .holder
                .as_deref()
                .map(|h| {
                    keysmith::sequence::leader::advertised_address(h)
                        .unwrap_or(h)
                        .to_owned()
                })
                .unwrap_or_else(|| "held".to_owned());
            format!("term {} {who} ({:.1} s left)", l.term, ms as f64 / 1000.0)
        }
        None if l.term == 0 => "no leader yet".to_owned(),
        None => format!("no leader (last term {})", l.term),
    }
}

/// Restores the terminal however the view ends (an error, a panic has
/// ratatui's own hook).
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// What a key does.
enum Action {
    Quit,
    Sort(SortKey),
    Nothing,
}

fn action(code: KeyCode, modifiers: KeyModifiers) -> Action {
    match code {
        KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => Action::Quit,
        KeyCode::Char('q') | KeyCode::Esc => Action::Quit,
        KeyCode::Char('r') => Action::Sort(SortKey::Rate),
        KeyCode::Char('n') => Action::Sort(SortKey::Name),
        KeyCode::Char('w') => Action::Sort(SortKey::Runway),
        _ => Action::Nothing,
    }
}

/// The live view: reads every `interval`, redraws on every read, key and
/// resize, until `q`.
async fn live(
    source: &Source,
    mut rows: Vec<NameActivity>,
    mut key: SortKey,
    interval: Duration,
) -> anyhow::Result<()> {
    let mut terminal =
        ratatui::try_init().map_err(|e| anyhow::anyhow!("cannot draw on this terminal: {e}"))?;
    let _restore = Restore;
    let mut error: Option<String> = None;
    loop {
        let deadline = Instant::now() + interval;
        loop {
            terminal.draw(|f| draw(f, &rows, key, error.as_deref()))?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // Waiting for a key blocks this thread: let the runtime know.
            let ev = tokio::task::block_in_place(|| -> std::io::Result<Option<Event>> {
                if event::poll(left)? {
                    event::read().map(Some)
                } else {
                    Ok(None)
                }
            })?;
            match ev {
                Some(Event::Key(k)) if k.kind == KeyEventKind::Press => {
                    match action(k.code, k.modifiers) {
                        Action::Quit => return Ok(()),
                        Action::Sort(k) => {
                            key = k;
                            top::sort(&mut rows, key);
                        }
                        Action::Nothing => {}
                    }
                }
                Some(_) => {}
                None => break,
            }
        }
        match source.rows(key).await {
            Ok(r) => {
                rows = r;
                error = None;
            }
            // Kept on the screen with the last rows; read again next time.
            Err(e) => error = Some(format!("{e:#}")),
        }
    }
}

fn draw(f: &mut ratatui::Frame, rows: &[NameActivity], key: SortKey, error: Option<&str>) {
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(
        Paragraph::new(Line::from(format!(
            "keysmith top: {} names, sorted by {}   keys: r rate, n name, w runway, q quit",
            rows.len(),
            key.as_str()
        ))),
        head,
    );
    let titles = ["NAME", "KIND", "RATE", "RUNWAY", "LEFT", "LEASE"];
    let sorted = match key {
        SortKey::Name => 0,
        SortKey::Rate => 2,
        SortKey::Runway => 3,
    };
    let header = Row::new(titles.iter().enumerate().map(|(i, t)| {
        let cell = Cell::from(*t);
        if i == sorted {
            cell.style(Style::new().add_modifier(Modifier::REVERSED))
        } else {
            cell
        }
    }))
    .style(Style::new().add_modifier(Modifier::BOLD));
    let table = Table::new(
        rows.iter().map(|r| Row::new(columns(r))),
        [
            Constraint::Min(16),
            Constraint::Length(8),
            Constraint::Length(12),
            Constraint::Length(12),
            Constraint::Length(20),
            Constraint::Length(36),
        ],
    )
    .header(header);
    f.render_widget(table, body);
    if let Some(e) = error {
        f.render_widget(
            Paragraph::new(Line::from(format!("error (reading again): {e}"))),
            foot,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keysmith::top::{LeaderLease, NameKind};

    #[test]
    fn the_keys_sort_and_quit() {
        let none = KeyModifiers::NONE;
        assert!(matches!(action(KeyCode::Char('q'), none), Action::Quit));
        assert!(matches!(
            action(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Action::Quit
        ));
        assert!(matches!(action(KeyCode::Char('c'), none), Action::Nothing));
        for (c, k) in [
            ('r', SortKey::Rate),
            ('n', SortKey::Name),
            ('w', SortKey::Runway),
        ] {
            assert!(matches!(action(KeyCode::Char(c), none), Action::Sort(s) if s == k));
        }
    }

    #[test]
    fn a_row_is_said_in_words() {
        let r = NameActivity {
            name: "orders".into(),
            kind: NameKind::Sequence,
            rate_per_second: Some(12.25),
            runway_seconds: Some(9000.0),
            remaining: Some(40),
            lease: Some(LeaderLease {
                holder: Some("http://10.0.0.5:7878 pid 42".into()),
                term: 7,
                expires_in_ms: Some(2500),
            }),
        };
        assert_eq!(
            columns(&r),
            [
                "orders",
                "sequence",
                "12.2/s",
                "2.5 hours",
                "40",
                "term 7 http://10.0.0.5:7878 (2.5 s left)"
            ]
        );
        let lost = LeaderLease {
            holder: None,
            term: 7,
            expires_in_ms: None,
        };
        assert_eq!(lease_words(Some(&lost)), "no leader (last term 7)");
        assert_eq!(lease_words(None), "-");
        let never = LeaderLease { term: 0, ..lost };
        assert_eq!(lease_words(Some(&never)), "no leader yet");
    }
}
