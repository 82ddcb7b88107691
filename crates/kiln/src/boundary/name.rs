//! Names that become path components: `out/<shader>/<pass>/<keywords>.<ext>`.

use std::fmt;

/// Why a name was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameFault {
    /// The name is the empty string.
    Empty,
    /// The name holds a character that the key's text form reserves (`;` or `|`).
    Reserved(char),
    /// The name holds a whitespace character.
    Whitespace(char),
    /// The name holds a path separator (`/`, `\`), a drive colon (`:`) or NUL: it would not
    /// be one path component on every platform.
    PathSeparator(char),
    /// The name holds a control character.
    Control(char),
    /// The name starts with `.`: `.` and `..` name existing directories, and the output
    /// directory's hidden files (`.kiln-stat`, `.kiln-tmp-*`) are kiln's own.
    DotName,
    /// The name is `index.json`, the output directory's index.
    IndexName,
}

impl fmt::Display for NameFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameFault::Empty => f.write_str("it is empty"),
            NameFault::Reserved(c) => write!(f, "it holds the reserved character `{c}`"),
            NameFault::Whitespace(c) => write!(f, "it holds whitespace (U+{:04X})", u32::from(*c)),
            NameFault::PathSeparator(c) => write!(
                f,
                "it holds `/`, `\\`, `:` or NUL (U+{:04X}); names become single path components",
                u32::from(*c)
            ),
            NameFault::Control(c) => {
                write!(f, "it holds a control character (U+{:04X})", u32::from(*c))
            }
            NameFault::DotName => {
                f.write_str("it starts with `.` (`.`, `..` and kiln's hidden files in `out/`)")
            }
            NameFault::IndexName => f.write_str("`index.json` is the output directory's index"),
        }
    }
}

/// Checks a shader or pass name: it becomes one directory name under the output directory, and
/// part of the key's text form `shader|pass|keywords|revision`. Not empty, not starting with
/// `.` (so not `.`, `..` or one of kiln's hidden files), not `index.json`, no
/// `/`, `\`, `:` (a drive on Windows: `C:`), NUL or other control character, no `|` or `;`,
/// no whitespace.
pub fn check_name(name: &str) -> Result<(), NameFault> {
    if name.is_empty() {
        return Err(NameFault::Empty);
    }
    if name.starts_with('.') {
        return Err(NameFault::DotName);
    }
    if name == crate::base::INDEX_FILE {
        return Err(NameFault::IndexName);
    }
    for c in name.chars() {
        match c {
            '/' | '\\' | ':' | '\0' => return Err(NameFault::PathSeparator(c)),
            '|' | ';' => return Err(NameFault::Reserved(c)),
            c if c.is_whitespace() => return Err(NameFault::Whitespace(c)),
            c if c.is_control() => return Err(NameFault::Control(c)),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_like_names_are_refused() {
        for (name, fault) in [
            ("", NameFault::Empty),
            (".", NameFault::DotName),
            ("..", NameFault::DotName),
            (".kiln-stat", NameFault::DotName),
            ("...", NameFault::DotName),
            ("index.json", NameFault::IndexName),
            ("a/b", NameFault::PathSeparator('/')),
            ("a\\b", NameFault::PathSeparator('\\')),
            ("a\0b", NameFault::PathSeparator('\0')),
            ("C:", NameFault::PathSeparator(':')),
            ("a|b", NameFault::Reserved('|')),
            ("a;b", NameFault::Reserved(';')),
            ("a b", NameFault::Whitespace(' ')),
            ("a\u{7}b", NameFault::Control('\u{7}')),
        ] {
            assert_eq!(check_name(name), Err(fault), "{name:?}");
        }
    }

    #[test]
    fn ordinary_names_pass() {
        for name in [
            "Lit",
            "Forward",
            "shadow-map",
            "a.b",
            "index.json.x",
            "Ünïcode",
            "_",
        ] {
            assert_eq!(check_name(name), Ok(()), "{name:?}");
        }
    }
}
