//! The import graph of the whole workspace has no circles: not between
//! crates (their normal dependencies), not between the files of any crate's
//! `src/`; the product crates depend on no test support and no benchmark
//! code; and the store contract imports nothing above it. No circles
//! between files: no two files reach each other
//! through `crate::`, `super::` and `self::` paths (a parent module and its
//! own submodules excepted, which is how Rust re-exports). ARCHITECTURE.md
//! says data flows one way; this keeps it true.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module path (`["store", "sqlite"]`) for a file path relative to `src/`.
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The source without line comments and without a trailing test module.
fn code_of(src: &str) -> String {
    let src = match src.find("#[cfg(test)]\nmod tests") {
        Some(i) => &src[..i],
        None => src,
    };
    src.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths of a use tree at `s` (after `prefix::`): `a::b`, `{a, b::{c}}`.
fn use_tree(s: &[char], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        while i < s.len() && s[i].is_whitespace() {
            i += 1;
        }
        if i < s.len() && s[i] == '{' {
            i += 1;
            loop {
                i = use_tree(s, i, &path, out);
                while i < s.len() && (s[i].is_whitespace() || s[i] == ',') {
                    i += 1;
                }
                if i >= s.len() || s[i] == '}' {
                    return i + 1;
                }
            }
        }
        let start = i;
        while i < s.len() && is_ident(s[i]) {
            i += 1;
        }
        if start == i {
            out.push(path);
            return i;
        }
        path.push(s[start..i].iter().collect());
        if s.get(i..i + 2) == Some(&[':', ':']) {
            i += 2;
        } else {
            out.push(path);
            return i;
        }
    }
}

/// Which files each file imports, by module paths resolved to files.
fn edges(files: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let by_module: BTreeMap<Vec<String>, &String> =
        files.keys().map(|f| (module_of(f), f)).collect();
    let resolve = |parts: &[String]| {
        (0..=parts.len())
            .rev()
            .find_map(|n| by_module.get(&parts[..n]).map(|f| (*f).clone()))
    };
    let mut out = BTreeMap::new();
    for (file, src) in files {
        let me = module_of(file);
        let code: Vec<char> = code_of(src).chars().collect();
        let mut paths = Vec::new();
        for (i, _) in code.iter().enumerate() {
            if i > 0 && (is_ident(code[i - 1]) || code[i - 1] == ':') {
                continue;
            }
            for (word, base) in [
                ("crate::", Vec::new()),
                ("self::", me.clone()),
                ("super::", me[..me.len().saturating_sub(1)].to_vec()),
            ] {
                let w: Vec<char> = word.chars().collect();
                if code[i..].starts_with(&w) {
                    let mut found = Vec::new();
                    use_tree(&code, i + w.len(), &base, &mut found);
                    for mut p in found {
                        // `super::super::x`
                        let mut at = base.len();
                        while at > 0 && p.len() > at && p[at] == "super" {
                            p.remove(at);
                            p.remove(at - 1);
                            at -= 1;
                        }
                        paths.push(p);
                    }
                }
            }
        }
        // A mod.rs naming its own submodules (`use sqlite::X`, `sqlite::f()`).
        for (module, _) in by_module.iter() {
            if module.len() == me.len() + 1 && module.starts_with(&me) {
                let child: Vec<char> = format!("{}::", module[me.len()]).chars().collect();
                let named = (0..code.len()).any(|i| {
                    code[i..].starts_with(&child)
                        && (i == 0 || !(is_ident(code[i - 1]) || code[i - 1] == ':'))
                });
                if named {
                    paths.push(module.clone());
                }
            }
        }
        let targets: BTreeSet<String> = paths
            .iter()
            .filter_map(|p| resolve(p))
            .filter(|t| {
                let them = module_of(t);
                // Parents and their own submodules: Rust's re-exports.
                !(them.starts_with(&me) || me.starts_with(&them))
            })
            .collect();
        out.insert(file.clone(), targets);
    }
    out
}

/// A circle, as the files along it, if there is one.
fn find_circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        at: &String,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(at.clone(), 1);
        stack.push(at.clone());
        for next in edges.get(at).into_iter().flatten() {
            match state.get(next) {
                Some(1) => {
                    let from = stack.iter().position(|f| f == next).unwrap_or(0);
                    let mut circle = stack[from..].to_vec();
                    circle.push(next.clone());
                    return Some(circle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(next, edges, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(at.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for file in edges.keys() {
        if !state.contains_key(file)
            && let Some(c) = visit(file, edges, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

fn read_tree(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            read_tree(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap().to_string_lossy();
            out.insert(
                rel.replace('\\', "/"),
                std::fs::read_to_string(&path).unwrap(),
            );
        }
    }
}

/// The workspace's `crates/` directory.
fn crates_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every crate of the workspace: its directory name and its files under `src/`.
fn workspace_crates() -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let dir = entry.unwrap().path();
        let src = dir.join("src");
        if dir.join("Cargo.toml").is_file() && src.is_dir() {
            let mut files = BTreeMap::new();
            read_tree(&src, &src, &mut files);
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            out.insert(name, files);
        }
    }
    out
}

/// The workspace crates a crate's manifest names under `[dependencies]`
/// (normal dependencies: what its users link), by package name.
fn normal_dependencies(krate: &str) -> BTreeSet<String> {
    let manifest = std::fs::read_to_string(crates_dir().join(krate).join("Cargo.toml")).unwrap();
    let mut deps = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
        } else if in_deps && line.starts_with("keysmith") {
            let name = line.split(['=', ' ']).next().unwrap_or("");
            deps.insert(name.to_owned());
        }
    }
    deps
}

/// The crates users install or link: everything but the lab and test support.
const PRODUCT: [&str; 8] = [
    "keysmith",
    "keysmith-core",
    "keysmith-sqlite",
    "keysmith-postgres",
    "keysmith-mysql",
    "keysmith-etcd",
    "keysmith-cli",
    "keysmith-server",
];

#[test]
fn no_crate_has_import_circles_in_its_files() {
    let crates = workspace_crates();
    for krate in PRODUCT {
        assert!(crates.contains_key(krate), "crate {krate} not found");
    }
    let core = &crates["keysmith-core"];
    assert!(
        core.len() > 50,
        "read only {} files of the core",
        core.len()
    );
    for (krate, files) in &crates {
        let graph = edges(files);
        if let Some(circle) = find_circle(&graph) {
            panic!("import circle in {krate}: {}", circle.join(" -> "));
        }
    }
    // The graph is real: the sequence module reaches the store contract.
    assert!(edges(core)["sequence/admin.rs"].contains("store/mod.rs"));
}

#[test]
fn crates_depend_on_each_other_without_circles_and_the_product_on_no_lab() {
    let crates = workspace_crates();
    let graph: BTreeMap<String, BTreeSet<String>> = crates
        .keys()
        .map(|k| (k.clone(), normal_dependencies(k)))
        .collect();
    // The graph is real: the facade links the core.
    assert!(graph["keysmith"].contains("keysmith-core"));
    if let Some(circle) = find_circle(&graph) {
        panic!("crate dependency circle: {}", circle.join(" -> "));
    }
    let mut lab = Vec::new();
    for krate in PRODUCT {
        for dep in &graph[krate] {
            if dep == "keysmith-testsupport" || dep == "keysmith-bench" {
                lab.push(format!("{krate} depends on {dep}"));
            }
        }
        // The trailing `#[cfg(test)] mod tests` of a file is not linked
        // into the product (test support is a dev-dependency there).
        for (file, src) in &crates[krate] {
            let code = code_of(src);
            if code.contains("keysmith_testsupport") || code.contains("keysmith_bench") {
                lab.push(format!(
                    "{krate}/src/{file} names test support or benchmark code"
                ));
            }
        }
    }
    assert!(lab.is_empty(), "the product links the lab: {lab:#?}");
}

/// The store contract sits below everything that uses it: a file under
/// the core's `store/` or `driver/` imports only the store, the driver
/// helpers, the plain data of numbered sequences (`numbering/`) and the
/// crate's base (errors, the clock, names, retries).
#[test]
fn the_store_imports_nothing_above_it() {
    let crates = workspace_crates();
    let files = &crates["keysmith-core"];
    let below = |t: &str| {
        ["store/", "driver/", "numbering/"]
            .iter()
            .any(|p| t.starts_with(p))
            || ["error.rs", "clock.rs", "name.rs", "backoff.rs"].contains(&t)
    };
    let mut upward = Vec::new();
    for (file, targets) in edges(files) {
        let layered = file.starts_with("store/")
            || file.starts_with("driver/")
            || file.starts_with("numbering/");
        for t in targets.iter().filter(|t| layered && !below(t)) {
            upward.push(format!("{file} -> {t}"));
        }
        if file.starts_with("numbering/") {
            for t in targets
                .iter()
                .filter(|t| !t.starts_with("numbering/") && *t != "error.rs")
            {
                upward.push(format!("{file} -> {t}"));
            }
        }
    }
    assert!(upward.is_empty(), "imports that run up: {upward:#?}");
}

/// The checker finds the kinds of circle it is there for.
#[test]
fn the_checker_sees_circles() {
    let files = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(f, s)| ((*f).to_owned(), (*s).to_owned()))
            .collect()
    };
    // Two top-level modules, through a use group.
    let two = files(&[
        ("lib.rs", "mod a; mod b;"),
        ("a/mod.rs", "use crate::{b::thing, x};"),
        ("b/mod.rs", "fn f() { crate::a::g() }"),
    ]);
    assert!(find_circle(&edges(&two)).is_some());
    // Siblings through super::, with a test module and comments ignored.
    let siblings = files(&[
        ("s/mod.rs", "mod x; mod y;"),
        ("s/x.rs", "fn f() { super::y::g() }"),
        (
            "s/y.rs",
            "// super::x::f\n#[cfg(test)]\nmod tests { use super::super::x; }",
        ),
    ]);
    assert!(find_circle(&edges(&siblings)).is_none());
    let mut closed = siblings.clone();
    closed.insert("s/y.rs".into(), "use super::x::f;".into());
    assert_eq!(
        find_circle(&edges(&closed)).map(|c| c.len()),
        Some(3),
        "{:?}",
        edges(&closed)
    );
    // A parent re-exporting its child is not a circle.
    let parent = files(&[
        ("p/mod.rs", "mod c; pub use c::C; fn f() -> C { todo!() }"),
        ("p/c.rs", "use super::f;"),
    ]);
    assert!(find_circle(&edges(&parent)).is_none());
}
