//! The table of object-like macros and their substitution into code lines.
//!
//! Substitution works on identifiers (ASCII letters, digits, `_`; any non-ASCII byte counts as
//! part of an identifier, so a macro is never replaced inside a Unicode identifier) and skips
//! numeric literals (`1e5f`, `0x1Fu`). A replacement is rescanned for further macros, except
//! the ones being expanded (C's rule), so `#define A B` / `#define B 1` turns `A` into `1` and
//! a self-referencing macro stops.

use rustc_hash::FxHashMap;

use std::ops::Range;

/// How deeply macro replacements may nest.
const MAX_EXPANSION_DEPTH: usize = 256;
/// How many bytes one line may grow by through expansion (`#define A B B`, `#define B C C`,
/// ... doubles per level).
const MAX_EXPANSION_GROWTH: usize = 1 << 20;

/// Where a `#define` is, compactly (the run turns it into a `SourceLocation` on error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MacroOrigin {
    /// The run's index of the file.
    pub file: u32,
    /// 1-based line.
    pub line: u32,
    /// Byte columns of the name in the original line.
    pub columns: Range<u32>,
}

#[derive(Debug)]
struct Macro {
    value: Box<str>,
    defined_at: Option<MacroOrigin>,
}

/// Defined macros, by name.
#[derive(Debug, Default)]
pub(crate) struct MacroTable {
    map: FxHashMap<Box<str>, Macro>,
    /// Which bytes some macro name (ever) started with; a cheap filter before hashing.
    first_bytes: [u64; 4],
    longest_name: usize,
}

/// Why a line's expansion stopped.
#[derive(Debug)]
pub(crate) enum ExpansionTooLarge {
    /// A macro nested too deeply, or grew its line by more than the per-line limit.
    Macro { name: String },
    /// The output would pass the run's budget.
    Budget,
}

impl MacroTable {
    /// Defines `name` as `value` (whitespace runs collapsed). A redefinition with the same
    /// value is allowed; with a different one it returns the first definition's location
    /// (`None` when the build predefined it).
    pub fn define(
        &mut self,
        name: &str,
        value: &str,
        at: Option<MacroOrigin>,
    ) -> Result<(), Option<MacroOrigin>> {
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

    /// Whether some macro name starts with `first` (a filter: most identifiers are not macros).
    #[inline]
    fn may_start_a_name(&self, first: u8) -> bool {
        self.first_bytes[usize::from(first >> 6)] & (1 << (first & 63)) != 0
    }

    /// The name (with the table's lifetime) and value of a defined macro.
    pub fn lookup(&self, name: &str) -> Option<(&str, &str)> {
        let first = *name.as_bytes().first()?;
        if name.len() > self.longest_name || !self.may_start_a_name(first) {
            return None;
        }
        self.map
            .get_key_value(name)
            .map(|(key, m)| (&**key, &*m.value))
    }

    /// Appends `line` to `out` with every macro substituted; `identifiers` are the byte
    /// ranges of `line`'s identifiers (from [`Identifiers`], computed once per file). `out`
    /// never grows past `max_len` (the run's output budget): each piece is checked before
    /// it is copied, so a huge expansion fails before its memory is taken.
    pub fn expand_line(
        &self,
        line: &str,
        identifiers: &[(u32, u32)],
        out: &mut String,
        max_len: usize,
    ) -> Result<(), ExpansionTooLarge> {
        let mut active = Vec::new();
        let limits = Limits {
            growth: out
                .len()
                .saturating_add(line.len())
                .saturating_add(MAX_EXPANSION_GROWTH),
            budget: max_len,
        };
        let spans = identifiers
            .iter()
            .map(|&(start, end)| start as usize..end as usize);
        self.expand_into(line, spans, out, &mut active, &limits)
    }

    fn expand_into<'s>(
        &'s self,
        text: &str,
        identifiers: impl Iterator<Item = Range<usize>>,
        out: &mut String,
        active: &mut Vec<&'s str>,
        limits: &Limits,
    ) -> Result<(), ExpansionTooLarge> {
        let mut copied = 0;
        for span in identifiers {
            if !self.may_start_a_name(text.as_bytes()[span.start]) {
                continue;
            }
            let Some((name, value)) = self.lookup(&text[span.clone()]) else {
                continue;
            };
            if active.contains(&name) {
                continue;
            }
            if active.len() >= MAX_EXPANSION_DEPTH || out.len() > limits.growth {
                return Err(ExpansionTooLarge::Macro {
                    name: name.to_owned(),
                });
            }
            limits.push(out, &text[copied..span.start])?;
            active.push(name);
            self.expand_into(value, Identifiers::new(value), out, active, limits)?;
            active.pop();
            copied = span.end;
        }
        limits.push(out, &text[copied..])
    }
}

/// How long the output may get while one line expands.
struct Limits {
    /// The per-line growth limit (reported as the macro being too large).
    growth: usize,
    /// The run's output budget.
    budget: usize,
}

impl Limits {
    fn push(&self, out: &mut String, piece: &str) -> Result<(), ExpansionTooLarge> {
        if out.len().saturating_add(piece.len()) > self.budget {
            return Err(ExpansionTooLarge::Budget);
        }
        out.push_str(piece);
        Ok(())
    }
}

/// The byte ranges of the identifiers in a text, numeric literals (`1e5f`, `0x1Fu`) skipped.
pub(crate) struct Identifiers<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Identifiers<'a> {
    pub fn new(text: &'a str) -> Self {
        Self {
            bytes: text.as_bytes(),
            pos: 0,
        }
    }
}

impl Iterator for Identifiers<'_> {
    type Item = Range<usize>;

    fn next(&mut self) -> Option<Range<usize>> {
        let bytes = self.bytes;
        let mut i = self.pos;
        while i < bytes.len() {
            let class = byte_class(bytes[i]);
            if class & (IDENT_START | DIGIT) == 0 {
                i += 1;
                continue;
            }
            let start = i;
            i += 1;
            // A numeric literal runs on through letters and dots (`1.5e3f`, `0x1Fu`).
            let continues = if class == DIGIT {
                IDENT_START | DIGIT | DOT
            } else {
                IDENT_START | DIGIT
            };
            while i < bytes.len() && byte_class(bytes[i]) & continues != 0 {
                i += 1;
            }
            if class == IDENT_START {
                self.pos = i;
                return Some(start..i);
            }
        }
        self.pos = i;
        None
    }
}

const IDENT_START: u8 = 1;
const DIGIT: u8 = 2;
const DOT: u8 = 4;

/// Byte classes for scanning, one table lookup per byte.
static BYTE_CLASSES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        table[b] = if byte.is_ascii_alphabetic() || byte == b'_' || byte >= 0x80 {
            IDENT_START
        } else if byte.is_ascii_digit() {
            DIGIT
        } else if byte == b'.' {
            DOT
        } else {
            0
        };
        b += 1;
    }
    table
};

fn byte_class(b: u8) -> u8 {
    BYTE_CLASSES[usize::from(b)]
}

/// Whether `b` can start an identifier (non-ASCII bytes belong to identifiers).
pub(crate) fn is_ident_start(b: u8) -> bool {
    byte_class(b) == IDENT_START
}

/// Whether `b` can continue an identifier.
pub(crate) fn is_ident_continue(b: u8) -> bool {
    byte_class(b) & (IDENT_START | DIGIT) != 0
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

    fn spans(line: &str) -> Vec<(u32, u32)> {
        Identifiers::new(line)
            .map(|r| (r.start as u32, r.end as u32))
            .collect()
    }

    fn expand(table: &MacroTable, line: &str) -> String {
        let mut out = String::new();
        table
            .expand_line(line, &spans(line), &mut out, usize::MAX)
            .unwrap();
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
        assert!(matches!(
            table.expand_line("M0", &spans("M0"), &mut out, usize::MAX),
            Err(ExpansionTooLarge::Macro { .. })
        ));
    }

    #[test]
    fn the_output_budget_is_checked_before_each_piece_is_copied() {
        let mut table = MacroTable::default();
        table.define("BIG", &"x".repeat(1000), None).unwrap();
        let mut out = "a".repeat(100);
        let line = "BIG BIG";
        let result = table.expand_line(line, &spans(line), &mut out, 1500);
        assert!(matches!(result, Err(ExpansionTooLarge::Budget)));
        assert!(out.len() <= 1500, "{}", out.len());
        let mut out = String::new();
        table
            .expand_line("BIG", &spans("BIG"), &mut out, 1000)
            .unwrap();
        assert_eq!(out.len(), 1000);
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
