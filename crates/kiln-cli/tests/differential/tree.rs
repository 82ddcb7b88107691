//! Output directories read into memory and compared with a clean build's, byte for byte.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// An output directory: its output files (relative, `/`-separated) and `index.json`.
/// Names starting with `.` are not outputs (temporary files, a future `.kiln-stat`); those
/// starting with `.tmp` are remembered as leftovers.
#[derive(Clone, Debug, Default)]
pub struct Tree {
    pub files: BTreeMap<String, Vec<u8>>,
    pub index_bytes: Option<Vec<u8>>,
    pub tmp_leftovers: Vec<String>,
}

impl Tree {
    pub fn read(dir: &Path) -> Tree {
        let mut tree = Tree::default();
        walk(dir, "", &mut tree);
        tree.index_bytes = tree.files.remove("index.json");
        tree
    }

    pub fn index(&self) -> Result<Value, String> {
        match &self.index_bytes {
            None => Err("index.json is missing".to_owned()),
            Some(bytes) => {
                serde_json::from_slice(bytes).map_err(|e| format!("index.json does not parse: {e}"))
            }
        }
    }
}

fn walk(dir: &Path, prefix: &str, tree: &mut Tree) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        if name.starts_with('.') {
            if name.starts_with(".tmp") {
                tree.tmp_leftovers.push(relative);
            }
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            walk(&path, &relative, tree);
        } else if let Ok(bytes) = std::fs::read(&path) {
            tree.files.insert(relative, bytes);
        }
    }
}

/// Watch mode's rule: a variant that fails to compile under `kiln watch` keeps its last good
/// files, with their index entries marked `"stale": true`. Those entries and their files are
/// not outputs of the current sources, so they are dropped before comparing with a clean
/// build (which has no outputs for a failed variant). Returns whether any was dropped.
pub fn drop_stale_entries(tree: &mut Tree) -> bool {
    let Ok(mut index) = tree.index() else {
        return false;
    };
    let Some(entries) = index["entries"].as_array_mut() else {
        return false;
    };
    let before = entries.len();
    entries.retain(|entry| {
        let stale = entry["stale"].as_bool() == Some(true);
        if stale {
            if let Some(path) = entry["path"].as_str() {
                tree.files.remove(path);
            }
        }
        !stale
    });
    if entries.len() == before {
        return false;
    }
    tree.index_bytes = Some(serde_json::to_vec(&index).unwrap());
    true
}

/// Index entries by path, with a `"stale": false` (or absent) field removed: a clean build
/// has no stale entries, and whether the field is written when false is not the point.
fn entries_by_path(index: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for entry in index["entries"].as_array().into_iter().flatten() {
        let mut entry = entry.clone();
        if let Some(obj) = entry.as_object_mut() {
            if obj.get("stale").and_then(Value::as_bool) == Some(false) {
                obj.remove("stale");
            }
        }
        let path = entry["path"].as_str().unwrap_or("?").to_owned();
        out.insert(path, entry);
    }
    out
}

/// The differences of `got` from `want` (the clean build), one line each; empty when equal.
/// `exact_index`: index.json must also be byte-identical (build mode).
pub fn diff(got: &Tree, want: &Tree, exact_index: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (path, bytes) in &want.files {
        match got.files.get(path) {
            None => out.push(format!("missing output: {path}")),
            Some(g) if g != bytes => {
                let at = g.iter().zip(bytes).position(|(a, b)| a != b);
                out.push(format!(
                    "output differs: {path} ({} bytes, clean build {} bytes{})",
                    g.len(),
                    bytes.len(),
                    at.map(|at| format!(", first difference at byte {at}"))
                        .unwrap_or_default()
                ));
            }
            Some(_) => {}
        }
    }
    for path in got.files.keys() {
        if !want.files.contains_key(path) {
            out.push(format!("extra output: {path}"));
        }
    }
    match (got.index(), want.index()) {
        (Err(e), Ok(_)) => out.push(e),
        (_, Err(e)) => out.push(format!("clean build: {e}")),
        (Ok(g), Ok(w)) => {
            if g["kiln_version"] != w["kiln_version"] {
                out.push(format!(
                    "index.json kiln_version {} (clean build {})",
                    g["kiln_version"], w["kiln_version"]
                ));
            }
            let (ge, we) = (entries_by_path(&g), entries_by_path(&w));
            for (path, w) in &we {
                match ge.get(path) {
                    None => out.push(format!("index.json: missing entry {path}")),
                    Some(g) if g != w => {
                        let fields: Vec<String> = w
                            .as_object()
                            .into_iter()
                            .flatten()
                            .filter(|(k, v)| g.get(k.as_str()) != Some(v))
                            .map(|(k, v)| {
                                format!(
                                    "{k}: {} (clean build {v})",
                                    g.get(k.as_str()).unwrap_or(&Value::Null)
                                )
                            })
                            .chain(
                                g.as_object()
                                    .into_iter()
                                    .flatten()
                                    .filter(|(k, _)| w.get(k.as_str()).is_none())
                                    .map(|(k, v)| format!("{k}: {v} (clean build: absent)")),
                            )
                            .collect();
                        out.push(format!(
                            "index.json: entry {path} differs: {}",
                            fields.join("; ")
                        ));
                    }
                    Some(_) => {}
                }
            }
            for path in ge.keys() {
                if !we.contains_key(path) {
                    out.push(format!("index.json: extra entry {path}"));
                }
            }
            if out.is_empty() && exact_index && got.index_bytes != want.index_bytes {
                out.push("index.json: same entries, different bytes".to_owned());
            }
        }
    }
    out
}

/// `KILN_FUZZ_ALLOW_KEPT_FAILED=1` only (the old contract, for surveying other bugs before
/// the new one lands): a variant that fails in the clean build may keep its last good
/// outputs in either mode, so its entries and files are dropped before comparing.
/// `failed`: variant names as kiln prints them, `Shader/Pass[A;B]@revision (digest)`.
pub fn drop_outputs_of_failed(tree: &mut Tree, failed: &[String]) -> bool {
    let key = |shader: &str, pass: &str, mut keywords: Vec<String>| {
        keywords.sort();
        format!("{shader}/{pass}/{}", keywords.join("+"))
    };
    let failed: Vec<String> = failed
        .iter()
        .filter_map(|name| {
            let (shader, rest) = name.split_once('/')?;
            let (pass, keywords) = rest.split_once('[')?;
            // `S/P[A;B]`, possibly followed by `@revision (digest)`.
            let (keywords, _) = keywords.split_once(']')?;
            let keywords = keywords
                .split(';')
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect();
            Some(key(shader, pass, keywords))
        })
        .collect();
    let Ok(mut index) = tree.index() else {
        return false;
    };
    let Some(entries) = index["entries"].as_array_mut() else {
        return false;
    };
    let before = entries.len();
    entries.retain(|entry| {
        let keywords = entry["keywords"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str().map(str::to_owned))
            .collect();
        let k = key(
            entry["shader"].as_str().unwrap_or(""),
            entry["pass"].as_str().unwrap_or(""),
            keywords,
        );
        let drop = failed.contains(&k);
        if drop {
            if let Some(path) = entry["path"].as_str() {
                tree.files.remove(path);
            }
        }
        !drop
    });
    if entries.len() == before {
        return false;
    }
    tree.index_bytes = Some(serde_json::to_vec(&index).unwrap());
    true
}
