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
    assert!(page.contains("serve"));

    let serve = keysmith(&["man", "serve"]);
    assert!(serve.status.success());
    let page = String::from_utf8(serve.stdout).unwrap();
    assert!(page.contains(".TH keysmith-serve 1"), "{page}");
    assert!(
        page.contains("access\\-file"),
        "serve's options are on its page"
    );

    let none = keysmith(&["man", "nope"]);
    assert_eq!(none.status.code(), Some(2));
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(err.contains("nope") && err.contains("serve"), "{err}");
    assert!(none.stdout.is_empty());
}
