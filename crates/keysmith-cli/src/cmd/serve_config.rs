//! `keysmith serve --config FILE`: a TOML file of `serve`'s command-line options.
//!
//! Each key is the long name of an option of `keysmith serve` (`listen`,
//! `request-timeout-ms`; `request_timeout_ms` is read the same), plus the
//! global `store`. The file is turned into the options it stands for and
//! parsed by the same parser as the command line, so every option is
//! accepted, with the same checks and messages, and none is parsed twice.
//! An option given on the command line wins over the file; the file wins
//! over the environment (`$KEYSMITH_STORE`, `$KEYSMITH_TOKEN`) and the
//! defaults. Relative paths (`token-file`, `counter-dir`, ...) are taken
//! from the file's directory.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{Context, bail};

/// Keys a file may not set: the file itself, and clap's own.
const NOT_IN_FILE: [&str; 3] = ["config", "help", "version"];

/// The options `file` stands for, as `--name=value` arguments for `serve`,
/// leaving out those `on_command_line` says were given there.
///
/// # Errors
/// The file cannot be read or is not TOML; a key is not an option of
/// `serve` (the message suggests the nearest); a value has the wrong type
/// (a flag takes `true`/`false`, an option text or a whole number).
pub fn options_from_file(
    file: &Path,
    serve: &clap::Command,
    on_command_line: impl Fn(&str) -> bool,
) -> anyhow::Result<Vec<OsString>> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read the config file {}", file.display()))?;
    let table: toml::Table = toml::from_str(&text)
        .with_context(|| format!("the config file {} is not valid TOML", file.display()))?;
    let options: Vec<&clap::Arg> = serve
        .get_arguments()
        .filter(|a| a.get_long().is_some() && !NOT_IN_FILE.contains(&a.get_id().as_str()))
        .collect();
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut args = Vec::new();
    for (key, value) in &table {
        let long = key.replace('_', "-");
        let Some(arg) = options.iter().find(|a| a.get_long() == Some(long.as_str())) else {
            bail!(
                "the config file {} has `{key}`, which is not an option of `keysmith serve`{}; \
                 its keys are the long options that `keysmith serve --help` lists",
                file.display(),
                nearest(&long, &options)
                    .map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default(),
            );
        };
        if on_command_line(arg.get_id().as_str()) {
            continue;
        }
        let is_flag = matches!(
            arg.get_action(),
            clap::ArgAction::SetTrue | clap::ArgAction::SetFalse
        );
        // A repeatable option takes a list: one option per item.
        let repeatable = matches!(arg.get_action(), clap::ArgAction::Append);
        let items: Vec<&toml::Value> = match value {
            toml::Value::Array(items) if repeatable => items.iter().collect(),
            other => vec![other],
        };
        for value in items {
            let text = match (value, is_flag) {
                (toml::Value::Boolean(true), true) => {
                    args.push(OsString::from(format!("--{long}")));
                    continue;
                }
                (toml::Value::Boolean(false), true) => continue,
                (toml::Value::String(s), false) => s.clone(),
                (toml::Value::Integer(i), false) => i.to_string(),
                (other, true) => bail!(
                    "`{key}` in the config file {} is a flag: write `{key} = true` or `false`, not {}",
                    file.display(),
                    describe(other)
                ),
                (other, false) => bail!(
                    "`{key}` in the config file {} takes text or a whole number, not {}",
                    file.display(),
                    describe(other)
                ),
            };
            let takes_path = arg
                .get_value_names()
                .is_some_and(|n| n.iter().any(|n| n == "PATH" || n == "DIR"));
            let mut option = OsString::from(format!("--{long}="));
            if takes_path && Path::new(&text).is_relative() {
                option.push(dir.join(&text));
            } else {
                option.push(&text);
            }
            args.push(option);
        }
    }
    Ok(args)
}

/// The option name closest to a mistyped `key`, if one is close.
fn nearest<'a>(key: &str, options: &[&'a clap::Arg]) -> Option<&'a str> {
    options
        .iter()
        .filter_map(|a| a.get_long())
        .map(|name| (strsim::damerau_levenshtein(key, name), name))
        .filter(|(d, name)| *d <= 2.max(name.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| name)
}

/// A TOML value's kind, for messages.
fn describe(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("the text {s:?}"),
        toml::Value::Integer(i) => format!("the number {i}"),
        toml::Value::Float(f) => format!("the fraction {f}"),
        toml::Value::Boolean(b) => format!("`{b}`"),
        toml::Value::Datetime(d) => format!("the date {d}"),
        toml::Value::Array(_) => "a list".to_owned(),
        toml::Value::Table(_) => "a table".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn serve() -> clap::Command {
        let mut cli = crate::Cli::command();
        cli.build();
        cli.find_subcommand("serve").unwrap().clone()
    }

    fn file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keysmith.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn every_option_of_serve_is_a_key() {
        let serve = serve();
        let mut text = String::new();
        let mut expected = 0;
        for arg in serve.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if NOT_IN_FILE.contains(&arg.get_id().as_str()) {
                continue;
            }
            expected += 1;
            let is_flag = matches!(arg.get_action(), clap::ArgAction::SetTrue);
            text += &if is_flag {
                format!("{long} = true\n")
            } else {
                format!("{long} = \"x\"\n")
            };
        }
        assert!(expected > 20, "serve has {expected} options");
        assert!(text.contains("store ="), "the global --store is a key too");
        let (_d, path) = file(&text);
        let args = options_from_file(&path, &serve, |_| false).unwrap();
        assert_eq!(args.len(), expected);
    }

    #[test]
    fn the_command_line_wins_and_paths_are_relative_to_the_file() {
        let (dir, path) = file("max_count = 5\ntoken-file = \"token\"\nfixed-blocks = false\n");
        let args = options_from_file(&path, &serve(), |id| id == "max_count").unwrap();
        assert_eq!(
            args,
            vec![OsString::from(format!(
                "--token-file={}",
                dir.path().join("token").display()
            ))]
        );
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let cases = [
            ("lsten = \"127.0.0.1:1\"", "did you mean `listen`"),
            ("token = \"secret\"", "not an option"),
            ("fixed-blocks = \"yes\"", "is a flag"),
            ("max-count = 1.5", "whole number"),
            ("max-count = [1]", "a list"),
            ("listen = ", "not valid TOML"),
            ("config = \"other.toml\"", "not an option"),
        ];
        for (text, says) in cases {
            let (_d, path) = file(text);
            let e = options_from_file(&path, &serve(), |_| false).unwrap_err();
            let msg = format!("{e:#}");
            assert!(msg.contains(says), "{text}: {msg}");
        }
        let e =
            options_from_file(Path::new("/nonexistent/k.toml"), &serve(), |_| false).unwrap_err();
        assert!(format!("{e:#}").contains("cannot read the config file /nonexistent/k.toml"));
    }
}
