//! The table of object-like macros and their substitution into code lines.
//!
//! Substitution works on identifiers (ASCII letters, digits, `_`; any non-ASCII byte counts as
//! part of an identifier, so a macro is never replaced inside a Unicode identifier) and skips
//! numeric literals (`1e5f`, `0x1Fu`). A replacement is rescanned for further macros, except
//! the ones being expanded (C's rule), so `#define A B` / `#define B 1` turns `A` into `1` and
//! a self-referencing macro stops.

use rustc_hash::FxHashMap;

use super::error::SourceLocation;

/// How deeply macro replacements may nest.
const MAX_EXPANSION_DEPTH: usize = 256;
/// How many bytes one line may grow by through expansion (`#define A B B`, `#define B C C`,
/// ... doubles per level).
const MAX_EXPANSION_GROWTH: usize = 1 << 20;

#[derive(Debug)]
struct Macro {
    value: Box<str>,
    defined_at: Option<SourceLocation>,
}

/// Defined macros, by name.
#[derive(Debug, Default)]
pub(crate) struct MacroTable {
    map: FxHashMap<Box<str>, Macro>,
    /// Which bytes some macro name (ever) started with; a cheap filter before hashing.
    first_bytes: [u64; 4],
    longest_name: usize,
}

/// A macro's expansion nested or grew past the limits.
#[derive(Debug)]
pub(crate) struct ExpansionTooLarge {
    pub name: String,
}

impl MacroTable {
    /// Defines `name` as `value` (whitespace runs collapsed). A redefinition with the same
    /// value is allowed; with a different one it returns the first definition's location
    /// (`None` when the build predefined it).
    pub fn define(
        &mut self,
        name: &str,
        value: &str,
        at: Option<SourceLocation>,
    ) -> Result<(), Option<SourceLocation>> {
        let value = collapse_whitespace(value);
        if let Some(existing) = self.map.get(name) {
            if *existing.value == *value {
                return Ok(());
            }
            return Err(existing.defined_at.clone());
        }
        if let Some(&first) = name.as_bytes().first() {
            self.first_bytes[usize::from(first >> 6)] |= 1 << (first & 63);
        }
        self.longest_name = self.longest_name.max(name.len());
        self.map.insert(
            name.into(),
            Macro {
                value: value.into_boxed_str(),
                defined_at: at,
            },
        );
        Ok(())
    }

    /// Removes `name`; undefining an undefined macro is not an error (as in C).
    pub fn undefine(&mut self, name: &str) {
        self.map.remove(name);
    }

    /// Whether `name` is defined.
    pub fn is_defined(&self, name: &str) -> bool {
        self.lookup(name).is_some()
    }

    /// The name (with the table's lifetime) and value of a defined macro.
    pub fn lookup(&self, name: &str) -> Option<(&str, &str)> {
        let first = *name.as_bytes().first()?;
        if name.len() > self.longest_name
            || self.first_bytes[usize::from(first >> 6)] & (1 << (first & 63)) == 0
        {
            return None;
        }
        self.map
            .get_key_value(name)
            .map(|(key, m)| (&**key, &*m.value))
    }

    /// Appends `line` to `out` with every macro substituted.
    pub fn expand_line(&self, line: &str, out: &mut String) -> Result<(), ExpansionTooLarge> {
        let mut active = Vec::new();
        let limit = out.len() + line.len() + MAX_EXPANSION_GROWTH;
        self.expand_into(line, out, &mut active, limit)
    }

    fn expand_into<'s>(
        &'s self,
        text: &str,
        out: &mut String,
        active: &mut Vec<&'s str>,
        limit: usize,
    ) -> Result<(), ExpansionTooLarge> {
        let bytes = text.as_bytes();
        let mut i = 0;
        let mut copied = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if is_ident_start(b) {
                let start = i;
                i += 1;
                while i < bytes.len() && is_ident_continue(bytes[i]) {
                    i += 1;
                }
                let Some((name, value)) = self.lookup(&text[start..i]) else {
                    continue;
                };
                if active.contains(&name) {
                    continue;
                }
                if active.len() >= MAX_EXPANSION_DEPTH || out.len() > limit {
                    return Err(ExpansionTooLarge {
                        name: name.to_owned(),
                    });
                }
                out.push_str(&text[copied..start]);
                active.push(name);
                self.expand_into(value, out, active, limit)?;
                active.pop();
                copied = i;
            } else if b.is_ascii_digit() {
                i += 1;
                while i < bytes.len() && (is_ident_continue(bytes[i]) || bytes[i] == b'.') {
                    i += 1;
                }
            } else {
                i += 1;
            }
        }
        out.push_str(&text[copied..]);
        Ok(())
    }
}

/// Whether `b` can start an identifier (non-ASCII bytes belong to identifiers).
pub(crate) fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

/// Whether `b` can continue an identifier.
pub(crate) fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// The length of the ASCII macro name at the start of `text` (0 if there is none).
pub(crate) fn macro_name_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    match bytes.first() {
        Some(b) if b.is_ascii_alphabetic() || *b == b'_' => bytes
            .iter()
            .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
            .unwrap_or(bytes.len()),
        _ => 0,
    }
}

/// Whether `name` as a whole is a valid macro name.
pub(crate) fn is_macro_name(name: &str) -> bool {
    !name.is_empty() && macro_name_len(name) == name.len()
}

fn collapse_whitespace(value: &str) -> String {
    let mut collapsed = String::with_capacity(value.len());
    for word in value.split_ascii_whitespace() {
        if !collapsed.is_empty() {
            collapsed.push(' ');
        }
        collapsed.push_str(word);
    }
    collapsed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(table: &MacroTable, line: &str) -> String {
        let mut out = String::new();
        table.expand_line(line, &mut out).unwrap();
        out
    }

    #[test]
    fn substitutes_whole_identifiers_only() {
        let mut table = MacroTable::default();
        table.define("FOG", "1", None).unwrap();
        table.define("N", "4", None).unwrap();
        assert_eq!(
            expand(&table, "FOG FOGGY _FOG FOG_ x.FOG 1FOG N2 (N)"),
            "1 FOGGY _FOG FOG_ x.1 1FOG N2 (4)"
        );
        assert_eq!(expand(&table, "éFOG FOGé"), "éFOG FOGé");
    }

    #[test]
    fn rescans_and_stops_at_self_reference() {
        let mut table = MacroTable::default();
        table.define("A", "B + A", None).unwrap();
        table.define("B", "C", None).unwrap();
        table.define("C", "A", None).unwrap();
        assert_eq!(expand(&table, "A;"), "A + A;");
    }

    #[test]
    fn refuses_exponential_growth() {
        let mut table = MacroTable::default();
        let names: Vec<String> = (0..40).map(|i| format!("M{i}")).collect();
        for pair in names.windows(2) {
            table
                .define(&pair[0], &format!("{} {}", pair[1], pair[1]), None)
                .unwrap();
        }
        let mut out = String::new();
        assert!(table.expand_line("M0", &mut out).is_err());
    }

    #[test]
    fn redefinition_must_match() {
        let mut table = MacroTable::default();
        table.define("X", "a  b", None).unwrap();
        assert_eq!(table.define("X", " a b ", None), Ok(()));
        assert_eq!(table.define("X", "c", None), Err(None));
        table.undefine("X");
        assert_eq!(table.define("X", "c", None), Ok(()));
    }
}
