//! `ticket take|commit|release`: gap-free numbers (sequences created with
//! `--gapless`).

use std::time::Duration;

use keysmith::numbers::{DEFAULT_TICKET_TTL, Formatted, Numbers};

use crate::Global;

/// Gap-free numbers: take one with a ticket, then commit or release it.
#[derive(Debug, clap::Subcommand)]
pub enum TicketCommand {
    /// Takes a number: the lowest released or expired one, else the next new
    /// one.
    ///
    /// Prints `VALUE TICKET` on one line; keep the ticket to commit or
    /// release the number.
    Take {
        /// The sequence (created with --gapless).
        name: String,
        /// Seconds the ticket lives, by the store's clock: after that, if the
        /// holder neither committed nor released it, the number goes to the
        /// next taker.
        #[arg(long, value_name = "SECS", default_value_t = DEFAULT_TICKET_TTL.as_secs())]
        ttl: u64,
    },
    /// Makes a taken number final.
    ///
    /// Refused, changing nothing, when the ticket
    /// no longer holds it (committed or released already, or expired and
    /// taken by another). Prints the number.
    Commit {
        /// The sequence.
        name: String,
        /// The ticket `ticket take` printed.
        ticket: String,
    },
    /// Frees a taken number: it is the next one taken. Refused as commit.
    /// Prints the number.
    Release {
        /// The sequence.
        name: String,
        /// The ticket `ticket take` printed.
        ticket: String,
    },
}

/// The number as JSON: its text for a formatted sequence, else the integer.
fn json_value(h: &Numbers, f: &Formatted) -> serde_json::Value {
    if h.is_formatted() {
        serde_json::Value::String(f.text.clone())
    } else {
        serde_json::Value::from(f.number.n)
    }
}

/// Runs a ticket command.
pub async fn run(cmd: TicketCommand, global: &Global) -> anyhow::Result<()> {
    if let Some(client) = global.client()? {
        return remote(cmd, &client, global.json).await;
    }
    let store = global.open_existing().await?;
    match cmd {
        TicketCommand::Take { name, ttl } => {
            let h = Numbers::open(store, &name).await?;
            let t = h.take(Duration::from_secs(ttl)).await?;
            if global.json {
                let f = Formatted {
                    number: t.number,
                    text: t.text.clone(),
                };
                println!(
                    "{}",
                    serde_json::json!({
                        "value": json_value(&h, &f),
                        "ticket": t.ticket.to_string(),
                        "period": t.number.period,
                        "n": t.number.n,
                    })
                );
            } else {
                println!("{} {}", t.text, t.ticket);
            }
        }
        TicketCommand::Commit { name, ticket } => {
            let h = Numbers::open(store, &name).await?;
            let f = h.commit(&ticket).await?;
            if global.json {
                println!("{}", serde_json::json!({ "committed": json_value(&h, &f) }));
            } else {
                println!("{}", f.text);
            }
        }
        TicketCommand::Release { name, ticket } => {
            let h = Numbers::open(store, &name).await?;
            let f = h.release(&ticket).await?;
            if global.json {
                println!("{}", serde_json::json!({ "released": json_value(&h, &f) }));
            } else {
                println!("{}", f.text);
            }
        }
    }
    Ok(())
}

/// A number as `ticket` prints it: a formatted number's text, else the integer.
fn text_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A ticket command against a keysmith server: the same output.
async fn remote(
    cmd: TicketCommand,
    client: &keysmith_client::Client,
    json: bool,
) -> anyhow::Result<()> {
    match cmd {
        TicketCommand::Take { name, ttl } => {
            let t = client.take_ticket(&name, Some(ttl)).await?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({
                        "value": t.value,
                        "ticket": t.ticket,
                        "period": t.period,
                        "n": t.n,
                    })
                );
            } else {
                println!("{} {}", text_of(&t.value), t.ticket);
            }
        }
        TicketCommand::Commit { name, ticket } => {
            let v = client.commit_ticket(&name, &ticket).await?;
            let n = v.get("committed").cloned().unwrap_or_default();
            if json {
                println!("{}", serde_json::json!({ "committed": n }));
            } else {
                println!("{}", text_of(&n));
            }
        }
        TicketCommand::Release { name, ticket } => {
            let v = client.release_ticket(&name, &ticket).await?;
            let n = v.get("released").cloned().unwrap_or_default();
            if json {
                println!("{}", serde_json::json!({ "released": n }));
            } else {
                println!("{}", text_of(&n));
            }
        }
    }
    Ok(())
}
