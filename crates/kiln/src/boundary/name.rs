//! Names that become path components: `out/<shader>/<pass>/<keywords>.<ext>`.

// The validator and its faults are kiln-runtime's: the engine's lookup refuses exactly the
// names kiln refuses (one definition of the rule, not a copy).
pub use kiln_runtime::canon::{check_name, NameFault};

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
