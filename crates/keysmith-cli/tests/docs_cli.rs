//! `keysmith completions` and `keysmith man`: generated from the command
//! definition, so they name every subcommand.

use std::process::Command;

fn keysmith(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_keysmith"))
        .args(args)
        .output()
        .expect("run keysmith")
}

#[test]
fn completions_name_the_subcommands_in_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = keysmith(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8(out.stdout).unwrap();
        for sub in ["create", "next", "serve", "pool", "shard-key"] {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
    }
}

#[test]
fn a_shell_it_does_not_know_is_a_usage_error() {
    let out = keysmith(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"));
}

#[test]
fn man_pages_for_the_command_and_each_subcommand() {
    let top = keysmith(&["man"]);
    assert!(top.status.success());
    let page = String::from_utf8(top.stdout).unwrap();
    assert!(page.contains(".TH keysmith 1"), "{page}");
    // The title line's date parses (YYYY-MM-DD) and its source names the
    // version: `.TH keysmith 1 2026-12-02 "keysmith 0.1.0"`.
    let th = page.lines().find(|l| l.starts_with(".TH ")).unwrap();
    let date = th
        .split_whitespace()
        .nth(3)
        .unwrap_or_default()
        .trim_matches('"');
    assert!(
        date.len() == 10
            && date.bytes().enumerate().all(|(i, b)| if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }),
        "{th}"
    );
    assert!(
        th.contains(concat!("\"keysmith ", env!("CARGO_PKG_VERSION"), "\"")),
        "{th}"
    );
    assert!(page.contains("serve"));

    let serve = keysmith(&["man", "serve"]);
    assert!(serve.status.success());
    let page = String::from_utf8(serve.stdout).unwrap();
    assert!(page.contains(".TH keysmith-serve 1"), "{page}");
    assert!(
        page.contains("access\\-file"),
        "serve's options are on its page"
    );
    // Its options with possible values come with a paragraph space, not the
    // `.br`, blank line, `.br` that `mandoc -T lint` warns of.
    assert!(page.contains("Possible values"), "{page}");
    assert!(!page.contains("\n.br\n\n.br\n"), "{page}");

    let none = keysmith(&["man", "nope"]);
    assert_eq!(none.status.code(), Some(2));
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(err.contains("nope") && err.contains("serve"), "{err}");
    assert!(none.stdout.is_empty());
}

/// The subcommands a `--help` output lists under "Commands:", but `help`.
fn listed_subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn create_help_shows_the_format_placeholders_literally() {
    // clap turns a help text's `{n}` into a line break; the template's
    // example must survive it, on one line.
    let out = keysmith(&["create", "--help"]);
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    let line = help
        .lines()
        .find(|l| l.contains("--format <TEMPLATE>"))
        .expect("create --help lists --format");
    assert!(
        line.contains("literal text with {n} (or {n:04}, zero-padded)")
            && line.contains("Default with --period: {period}-{n}"),
        "{line}"
    );
    assert!(
        !help.contains('\u{1b}'),
        "no escape codes on a pipe: {help:?}"
    );
    // And the man page.
    let page = String::from_utf8(keysmith(&["man", "create"]).stdout).unwrap();
    assert!(page.contains("literal text with {n}"), "{page}");
}

#[test]
fn every_subcommand_help_renders() {
    let top = keysmith(&["--help"]);
    assert!(top.status.success(), "{top:?}");
    let mut queue: Vec<Vec<String>> = listed_subcommands(&String::from_utf8(top.stdout).unwrap())
        .into_iter()
        .map(|s| vec![s])
        .collect();
    assert!(queue.len() > 20, "{queue:?}");
    let mut seen = 0;
    while let Some(path) = queue.pop() {
        seen += 1;
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = keysmith(&args);
        let shown = path.join(" ");
        assert!(out.status.success(), "keysmith {shown} --help: {out:?}");
        assert!(out.stderr.is_empty(), "keysmith {shown} --help: {out:?}");
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(
            help.contains(&format!("Usage: keysmith {shown}")),
            "keysmith {shown} --help: {help}"
        );
        // The first line says what the command does.
        let about = help.lines().next().unwrap_or_default();
        assert!(
            !about.is_empty() && !about.starts_with("Usage"),
            "keysmith {shown} --help has no description: {help}"
        );
        // `keysmith help PATH` prints the same.
        let mut via_help = vec!["help"];
        via_help.extend(path.iter().map(String::as_str));
        let again = keysmith(&via_help);
        assert!(again.status.success(), "keysmith help {shown}: {again:?}");
        assert_eq!(
            String::from_utf8(again.stdout).unwrap(),
            help,
            "keysmith help {shown}"
        );
        for sub in listed_subcommands(&help) {
            let mut deeper = path.clone();
            deeper.push(sub);
            queue.push(deeper);
        }
    }
    assert!(seen >= 50, "only {seen} commands walked");
}
