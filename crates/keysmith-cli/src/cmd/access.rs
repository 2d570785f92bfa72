//! `access hash`, `access check`, `access new`: tokens and access files of
//! `keysmith serve --access-file`.

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
        /// The server's client CA bundle (`keysmith serve --client-ca`), to
        /// check the principals known by a client certificate against it.
        #[arg(long, value_name = "PEM")]
        client_ca: Option<PathBuf>,
    },
    /// Makes a new random token (256 bits) for a principal: prints the token
    /// and the `[[principal]]` entry of the access file, which holds only its
    /// digest.
    ///
    /// The token goes to standard output (or, with --out, to a new file only
    /// this user may read); nothing else keeps it.
    New {
        /// The principal's name.
        name: String,
        /// Write the token to this new file (mode 600) instead of standard
        /// output; it is the --token-file of the principal's clients.
        #[arg(long, value_name = "PATH")]
        out: Option<PathBuf>,
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
        AccessCommand::New { name, out } => new_principal(&name, out.as_deref(), global)?,
        AccessCommand::Check { file, client_ca } => {
            let access = AccessFile::load(&file).map_err(anyhow::Error::msg)?;
            let mut warnings = access.warnings();
            match &client_ca {
                Some(pem) => {
                    let cas = keysmith_server::tls::ca_subjects(pem)?;
                    access
                        .check_client_ca(Some(&cas))
                        .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
                }
                None if access.has_cert_principals() => warnings.push(
                    "principals known by a client certificate need a server started with --client-ca; \
                     give `--client-ca PEM` (that bundle) to check them against it"
                        .to_owned(),
                ),
                None => {}
            }
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
                            "shard_key_scope": p.shard_key_scope,
                        })
                    })
                    .collect();
                println!(
                    "{}",
                    serde_json::json!({ "principals": principals, "warnings": warnings })
                );
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
                for w in &warnings {
                    eprintln!("warning: {w}");
                }
                eprintln!(
                    "{}: {} principal(s), ok{}",
                    file.display(),
                    access.principals().len(),
                    match warnings.len() {
                        0 => String::new(),
                        n => format!(", {n} warning(s)"),
                    }
                );
            }
        }
    }
    Ok(())
}

/// `access new NAME`: a random 256-bit token, hex, and its access file entry.
fn new_principal(name: &str, out: Option<&std::path::Path>, global: &Global) -> anyhow::Result<()> {
    if name.trim().is_empty() || name.chars().any(char::is_control) {
        anyhow::bail!("the principal's name must be a non-empty name without control characters");
    }
    let bytes: [u8; 32] = rand::random();
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let digest = token_digest_hex(token.as_bytes());
    // A TOML string of the name, quoted and escaped.
    let quoted = serde_json::to_string(name)?; // a JSON string is a TOML basic string
    let entry = format!(
        "[[principal]]\nname = {quoted}\ntoken_sha256 = \"{digest}\"\ngrants = []  # e.g. {{ names = \"{}/*\", actions = [\"use\", \"read\"] }}\n",
        name.replace(['"', '\\'], "")
    );
    // The entry, checked as the server would read it (a reserved name is
    // refused here, not at the next reload).
    AccessFile::parse(&entry).map_err(anyhow::Error::msg)?;
    if let Some(path) = out {
        write_new_secret(path, &token)?;
    }
    if global.json {
        let mut v = serde_json::json!({ "name": name, "token_sha256": digest, "entry": entry });
        if out.is_none() {
            v["token"] = serde_json::Value::String(token);
        }
        println!("{v}");
    } else {
        if out.is_none() {
            println!("{token}");
            println!();
        }
        print!("{entry}");
    }
    match out {
        Some(path) => eprintln!(
            "the token is in {} (mode 600), and nowhere else: give it to the principal's clients as their --token-file; \
             add the entry to the access file (it holds only the digest) and reload the server (SIGHUP)",
            path.display()
        ),
        None => eprintln!(
            "the first line is the token, shown once and kept nowhere: store it where only the principal's clients read it \
             (a file of mode 600 for --token-file, or a secret store), never in the access file, a command line or a URL; \
             add the entry to the access file (it holds only the digest) and reload the server (SIGHUP)"
        ),
    }
    Ok(())
}

/// Writes `secret` and a newline to a new file only this user may read.
fn write_new_secret(path: &std::path::Path, secret: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut f = options.open(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot create the token file {}: {e} (an existing file is never overwritten; pick a new path)",
            path.display()
        )
    })?;
    writeln!(f, "{secret}")
        .map_err(|e| anyhow::anyhow!("cannot write the token file {}: {e}", path.display()))?;
    Ok(())
}
