//! The namespace: which kiln, compiler, target, options and capabilities produced an entry,
//! and the stable directory name derived from them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use super::content_key::hex_lower;

/// This crate's version, the default [`Namespace`] kiln version.
pub const KILN_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Everything outside the content key that could change an artifact's bytes.
///
/// Entries of different namespaces never mix: a new kiln or naga release, another target,
/// or other target options or capabilities start from an empty namespace instead of serving
/// binaries built under other assumptions. Options and capabilities are kept sorted, so the
/// order they were given in does not matter.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace {
    fields: NamespaceFields,
    /// `<target>-<16 hex>`; derived from `fields`, recomputed by every setter.
    dir_name: String,
}

/// The human-readable part of a namespace, as written to `namespace.json`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
struct NamespaceFields {
    kiln_version: String,
    compiler_version: String,
    target: String,
    target_options: BTreeMap<String, String>,
    capabilities: BTreeSet<String>,
}

/// `namespace.json`: the fields plus the directory name they hash to.
#[derive(Serialize, Deserialize)]
struct NamespaceDocument {
    #[serde(flatten)]
    fields: NamespaceFields,
    dir_name: String,
}

impl Namespace {
    /// A namespace for `target` (e.g. `"spirv"`) built by `compiler_version` (e.g.
    /// `"naga 30.0.0"`), with this crate's [`KILN_VERSION`], no options and no capabilities.
    pub fn new(target: impl Into<String>, compiler_version: impl Into<String>) -> Self {
        Self::from_fields(NamespaceFields {
            kiln_version: KILN_VERSION.to_owned(),
            compiler_version: compiler_version.into(),
            target: target.into(),
            target_options: BTreeMap::new(),
            capabilities: BTreeSet::new(),
        })
    }

    /// Replaces the kiln version (tests, or a tool reading another version's store).
    pub fn with_kiln_version(mut self, version: impl Into<String>) -> Self {
        self.fields.kiln_version = version.into();
        self.rehash()
    }

    /// Sets one target option (e.g. `"lang_version"` = `"2.4"`), replacing an earlier value.
    pub fn with_option(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.fields.target_options.insert(name.into(), value.into());
        self.rehash()
    }

    /// Adds one capability the artifacts may rely on (e.g. `"float64"`).
    pub fn with_capability(mut self, capability: impl Into<String>) -> Self {
        self.fields.capabilities.insert(capability.into());
        self.rehash()
    }

    /// The kiln version.
    pub fn kiln_version(&self) -> &str {
        &self.fields.kiln_version
    }

    /// The compiler version.
    pub fn compiler_version(&self) -> &str {
        &self.fields.compiler_version
    }

    /// The target.
    pub fn target(&self) -> &str {
        &self.fields.target
    }

    /// The target options, sorted by name.
    pub fn target_options(&self) -> &BTreeMap<String, String> {
        &self.fields.target_options
    }

    /// The capabilities, sorted.
    pub fn capabilities(&self) -> &BTreeSet<String> {
        &self.fields.capabilities
    }

    /// The directory name: the target (reduced to `[a-z0-9_]`, at most 32 characters), a
    /// dash, and the first 16 hex digits of the blake3 hash of all fields. Stable across
    /// processes, platforms and releases of kiln that keep store layout `v1`.
    ///
    /// The hashed bytes are `b"kiln.store.namespace.v1\0"`, then the kiln version, compiler
    /// version and target, then the number of options and each name and value (sorted by
    /// name), then the number of capabilities and each capability (sorted); every string is
    /// preceded by its length and every count is a `u64`, little endian.
    pub fn dir_name(&self) -> &str {
        &self.dir_name
    }

    /// The `namespace.json` text: every field, plus the directory name.
    pub fn to_json(&self) -> String {
        let document = NamespaceDocument {
            fields: self.fields.clone(),
            dir_name: self.dir_name.clone(),
        };
        // Serializing string maps and sets to JSON cannot fail; fall back to the bare name
        // rather than panic if serde_json ever disagrees.
        serde_json::to_string_pretty(&document).unwrap_or_else(|_| self.dir_name.clone())
    }

    /// Reads a `namespace.json` text back. The directory name is recomputed from the fields,
    /// so a document edited by hand cannot claim another namespace's directory.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        let document: NamespaceDocument = serde_json::from_str(text)?;
        Ok(Self::from_fields(document.fields))
    }

    fn from_fields(fields: NamespaceFields) -> Self {
        Namespace {
            fields,
            dir_name: String::new(),
        }
        .rehash()
    }

    fn rehash(mut self) -> Self {
        let hash = fingerprint(&self.fields);
        let mut name = sanitized_target(&self.fields.target);
        name.push('-');
        name.push_str(&hex_lower(&hash[..8]));
        self.dir_name = name;
        self
    }
}

impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Namespace")
            .field("dir_name", &self.dir_name)
            .field("kiln_version", &self.fields.kiln_version)
            .field("compiler_version", &self.fields.compiler_version)
            .field("target", &self.fields.target)
            .field("target_options", &self.fields.target_options)
            .field("capabilities", &self.fields.capabilities)
            .finish()
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.dir_name)
    }
}

/// blake3 over a length-prefixed encoding of every field, so that no two distinct field
/// tuples (e.g. `("1.0", "x")` and `("1.0x", "")`) can hash the same input bytes.
fn fingerprint(fields: &NamespaceFields) -> [u8; 32] {
    fn put(hasher: &mut blake3::Hasher, text: &str) {
        hasher.update(&(text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    }
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"kiln.store.namespace.v1\0");
    put(&mut hasher, &fields.kiln_version);
    put(&mut hasher, &fields.compiler_version);
    put(&mut hasher, &fields.target);
    hasher.update(&(fields.target_options.len() as u64).to_le_bytes());
    for (name, value) in &fields.target_options {
        put(&mut hasher, name);
        put(&mut hasher, value);
    }
    hasher.update(&(fields.capabilities.len() as u64).to_le_bytes());
    for capability in &fields.capabilities {
        put(&mut hasher, capability);
    }
    *hasher.finalize().as_bytes()
}

/// The target as a file-name-safe prefix; the hash that follows it carries the exact text.
fn sanitized_target(target: &str) -> String {
    let name: String = target
        .chars()
        .take(32)
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '_') => c,
            _ => '_',
        })
        .collect();
    if name.is_empty() {
        "target".to_owned()
    } else {
        name
    }
}
