//! The layering of the code, kept true by reading it (every `crate::` path in `src/`):
//!
//! * the consensus core, the storage, the wire and the testkit name no machine;
//! * the server names none (it reaches the machines through what `compose!` generates);
//! * outside the machines' folders, a machine is named only in `compose!`'s list
//!   (`src/machines/mod.rs`) and in nebcli's command table: a new machine is its folder,
//!   its proto file, one line in each;
//! * no two top-level modules import each other, directly or through others (the layers
//!   form no circle), and no two files do;
//! * building the daemon alone and building the workspace resolve every shared dependency
//!   with the same features, so that one build serves both.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The machines: every folder of `src/machines/`, so that a new one is guarded at once.
fn machines() -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(root().join("src/machines"))
        .expect("src/machines")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    found
}

#[test]
fn every_machine_is_guarded() {
    let found = machines();
    for m in ["assign", "configs", "registry", "sequence", "tasks"] {
        assert!(found.iter().any(|f| f == m), "{m} is not in {found:?}");
    }
}

/// Every `.rs` file under `dir`, recursively, as (path relative to the root, text).
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root()).unwrap().display().to_string();
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The code of `text`: comments and string literals left out (they may mention anything).
fn code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let mut in_str = false;
        let mut prev = ' ';
        for c in line.chars() {
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            } else if !in_str {
                out.push(c);
            }
            prev = c;
        }
        out.push('\n');
    }
    out
}

/// Whether `code` names machine `m`: a path through it (`registry::`, `machines::registry`).
fn names(code: &str, m: &str) -> bool {
    let needle = format!("{m}::");
    code.match_indices(&needle).any(|(at, _)| {
        let before = &code[..at];
        let segment_start = !before.ends_with(|c: char| c.is_alphanumeric() || c == '_');
        // Another crate's module of the same name (`prometheus_client::registry`) is not it.
        let of_another_crate = before.ends_with("::")
            && !["crate::", "super::", "self::", "machines::", "pb::"]
                .iter()
                .any(|p| before.ends_with(p));
        segment_start && !of_another_crate
    }) || code.contains(&format!("machines::{m}"))
}

#[test]
fn the_core_the_storage_the_wire_the_server_and_the_testkit_name_no_machine() {
    let mut offenders = Vec::new();
    for dir in [
        "src/consensus",
        "src/storage",
        "src/wire",
        "src/server",
        "testkit/src",
    ] {
        for (file, text) in sources(&root().join(dir)) {
            let code = code(&text);
            for m in &machines() {
                if names(&code, m) {
                    offenders.push(format!("{file} names {m}"));
                }
            }
        }
    }
    assert!(offenders.is_empty(), "{offenders:#?}");
}

#[test]
fn outside_the_machines_a_machine_is_named_in_compose_and_nebcli_alone() {
    let allowed = ["src/machines/mod.rs", "nebcli/src/commands.rs"];
    let mut files = sources(&root().join("src"));
    files.extend(sources(&root().join("nebcli/src")));
    for m in &machines() {
        let named: Vec<&str> = files
            .iter()
            .filter(|(f, _)| !f.starts_with("src/machines/") || f == "src/machines/mod.rs")
            .filter(|(_, text)| names(&code(text), m))
            .map(|(f, _)| f.as_str())
            .collect();
        assert_eq!(
            named, allowed,
            "machine {m} is named outside its folder in {named:?}"
        );
    }
    let build = std::fs::read_to_string(root().join("build.rs")).unwrap();
    for m in &machines() {
        assert!(!code(&build).contains(m.as_str()), "build.rs names {m}");
    }
}

/// The module `path` names: its longest prefix that is a module of `known` (a path into a
/// module names the module, whether it goes on to a type, a function or a submodule), cut to
/// `depth` segments.
fn module_of(path: &str, known: &BTreeSet<String>, depth: usize) -> Option<String> {
    let parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|m| known.contains(m))
        .map(|m| m.split("::").take(depth).collect::<Vec<_>>().join("::"))
}

/// The module a source file is (`src/server/conn.rs` is `server::conn`).
fn module_of_file(file: &str) -> String {
    let rel = file.trim_start_matches("src/").trim_end_matches(".rs");
    let rel = rel.trim_end_matches("/mod");
    rel.replace('/', "::")
}

/// The paths `code` names, made absolute from module `me`: `crate::a::b` as `a::b`,
/// `super::x` from `s::t` as `s::x`.
fn paths(code: &str, me: &str) -> Vec<String> {
    let segments: Vec<&str> = me.split("::").filter(|s| !s.is_empty()).collect();
    let mut out = Vec::new();
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    for (at, _) in code.match_indices("crate::") {
        if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        out.push(
            code[at + "crate::".len()..]
                .chars()
                .take_while(|c| word(*c))
                .collect(),
        );
    }
    // A folder's mod.rs reaching its own files by name (`mod calls;` ... `calls::Edge`).
    for line in code.lines() {
        // `mod NAME;` with any visibility before it.
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(child) = (match words.as_slice() {
            [.., "mod", last] => last.strip_suffix(';'),
            _ => None,
        }) else {
            continue;
        };
        let needle = format!("{child}::");
        for (at, _) in code.match_indices(&needle) {
            if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let tail: String = code[at..].chars().take_while(|c| word(*c)).collect();
            out.push(format!("{me}::{tail}"));
        }
    }
    for (at, _) in code.match_indices("super::") {
        if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // counted with the first `super::` of its chain
        }
        let mut rest = &code[at..];
        // `super` is the module one level up: a file's folder, a folder's parent (a
        // folder's mod.rs is the folder's module itself).
        let mut up = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            rest = r;
            up += 1;
        }
        let keep = segments.len().saturating_sub(up);
        let base = segments[..keep].join("::");
        let tail: String = rest.chars().take_while(|c| word(*c)).collect();
        out.push(if base.is_empty() {
            tail
        } else {
            format!("{base}::{tail}")
        });
    }
    out
}

/// Module -> the modules its files name (through `crate::` and `super::`), at `depth`.
fn imports(depth: usize) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let files = sources(&root().join("src"));
    let known: BTreeSet<String> = files.iter().map(|(f, _)| module_of_file(f)).collect();
    for (file, text) in files {
        let full = module_of_file(&file);
        let me = full.split("::").take(depth).collect::<Vec<_>>().join("::");
        let code = code(&text);
        for path in paths(&code, &full) {
            if let Some(target) = module_of(&path, &known, depth)
                && target != me
                && !target.is_empty()
                && target != "pb"
            {
                graph.entry(me.clone()).or_default().insert(target);
            }
        }
    }
    graph
}

/// A circle in `graph`, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut c = path[at..].to_vec();
            c.push(node.to_owned());
            return Some(c);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(c) = visit(node, graph, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_layers_form_no_circle() {
    let top = imports(1);
    assert!(
        top.contains_key("server") && top["server"].contains("machines"),
        "{top:#?}"
    );
    if let Some(c) = circle(&top) {
        panic!(
            "the top-level modules import each other in a circle: {}",
            c.join(" -> ")
        );
    }
}

#[test]
fn no_two_files_import_each_other_in_a_circle() {
    // A file that uses what its folder's mod.rs defines is part of that folder, not a
    // circle: edges from a module up to its own ancestors are not counted. Edges down are:
    // a mod.rs that calls into its files stands for its folder, so a file that calls into a
    // sibling folder whose files call back (server/conn.rs and server/grpc/) is a circle.
    let mut graph = imports(3);
    for (from, to) in graph.iter_mut() {
        to.retain(|t| !from.starts_with(&format!("{t}::")) && t != from);
    }
    if let Some(c) = circle(&graph) {
        panic!(
            "these modules import each other in a circle: {}",
            c.join(" -> ")
        );
    }
}

/// Each package with the features it is built with (`cargo tree -f '{p} {f}'`) for `args`:
/// a package built for the build scripts too may come twice, with the features of each.
fn features(args: &[&str]) -> BTreeSet<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-e",
            "normal,build",
            "--prefix",
            "none",
        ])
        .args(["-f", "{p}|{f}"])
        .args(args)
        .current_dir(root())
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (package, features) = l.split_once('|')?;
            let package = package.split(" (").next()?.trim();
            let features = features.trim_end_matches(" (*)").trim();
            Some(format!("{package} [{features}]"))
        })
        .collect()
}

/// The README's set-up (`cargo run --release --bin beacon`) and its quick start (`cargo
/// build --release --workspace`) build the crates they share once: each dependency of the
/// daemon is resolved with the same features in both, or the second would compile tokio, mio
/// and the rest again.
#[test]
fn the_daemon_alone_and_the_workspace_share_one_build() {
    let workspace = features(&["--workspace"]);
    let differ: Vec<String> = features(&["-p", "beacon"])
        .into_iter()
        .filter(|built| !workspace.contains(built))
        .collect();
    assert!(
        differ.is_empty(),
        "built with other features in the workspace: {differ:#?}"
    );
}

/// Every port a test opens comes from the test kit (`free_ports`, `free_listener`), so that
/// `BEACON_TEST_PORTS` confines them all: nothing binds a port of the kernel's choosing but
/// the kit's own fallback when no range is set.
#[test]
fn every_test_port_comes_from_the_test_kit() {
    let mut files = Vec::new();
    for dir in ["tests", "testkit/src", "nebcli/tests", "bench/src"] {
        files.extend(sources(&root().join(dir)));
    }
    let python = root().join("clients/python/tests/conftest.py");
    files.push((
        "clients/python/tests/conftest.py".into(),
        std::fs::read_to_string(python).unwrap(),
    ));
    let kernel_picks = ["\"127.0.0.1:0\"", "(\"127.0.0.1\", 0)", "\"[::1]:0\""];
    let offenders: Vec<String> = files
        .iter()
        .filter(|(file, _)| file != "tests/tidy.rs")
        .flat_map(|(file, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, line)| kernel_picks.iter().any(|k| line.contains(k)))
                .filter(|(_, line)| !line.contains("bind an ephemeral port"))
                .map(move |(i, line)| format!("{file}:{}: {}", i + 1, line.trim()))
        })
        .collect();
    assert!(offenders.is_empty(), "{offenders:#?}");
}

/// The core, the storage and the wire format run without a runtime: they name no tokio (a
/// transport adapts them to one), so the simulation and any embedder drive them as they are.
#[test]
fn the_core_the_storage_and_the_wire_name_no_runtime() {
    let mut offenders = Vec::new();
    for dir in ["src/consensus", "src/storage", "src/wire"] {
        for (file, text) in sources(&root().join(dir)) {
            if code(&text).contains("tokio") {
                offenders.push(file);
            }
        }
    }
    assert!(offenders.is_empty(), "{offenders:#?} name tokio");
}

/// What a service links: `beacon-client` builds the library without its daemon, so none of
/// the server's dependencies (its HTTP API, metrics, gRPC server, reflection and health
/// services, certificate parsing and making, command line) is in its tree.
#[test]
fn the_client_crate_builds_none_of_the_servers_dependencies() {
    let server_only = [
        "axum",
        "clap",
        "hyper",
        "hyper-util",
        "prometheus-client",
        "rcgen",
        "tonic-health",
        "tonic-reflection",
        "tonic-types",
        "tracing-subscriber",
        "x509-parser",
    ];
    let client: BTreeSet<String> = features(&["-p", "beacon-client"])
        .into_iter()
        .filter_map(|p| p.split(' ').next().map(str::to_owned))
        .collect();
    assert!(
        client.contains("beacon-client") && client.contains("beacon"),
        "cargo tree -p beacon-client lists {client:?}"
    );
    let linked: Vec<&str> = server_only
        .iter()
        .copied()
        .filter(|d| client.contains(*d))
        .collect();
    assert!(
        linked.is_empty(),
        "beacon-client builds the server's {linked:?}"
    );
    // And the daemon does build them: the list above names what the feature leaves out.
    let daemon: BTreeSet<String> = features(&["-p", "beacon"])
        .into_iter()
        .filter_map(|p| p.split(' ').next().map(str::to_owned))
        .collect();
    let missing: Vec<&str> = server_only
        .iter()
        .copied()
        .filter(|d| !daemon.contains(*d) && *d != "rcgen")
        .collect();
    assert!(missing.is_empty(), "the daemon does not build {missing:?}");
}
