//! A namespace's record in a store: `namespace.json`, its fields and the directory name they
//! hash to. The namespace itself, and that hash, are [`crate::identity`]'s.

use serde::{Deserialize, Serialize};

use crate::identity::{Namespace, NamespaceFields};

/// `namespace.json` as written: the fields plus the directory name they hash to.
#[derive(Serialize)]
struct NamespaceDocument<'a> {
    #[serde(flatten)]
    fields: &'a NamespaceFields,
    dir_name: &'a str,
}

/// `namespace.json` as read back; the directory name is required but not trusted.
#[derive(Deserialize)]
struct ReadDocument {
    #[serde(flatten)]
    fields: NamespaceFields,
    #[serde(rename = "dir_name")]
    _dir_name: String,
}

impl Namespace {
    /// The `namespace.json` text: every field, plus the directory name.
    pub fn to_json(&self) -> String {
        let document = NamespaceDocument {
            fields: self.fields(),
            dir_name: self.dir_name(),
        };
        // Serializing string maps and sets to JSON cannot fail; fall back to the bare name
        // rather than panic if serde_json ever disagrees.
        serde_json::to_string_pretty(&document).unwrap_or_else(|_| self.dir_name().to_owned())
    }

    /// Reads a `namespace.json` text back. The directory name is recomputed from the fields,
    /// so a document edited by hand cannot claim another namespace's directory.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        let document: ReadDocument = serde_json::from_str(text)?;
        Ok(Self::from_fields(document.fields))
    }
}
