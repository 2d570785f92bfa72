//! `access hash`, `access check`: tokens and access files of `keysmith serve
//! --access-file`.

use std::io::Read;
use std::path::PathBuf;

use keysmith_server::Token;
use keysmith_server::access::{AccessFile, token_digest_hex};

use crate::Global;

/// Access file commands.
#[derive(Debug, clap::Subcommand)]
pub enum AccessCommand {
    /// Reads a token on standard input and prints its SHA-256 digest.
    ///
    /// The digest is the `token_sha256` of an access file. One trailing
    /// newline is dropped.
    /// The token is never taken as an argument, where `ps` would show it.
    Hash,
    /// Checks an access file and prints its principals and grants; exits
    /// non-zero, saying what is wrong, for a bad file.
    Check {
        /// The access file (TOML `[[principal]]` tables).
        file: PathBuf,
    },
}

/// Runs an access command.
///
/// # Errors
/// An unreadable or unusable token or file, with what to do.
pub async fn run(cmd: AccessCommand, global: &Global) -> anyhow::Result<()> {
    match cmd {
        AccessCommand::Hash => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| anyhow::anyhow!("cannot read the token from standard input: {e}"))?;
            let t = text
                .strip_suffix("\r\n")
                .or_else(|| text.strip_suffix('\n'))
                .unwrap_or(&text);
            let token = Token::new(t)
                .map_err(|e| anyhow::anyhow!("the token on standard input is not usable: {e}"))?;
            println!("{}", token_digest_hex(token.expose().as_bytes()));
        }
        AccessCommand::Check { file } => {
            let access = AccessFile::load(&file).map_err(anyhow::Error::msg)?;
            if global.json {
                let principals: Vec<_> = access
                    .principals()
                    .iter()
                    .map(|p| {
                        serde_json::json!({
                            "name": p.name,
                            "grants": p.grants.iter().map(|g| serde_json::json!({
                                "names": g.names.to_string(),
                                "actions": g.actions().iter().map(|a| a.as_str()).collect::<Vec<_>>(),
                            })).collect::<Vec<_>>(),
                            "rate": p.rate.map(|r| r.per_second.get()),
                            "burst": p.rate.map(|r| r.burst.get()),
                            "max_sequences": p.max_sequences,
                            "max_pools": p.max_pools,
                        })
                    })
                    .collect();
                println!("{}", serde_json::json!({ "principals": principals }));
            } else {
                for p in access.principals() {
                    let grants: Vec<String> = p
                        .grants
                        .iter()
                        .map(|g| {
                            let actions: Vec<&str> =
                                g.actions().iter().map(|a| a.as_str()).collect();
                            format!("{} on {}", actions.join("+"), g.names)
                        })
                        .collect();
                    let grants = if grants.is_empty() {
                        "no grants".to_owned()
                    } else {
                        grants.join(", ")
                    };
                    println!("{}: {grants}", p.name);
                }
                eprintln!(
                    "{}: {} principal(s), ok",
                    file.display(),
                    access.principals().len()
                );
            }
        }
    }
    Ok(())
}
