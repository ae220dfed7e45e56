//! The docs cannot drift from the tree: every ```` ```sh ```` block of the README,
//! ARCHITECTURE.md and `docs/*.md` runs here, page by page, as one bash script with
//! `set -euo pipefail`, on the real `beacon` and `nebcli` binaries.
//!
//! A page's script runs in a fresh directory holding a copy of `conf/` and of the Python
//! client's `examples/`, so the pages' own commands (`beacon --config
//! conf/cluster/beacon-16000.json &`) run as written; a page that runs Python has the client
//! package's interpreter (`support/python.rs`) first on its PATH. The one
//! liberty taken is the ports: every port a page or a config file names (16000, 16088, ...)
//! becomes a free one, the same everywhere (in the script, in the copied files and their
//! names, a beacon's admin port staying its port + 88, the order of ports kept, since the
//! election's order follows it; nebcli's default beacon, 127.0.0.1:16000, is moved with
//! `BEACON_ENDPOINTS`), so pages run side by side. Besides that, a line that starts a
//! beacon in the background (`beacon ... &`) waits until its port accepts connections, as the
//! person typing the next line would, and the lines [`NOT_RUN`] lists (building, the long
//! benchmark, Docker and systemd) are counted but not run. Every `beacon` and `nebcli` line
//! runs. Background jobs are killed at the page's end.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

#[path = "support/python.rs"]
mod python_env;

/// The first words of lines a page may show but this test does not run: building (`cargo`:
/// the test runs on built binaries), the benchmark (`bench/run`, `beacon-bench`: 35 minutes in
/// full; CI runs them through `bench/smoke`), `grpcurl` (not packaged here; the Python
/// client's tests do what its lines show: reflection, health, calls) and deployment
/// (`docker`, `install`, `systemctl`, `sudo`: neither Docker nor systemd is here).
const NOT_RUN: &[&str] = &[
    "cargo",
    "bench/run",
    "beacon-bench",
    "grpcurl",
    "docker",
    "install",
    "systemctl",
    "sudo",
];

/// How long one page may take.
const PAGE_LIMIT: Duration = Duration::from_secs(150);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pages of the book: the README, ARCHITECTURE.md and every `docs/*.md`.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_owned(), "ARCHITECTURE.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("read docs/")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// A fenced ```` ```sh ```` block: the line of the page its first command is on, and its text.
struct Block {
    line: usize,
    text: String,
}

fn sh_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match (&mut open, fence) {
            (None, true) if line.trim() == "```sh" => {
                open = Some(Block {
                    line: i + 2,
                    text: String::new(),
                })
            }
            (Some(_), true) => blocks.push(open.take().unwrap()),
            (Some(b), false) => {
                b.text.push_str(line);
                b.text.push('\n');
            }
            _ => {}
        }
    }
    assert!(open.is_none(), "an ```sh block is never closed");
    blocks
}

/// The loopback ports `text` names (`127.0.0.1:16000`, `--admin 127.0.0.1:16088`, the port in
/// `beacon-16000.json`): five-digit numbers from 10000 to 29999 after `:` or `-`.
fn ports_named(text: &str, into: &mut BTreeSet<u16>) {
    let bytes = text.as_bytes();
    for (i, w) in bytes.windows(6).enumerate() {
        let digits = &w[1..];
        let before_ok = w[0] == b':' || w[0] == b'-';
        let after_ok = bytes.get(i + 6).is_none_or(|b| !b.is_ascii_digit());
        if before_ok && after_ok && digits.iter().all(u8::is_ascii_digit) {
            let port: u16 = std::str::from_utf8(digits).unwrap().parse().unwrap();
            if (10000..30000).contains(&port) {
                into.insert(port);
            }
        }
    }
}

/// A free port of the test kit's range whose port + 88 is free too (a beacon's admin port),
/// neither among `taken`.
fn free_pair(taken: &BTreeSet<u16>) -> u16 {
    for _ in 0..1_000 {
        let p = beacon_testkit::free_ports(1)[0];
        if !taken.contains(&p) && !taken.contains(&(p + 88)) {
            return p;
        }
    }
    panic!("no free port pair outside the {} handed out", taken.len())
}

/// Every port handed to a page so far: the pages run at once, and a port the system gave one
/// page and took back must not be given to another (its beacons would meet the other's).
static HANDED_OUT: std::sync::Mutex<BTreeSet<u16>> = std::sync::Mutex::new(BTreeSet::new());

/// Doc port to free port: in the same order, and a port ending in 88 whose base is named
/// too stays the base + 88; never a port another page of this run was given.
fn port_map(named: &BTreeSet<u16>) -> BTreeMap<u16, u16> {
    let bases: Vec<u16> = named
        .iter()
        .copied()
        .filter(|p| !(p % 100 == 88 && named.contains(&(p - 88))))
        .collect();
    let mut taken = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let mut fresh: Vec<u16> = bases
        .iter()
        .map(|_| {
            let p = free_pair(&taken);
            taken.extend([p, p + 88]);
            p
        })
        .collect();
    fresh.sort_unstable();
    let mut map: BTreeMap<u16, u16> = bases.iter().copied().zip(fresh).collect();
    for p in named {
        if p % 100 == 88
            && let Some(base) = map.get(&(p - 88)).copied()
        {
            map.insert(*p, base + 88);
        }
    }
    map
}

/// `text` with every named port replaced (whole numbers only).
fn remap(text: &str, map: &BTreeMap<u16, u16>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut digits = String::new();
    let flush = |digits: &mut String, out: &mut String| {
        match digits.parse::<u16>().ok().and_then(|p| map.get(&p)) {
            Some(fresh) if digits.len() == 5 => out.push_str(&fresh.to_string()),
            _ => out.push_str(digits),
        }
        digits.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
}

/// Copies `from` into `to`, names and contents remapped.
fn copy_remapped(from: &Path, to: &Path, map: &BTreeMap<u16, u16>) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = remap(&e.file_name().to_string_lossy(), map);
        let path = e.path();
        if path.is_dir() {
            copy_remapped(&path, &to.join(name), map);
        } else {
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    std::fs::write(to.join(&name), remap(&text, map)).unwrap();
                    // Scripts stay executable.
                    let mode = std::fs::metadata(&path).unwrap().permissions();
                    std::fs::set_permissions(to.join(&name), mode).unwrap();
                }
                Err(_) => {
                    std::fs::copy(&path, to.join(&name)).unwrap();
                }
            }
        }
    }
}

/// What a page's script runs, counted.
#[derive(Default, Debug)]
struct Counted {
    commands: usize,
    not_run: Vec<String>,
}

/// The bash script of `page`'s blocks, each command preceded by where it is on the page.
fn script(page: &str, blocks: &[Block], map: &BTreeMap<u16, u16>, counted: &mut Counted) -> String {
    let mut s = String::from(concat!(
        "set -euo pipefail\n",
        "trap 'echo \"docs: failed at $__at\" >&2' ERR\n",
        "trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT\n",
        "__up() { for _ in $(seq 300); do (: </dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; ",
        "sleep 0.05; done; echo \"docs: nothing listens on port $1\" >&2; return 1; }\n",
        // After the beacons a page starts, the next line is typed once they have had a
        // moment to elect: up to 5 s for the last one's /health (its admin port is its port
        // + 88) to say a write would succeed. A page that starts a minority on purpose goes
        // on after the 5 s, as its reader would.
        "__ready() { for _ in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:$(($1 + 88))/health && return 0; ",
        "sleep 0.05; done; return 0; }\n",
    ));
    // The port of the last beacon started, until the next line waits for it.
    let mut started: Option<u16> = None;
    for b in blocks {
        let mut continued = false;
        for (i, written) in b.text.lines().enumerate() {
            let line = &remap(written, map);
            let at = format!("{page}:{}", b.line + i);
            let words: Vec<&str> = line.split_whitespace().collect();
            let starts = !continued && !words.is_empty() && !words[0].starts_with('#');
            continued = line.trim_end().ends_with('\\');
            if !starts {
                s.push_str(line);
                s.push('\n');
                continue;
            }
            if NOT_RUN.contains(&words[0]) {
                counted.not_run.push(format!("{at}: {}", line.trim()));
                assert!(!continued, "{at}: a line not run may not continue");
                continue;
            }
            if matches!(words[0], "beacon" | "nebcli")
                || words.iter().any(|w| *w == "nebcli" || *w == "beacon")
            {
                counted.commands += 1;
            }
            let background = line.trim_end().ends_with('&');
            let starts_beacon = background && words[0] == "beacon";
            if !starts_beacon && let Some(port) = started.take() {
                s.push_str(&format!("__ready {port}\n"));
            }
            s.push_str(&format!("__at='{at}'\n"));
            if starts_beacon {
                let mut ports = BTreeSet::new();
                ports_named(written, &mut ports);
                let port = ports
                    .first()
                    .map(|p| map[p])
                    .unwrap_or_else(|| panic!("{at}: a beacon started without a port"));
                s.push_str(&format!("{line} __up {port}\n"));
                started = Some(port);
            } else {
                s.push_str(line);
                s.push('\n');
            }
        }
    }
    s
}

/// Runs `page`'s blocks; returns what ran.
fn run_page(page: &str) -> Counted {
    let markdown = std::fs::read_to_string(root().join(page)).expect("read the page");
    let blocks = sh_blocks(&markdown);
    let mut named = BTreeSet::new();
    for b in &blocks {
        ports_named(&b.text, &mut named);
    }
    let conf = root().join("conf");
    for e in walk(&conf) {
        ports_named(&e.to_string_lossy(), &mut named);
        if let Ok(text) = std::fs::read_to_string(&e) {
            ports_named(&text, &mut named);
        }
    }
    let examples = root().join("clients/python/examples");
    for e in walk(&examples) {
        if let Ok(text) = std::fs::read_to_string(&e) {
            ports_named(&text, &mut named);
        }
    }
    let map = port_map(&named);
    let dir = tempfile::tempdir().unwrap();
    copy_remapped(&conf, &dir.path().join("conf"), &map);
    copy_remapped(&examples, &dir.path().join("clients/python/examples"), &map);
    let mut counted = Counted::default();
    let script = script(page, &blocks, &map, &mut counted);
    std::fs::write(dir.path().join("page.sh"), &script).unwrap();

    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    let bin = nebcli.parent().unwrap();
    let mut path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    // A page that runs Python gets the client package's interpreter first on its PATH.
    if blocks.iter().any(|b| b.text.contains("python")) {
        let python = python_env::python();
        path = format!("{}:{path}", python.parent().unwrap().display());
    }
    let out = dir.path().join("page.out");
    // nebcli's default beacon, 127.0.0.1:16000, moves with the page's ports.
    let default_beacon = map.get(&16000).map(|p| format!("127.0.0.1:{p}"));
    let mut child = Command::new("bash");
    match default_beacon {
        Some(addr) => child.env("BEACON_ENDPOINTS", addr),
        None => child.env_remove("BEACON_ENDPOINTS"),
    };
    let mut child = child
        .arg("page.sh")
        .current_dir(dir.path())
        .env("PATH", path)
        .env_remove("BEACON_TOKEN")
        .env_remove("BEACON_TIMEOUT_MS")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("run bash");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > PAGE_LIMIT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Whatever the page left behind goes with its process group.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .ok();
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let tail = |s: &str| {
        s.lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    };
    match status {
        Some(s) if s.success() => {}
        Some(s) => panic!(
            "{page}: its commands failed ({s}); ports {map:?}\n--- stdout\n{}\n--- stderr\n{}",
            tail(&stdout),
            tail(&stderr)
        ),
        None => panic!(
            "{page}: still running after {PAGE_LIMIT:?}\n--- stdout\n{}\n--- stderr\n{}",
            tail(&stdout),
            tail(&stderr)
        ),
    }
    if std::env::var_os("BEACON_DOCS_SHOW").is_some() {
        eprintln!("--- {page}: stdout\n{stdout}\n--- stderr\n{stderr}");
    }
    eprintln!(
        "{page}: {} beacon and nebcli commands ran in {:?}; not run: {:?}",
        counted.commands,
        started.elapsed(),
        counted.not_run
    );
    counted
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files.extend(walk(&p));
        } else {
            files.push(p);
        }
    }
    files
}

/// docs/nebcli.md has a row for every command `nebcli --help` lists, written as the help
/// writes it.
#[test]
fn the_nebcli_page_has_a_row_for_every_command() {
    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    let out = Command::new(nebcli).arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let page = std::fs::read_to_string(root().join("docs/nebcli.md")).unwrap();
    let commands: Vec<&str> = help
        .split("commands:")
        .nth(1)
        .expect("a command list in nebcli --help")
        .lines()
        .take_while(|l| !l.starts_with("options"))
        .filter(|l| l.starts_with("  ") && !l.starts_with("    "))
        .map(str::trim)
        .collect();
    assert!(commands.len() > 30, "{commands:?}");
    let missing: Vec<&&str> = commands
        .iter()
        .filter(|c| !page.contains(&format!("| `{}` |", c.replace('|', "\\|"))))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/nebcli.md has no row for {missing:?}"
    );
}

/// Each page below is run by a test of its own (so they run side by side); this one keeps
/// the list whole: a page with commands that no test runs fails here.
#[test]
fn every_page_with_commands_is_run() {
    let tested: BTreeSet<&str> = TESTED.iter().copied().collect();
    for page in pages() {
        let markdown = std::fs::read_to_string(root().join(&page)).unwrap();
        let has_commands = !sh_blocks(&markdown).is_empty();
        assert_eq!(
            has_commands,
            tested.contains(page.as_str()),
            "{page}: a page with ```sh blocks has a test below, and one without has none"
        );
    }
}

/// The pages with commands, each run by the test named after it.
const TESTED: &[&str] = &[
    "README.md",
    "docs/assignment.md",
    "docs/comparison.md",
    "docs/configs.md",
    "docs/grpc.md",
    "docs/guarantees.md",
    "docs/nebcli.md",
    "docs/operations.md",
    "docs/registry.md",
    "docs/security.md",
    "docs/sequences.md",
    "docs/tasks.md",
];

macro_rules! page_tests {
    ($($name:ident => $page:literal),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let counted = run_page($page);
                assert!(counted.commands > 0, "{}: no beacon or nebcli command ran", $page);
            }
        )*
        #[test]
        fn the_list_names_each_page_once() {
            let listed = [$($page),*];
            assert_eq!(listed.as_slice(), TESTED);
        }
    };
}

page_tests! {
    readme => "README.md",
    assignment => "docs/assignment.md",
    comparison => "docs/comparison.md",
    configs => "docs/configs.md",
    grpc => "docs/grpc.md",
    guarantees => "docs/guarantees.md",
    nebcli => "docs/nebcli.md",
    operations => "docs/operations.md",
    registry => "docs/registry.md",
    security => "docs/security.md",
    sequences => "docs/sequences.md",
    tasks => "docs/tasks.md",
}

/// A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of `markdown`'s headings (outside code blocks).
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// Every link between the pages (and to files of the tree) leads somewhere: the file exists,
/// and the heading a `#fragment` names is on that page.
#[test]
fn every_link_between_the_pages_leads_somewhere() {
    let mut pages = pages();
    pages.push("conf/README.md".to_owned());
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let markdown = std::fs::read_to_string(root().join(page)).unwrap();
        let dir = Path::new(page).parent().unwrap();
        for (start, _) in markdown.match_indices("](") {
            let rest = &markdown[start + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if target.contains("://") || target.contains(char::is_whitespace) {
                continue;
            }
            checked += 1;
            let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
            let path = if file.is_empty() {
                root().join(page)
            } else {
                root().join(dir).join(file)
            };
            if !path.exists() {
                broken.push(format!("{page}: {target} (no such file)"));
                continue;
            }
            if !fragment.is_empty() {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if !anchors(&text).contains(fragment) {
                    broken.push(format!("{page}: {target} (no such heading)"));
                }
            }
        }
    }
    assert!(checked > 40, "only {checked} links found");
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}
