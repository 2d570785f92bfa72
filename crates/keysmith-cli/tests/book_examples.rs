//! The user guide's examples (`docs/book/src`): every shell example is run
//! here with the real `keysmith` binary, or marked as not run, and every Rust
//! example is marked `ignore` (the one in Getting started and the README is
//! `crates/keysmith/examples/quickstart.rs`'s, which `cargo test` runs: a test
//! here checks that they show it as it is).
//!
//! A ` ```sh ` block runs with `bash -e -o pipefail`, the `keysmith` binary
//! first on `PATH`, in a new directory per chapter whose store
//! (`$KEYSMITH_STORE`) is a new SQLite file there; a chapter's blocks run in
//! order, so one can use what an earlier one made. A ` ```text,output ` block
//! right after it is exactly what it must print on stdout. ` ```sh,norun `
//! marks a block that cannot run there (a server, another store, a
//! placeholder such as NAME).

use std::path::{Path, PathBuf};
use std::process::Command;

/// One fenced code block of a chapter.
#[derive(Debug)]
struct Block {
    /// The file and line of its opening fence, for messages.
    at: String,
    /// The language: the first word of the info string.
    lang: String,
    /// The other words of the info string (`norun`, `ignore`, `output`).
    attrs: Vec<String>,
    /// Its text, the fence's indentation taken off each line.
    text: String,
}

fn book_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/book/src")
}

/// Every `.md` file under `dir`, sorted.
fn chapters(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The fenced blocks of a Markdown file (backtick fences, indented or not).
fn blocks(path: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    let mut open: Option<(usize, String, Block)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let mut words = info.split([',', ' ']).filter(|w| !w.is_empty());
                    let lang = words.next().unwrap_or("").to_string();
                    let attrs = words.map(str::to_string).collect();
                    let block = Block {
                        at: format!("{}:{}", path.display(), i + 1),
                        lang,
                        attrs,
                        text: String::new(),
                    };
                    open = Some((indent, " ".repeat(indent), block));
                }
            }
            Some((_, prefix, block)) => {
                if trimmed == "```" {
                    out.push(open.take().unwrap().2);
                } else {
                    block
                        .text
                        .push_str(line.strip_prefix(prefix.as_str()).unwrap_or(line));
                    block.text.push('\n');
                }
            }
        }
    }
    assert!(
        open.is_none(),
        "{}: a code block is not closed",
        path.display()
    );
    out
}

fn is_shell(lang: &str) -> bool {
    matches!(lang, "sh" | "bash" | "shell" | "console")
}

#[test]
fn every_shell_and_rust_example_is_run_or_marked_not_run() {
    let mut problems = Vec::new();
    let mut run = 0;
    for chapter in chapters(&book_src()) {
        let blocks = blocks(&chapter);
        for (i, b) in blocks.iter().enumerate() {
            if is_shell(&b.lang) {
                if b.lang != "sh" {
                    problems.push(format!("{}: write ```sh, not ```{}", b.at, b.lang));
                }
                match b.attrs.as_slice() {
                    [] => run += 1,
                    [a] if a == "norun" => {}
                    other => problems.push(format!(
                        "{}: a shell block takes no attribute (run) or `norun`, not {other:?}",
                        b.at
                    )),
                }
            } else if b.lang == "rust" && !b.attrs.iter().any(|a| a == "ignore") {
                problems.push(format!(
                    "{}: mark a Rust example ```rust,ignore (and include it from a tested file)",
                    b.at
                ));
            }
            let first = b.text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let looks_like_shell = ["$ ", "keysmith ", "cargo ", "curl ", "sudo "]
                .iter()
                .any(|p| first.starts_with(p));
            let is_reference = chapter.ends_with("cli.md") && first.starts_with("keysmith [");
            if matches!(b.lang.as_str(), "text" | "")
                && !b.attrs.iter().any(|a| a == "output")
                && looks_like_shell
                && !is_reference
            {
                problems.push(format!(
                    "{}: a shell example in a ```{} block: write ```sh (run) or ```sh,norun",
                    b.at, b.lang
                ));
            }
            if b.attrs.iter().any(|a| a == "output") {
                let after_run =
                    i > 0 && is_shell(&blocks[i - 1].lang) && blocks[i - 1].attrs.is_empty();
                if !after_run {
                    problems.push(format!(
                        "{}: an output block must follow a run ```sh block",
                        b.at
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        run >= 5,
        "the guide runs its getting-started examples: {run} run blocks"
    );
}

#[test]
fn the_guides_shell_examples_print_what_it_shows() {
    let keysmith = PathBuf::from(env!("CARGO_BIN_EXE_keysmith"));
    let bin_dir = keysmith.parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for chapter in chapters(&book_src()) {
        let blocks = blocks(&chapter);
        if !blocks.iter().any(|b| b.lang == "sh" && b.attrs.is_empty()) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        for (i, b) in blocks.iter().enumerate() {
            if b.lang != "sh" || !b.attrs.is_empty() {
                continue;
            }
            let out = Command::new("bash")
                .args(["-e", "-o", "pipefail", "-c", &b.text])
                .current_dir(dir.path())
                .env("PATH", &path)
                .env("HOME", &home)
                .env("XDG_DATA_HOME", home.join("data"))
                .env("KEYSMITH_COUNTER_DIR", home.join("counter"))
                .env(
                    "KEYSMITH_STORE",
                    format!("sqlite://{}", dir.path().join("keysmith.db").display()),
                )
                .env_remove("KEYSMITH_TOKEN")
                .output()
                .expect("run bash");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}: the example failed ({}):\n{}\nstdout:\n{stdout}\nstderr:\n{}",
                b.at,
                out.status,
                b.text,
                String::from_utf8_lossy(&out.stderr)
            );
            if let Some(expected) = blocks
                .get(i + 1)
                .filter(|n| n.attrs.iter().any(|a| a == "output"))
            {
                assert_eq!(
                    stdout, expected.text,
                    "{}: the example printed something else than {} shows",
                    b.at, expected.at
                );
            }
            ran += 1;
        }
    }
    assert!(ran >= 5, "the guide's runnable examples ran: {ran}");
}

/// The `keysmith` command lines of a shell block (where `keysmith` starts a
/// command, not where it is an argument: `cargo run -p keysmith`): continuation lines joined,
/// each command cut at a pipe, `;`, `&&`, `||`, a redirection or a comment,
/// placeholders' brackets taken off (`[--max N]` is `--max N`).
fn keysmith_commands(text: &str) -> Vec<Vec<String>> {
    let joined = text.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        let words: Vec<String> = line
            .split_whitespace()
            .map(|w| w.trim_start_matches('[').trim_end_matches(']').to_string())
            .collect();
        let mut i = 0;
        while i < words.len() {
            let starts_command = i == 0
                || ["|", "||", "&&", ";", "$", "sudo", "time"].contains(&words[i - 1].as_str());
            if words[i] == "keysmith" && starts_command {
                let mut cmd = Vec::new();
                i += 1;
                while i < words.len() {
                    let w = &words[i];
                    if ["|", "||", "&&", ";", "#"].contains(&w.as_str())
                        || w.starts_with('>')
                        || w.starts_with("2>")
                        || w.starts_with('#')
                    {
                        break;
                    }
                    cmd.push(w.clone());
                    i += 1;
                }
                out.push(cmd);
            }
            i += 1;
        }
    }
    out
}

/// `keysmith ARGS --help`, if it succeeds.
fn help(
    args: &[String],
    cache: &mut std::collections::HashMap<Vec<String>, Option<String>>,
) -> Option<String> {
    cache
        .entry(args.to_vec())
        .or_insert_with(|| {
            let out = Command::new(env!("CARGO_BIN_EXE_keysmith"))
                .args(args)
                .arg("--help")
                .output()
                .expect("run keysmith --help");
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        })
        .clone()
}

/// Whether `flag` (`--max`) is named in `text` as a whole flag, not as the
/// start of a longer one (`--max-count`).
fn names_flag(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(at, _)| {
        text[at + flag.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
    })
}

#[test]
fn every_flag_of_a_keysmith_command_in_the_guide_is_in_that_commands_help() {
    let mut cache = std::collections::HashMap::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    // The guide's chapters, and the README's examples.
    let readme = book_src().join("../../../README.md");
    for chapter in chapters(&book_src()).into_iter().chain([readme]) {
        for b in blocks(&chapter).iter().filter(|b| b.lang == "sh") {
            for cmd in keysmith_commands(&b.text) {
                // Global options first, then the longest run of words that is a
                // command keysmith knows.
                let mut rest: &[String] = &cmd;
                while let Some(first) = rest.first() {
                    match first.as_str() {
                        "--store" | "--server" | "--token-file" | "--ca-file" | "--cert-file"
                        | "--key-file" => rest = rest.get(2..).unwrap_or(&[]),
                        "--json" => rest = &rest[1..],
                        _ => break,
                    }
                }
                let words = rest
                    .iter()
                    .take_while(|w| !w.starts_with('-'))
                    .take(3)
                    .count();
                let Some((path, text)) = (1..=words)
                    .rev()
                    .find_map(|n| help(&rest[..n], &mut cache).map(|h| (&rest[..n], h)))
                else {
                    problems.push(format!(
                        "{}: `keysmith {}` is no command",
                        b.at,
                        cmd.join(" ")
                    ));
                    continue;
                };
                for flag in rest.iter().filter(|w| w.starts_with("--")) {
                    let flag = flag.split('=').next().unwrap();
                    checked += 1;
                    if !names_flag(&text, flag) {
                        problems.push(format!(
                            "{}: `keysmith {}` has no flag {flag}",
                            b.at,
                            path.join(" ")
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        checked > 50,
        "the guide's commands name their flags: {checked} checked"
    );
}

/// The command lines of the reference block of `cli.md`: a line indented by
/// two spaces starts a command (`keysmith` left out), a more indented line
/// that starts with an option continues it; the description column (after
/// three spaces) and "moved:" lines are not commands.
fn reference_commands(text: &str) -> Vec<Vec<String>> {
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let body = line.trim_start();
        let syntax = body.split("   ").next().unwrap_or("");
        if body.contains("moved:") {
            continue;
        }
        if indent == 2 {
            lines.push(format!("keysmith {syntax}"));
        } else if indent > 2
            && (body.starts_with('[') || body.starts_with("--"))
            && let Some(last) = lines.last_mut()
        {
            last.push(' ');
            last.push_str(syntax);
        }
    }
    keysmith_commands(&lines.join("\n"))
}

#[test]
fn the_command_reference_names_every_command_and_only_real_flags() {
    let cli = book_src().join("cli.md");
    let text = std::fs::read_to_string(&cli).unwrap();
    let reference = blocks(&cli)
        .into_iter()
        .find(|b| b.lang == "text")
        .expect("cli.md has its reference block");
    let mut cache = std::collections::HashMap::new();
    let mut problems = Vec::new();
    let commands = reference_commands(&reference.text);
    assert!(
        commands.len() > 20,
        "the reference lists the commands: {commands:?}"
    );
    for cmd in commands {
        let words = cmd
            .iter()
            .take_while(|w| !w.starts_with('-') && *w != "NAME")
            .take(3)
            .count();
        let Some((path, help_text)) = (1..=words)
            .rev()
            .find_map(|n| help(&cmd[..n], &mut cache).map(|h| (&cmd[..n], h)))
        else {
            problems.push(format!("`keysmith {}` is no command", cmd.join(" ")));
            continue;
        };
        for flag in cmd.iter().filter(|w| w.starts_with("--")) {
            if !names_flag(&help_text, flag) {
                problems.push(format!("`keysmith {}` has no flag {flag}", path.join(" ")));
            }
        }
    }
    // Every command of `keysmith --help` is named in the chapter.
    let top = help(&[], &mut cache).expect("keysmith --help");
    let listed = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next());
    for name in listed {
        if !text.contains(&format!("`keysmith {name}")) && !text.contains(&format!("`{name}`")) {
            problems.push(format!("cli.md does not name `keysmith {name}`"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_library_examples_of_the_readme_and_the_guide_are_the_quickstart_example_cargo_test_runs() {
    let root = book_src().join("../../..");
    let example =
        std::fs::read_to_string(root.join("crates/keysmith/examples/quickstart.rs")).unwrap();
    let start = example
        .find("// ANCHOR: body\n")
        .expect("the example's anchor")
        + "// ANCHOR: body\n".len();
    let end = example
        .find("// ANCHOR_END: body")
        .expect("the example's anchor end");
    let body: String = example[start..end]
        .trim_end_matches(' ')
        .lines()
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect();
    for page in [
        root.join("README.md"),
        book_src().join("getting-started.md"),
    ] {
        let shown = blocks(&page)
            .into_iter()
            .find(|b| b.lang == "rust")
            .unwrap_or_else(|| panic!("{} has a Rust example", page.display()));
        assert_eq!(
            shown.text.trim_end(),
            body.trim_end(),
            "{}: the Rust example is not crates/keysmith/examples/quickstart.rs's (between its ANCHOR lines)",
            shown.at
        );
    }
}
