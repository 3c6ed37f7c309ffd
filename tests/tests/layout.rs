// SPDX-License-Identifier: MIT OR Apache-2.0
//! The engine's layering, as `docs/design.md` draws it: every `crate::`
//! path in a top-level module of `core/src` names a module that the drawn
//! graph puts below it (or a leaf), and the graph has no cycle. So the PT
//! driver (`pt`) never names the software Intel PT (`soft_pt`) that
//! implements its tracer seam, and the generic layers (ring, aux, sample,
//! event) name neither.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The drawn graph: the fenced block after "Dependencies point one way" in
/// `docs/design.md`. A line `a, b <- c <- d` says `c` uses `a` and `b`, and
/// `d` uses `c`; the "(leaves)" line lists what every module may use.
fn drawn() -> (Graph, BTreeSet<String>) {
    let design = std::fs::read_to_string(repo().join("docs/design.md")).expect("docs/design.md");
    let start = design
        .find("Dependencies point one way")
        .expect("the dependency section");
    let block = design[start..]
        .split("```")
        .nth(1)
        .expect("the graph's fenced block");
    let mut graph = Graph::new();
    let mut leaves = BTreeSet::new();
    let names = |group: &str| -> Vec<String> {
        group
            .split(',')
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .collect()
    };
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(list) = line.strip_suffix("(leaves)") {
            leaves.extend(names(list));
            continue;
        }
        let groups: Vec<Vec<String>> = line.split("<-").map(names).collect();
        for pair in groups.windows(2) {
            for user in &pair[1] {
                graph
                    .entry(user.clone())
                    .or_default()
                    .extend(pair[0].iter().cloned());
            }
        }
    }
    (graph, leaves)
}

/// What a module reaches in the drawn graph.
fn reach(graph: &Graph, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(m) = todo.pop() {
        for d in graph.get(&m).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

/// Every `.rs` file of a top-level module (`name.rs` or `name/`).
fn sources(src: &Path, module: &str) -> Vec<PathBuf> {
    let file = src.join(format!("{module}.rs"));
    if file.exists() {
        return vec![file];
    }
    let mut out = Vec::new();
    let mut dirs = vec![src.join(module)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a module directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// The top-level modules a file's code (not its comments) names through
/// `crate::`, with a line that does.
fn uses(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).expect("a source file");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.entry(name).or_insert_with(|| line.trim().to_string());
        }
    }
    out
}

#[test]
fn every_crate_path_in_core_follows_the_drawn_graph() {
    let (graph, leaves) = drawn();
    let src = repo().join("core/src");
    let modules: BTreeSet<String> = graph
        .keys()
        .chain(graph.values().flatten())
        .chain(&leaves)
        .cloned()
        .collect();
    // The graph names every module of the crate, and nothing else.
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            l.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_string)
        })
        .collect();
    assert_eq!(declared, modules, "lib.rs's modules and the drawn graph");
    for m in &modules {
        assert!(
            !reach(&graph, m).contains(m),
            "the drawn graph has a cycle through {m}"
        );
    }
    let mut wrong = Vec::new();
    let mut checked = 0;
    for module in &modules {
        let allowed = reach(&graph, module);
        for file in sources(&src, module) {
            for (name, line) in uses(&file) {
                // `crate::warn_on_once!` is the `warn` module's macro, at the root.
                let target = if name == "warn_on_once" {
                    "warn".to_string()
                } else {
                    name
                };
                checked += 1;
                if &target == module || leaves.contains(&target) || allowed.contains(&target) {
                    continue;
                }
                wrong.push(format!(
                    "{}: `{line}` ({module} -> {target})",
                    file.display()
                ));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} crate paths found: the scan is broken"
    );
    assert!(
        wrong.is_empty(),
        "paths against the drawn graph:\n{}",
        wrong.join("\n")
    );
}

/// The check fails where it should: a driver file naming the software
/// tracer is caught.
#[test]
fn a_driver_path_to_the_software_tracer_is_refused() {
    let (graph, leaves) = drawn();
    assert!(!reach(&graph, "pt").contains("soft_pt"));
    assert!(!leaves.contains("soft_pt"));
    let dir = repo().join("target/tmp/layout");
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let file = dir.join("pmu.rs");
    std::fs::write(
        &file,
        "use crate::soft_pt::tracer::SoftTracer; // a driver bug\n",
    )
    .unwrap();
    assert!(uses(&file).contains_key("soft_pt"));
    std::fs::write(&file, "// crate::soft_pt in a comment\n").unwrap();
    assert!(uses(&file).is_empty());
}
