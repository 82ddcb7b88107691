//! A namespace's record in a store: `namespace.json`, its fields and the directory name they
//! hash to. The namespace itself, and that hash, are [`crate::identity`]'s.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::identity::Namespace;

/// The human-readable part of a namespace, as written to `namespace.json`.
#[derive(Serialize, Deserialize)]
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
    /// The `namespace.json` text: every field, plus the directory name.
    pub fn to_json(&self) -> String {
        let document = NamespaceDocument {
            fields: NamespaceFields {
                kiln_version: self.kiln_version().to_owned(),
                compiler_version: self.compiler_version().to_owned(),
                target: self.target().to_owned(),
                target_options: self.target_options().clone(),
                capabilities: self.capabilities().clone(),
            },
            dir_name: self.dir_name().to_owned(),
        };
        // Serializing string maps and sets to JSON cannot fail; fall back to the bare name
        // rather than panic if serde_json ever disagrees.
        serde_json::to_string_pretty(&document).unwrap_or_else(|_| self.dir_name().to_owned())
    }

    /// Reads a `namespace.json` text back. The directory name is recomputed from the fields,
    /// so a document edited by hand cannot claim another namespace's directory.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        let document: NamespaceDocument = serde_json::from_str(text)?;
        let NamespaceFields {
            kiln_version,
            compiler_version,
            target,
            target_options,
            capabilities,
        } = document.fields;
        Ok(Self::from_parts(
            kiln_version,
            compiler_version,
            target,
            target_options,
            capabilities,
        ))
    }
}
