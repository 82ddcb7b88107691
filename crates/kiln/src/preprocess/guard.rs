//! Include guards, found once per lexed file, so that a guarded header included again is
//! skipped without being scanned (GCC's multiple-include optimization).
//!
//! A file is guarded when its first line is `#ifndef X` (or `#if !defined(X)`,
//! `#if !defined X`), the group it opens has no `#elif` or `#else`, and its `#endif` is the
//! last line. While `X` is defined, entering such a file would skip every line of it, so
//! not entering it gives the same text, line map and errors: the only errors a skipped
//! group can raise are in the nesting of its conditionals (`#else` after `#else`, `#elif`
//! after `#else`, text after `#else` or `#endif`), and a file with one of those is not
//! taken as guarded.
//! Without this, a header that includes the next one twice still costs a scan of each
//! re-inclusion, and only the scan's cost stands between a deep include graph and
//! exponential work.

/// A file's include guard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IncludeGuard {
    /// The macro that, while defined, makes the whole file a skipped group.
    pub name: Box<str>,
    /// The block after the closing `#endif` (the file's directive count): a run that skips
    /// the file still marks it, with block 0, in the file's view, as entering it would,
    /// so that a line added before `#ifndef` or after `#endif` is seen.
    pub last_block: usize,
}

#[derive(Debug)]
enum State {
    Start,
    /// Inside the guard's group: for each open conditional, whether its `#else` was seen.
    Open {
        in_else: Vec<bool>,
    },
    Closed,
    NotGuarded,
}

/// Reads a file's lines in order and says whether it is guarded.
#[derive(Debug)]
pub(crate) struct GuardFinder {
    state: State,
    name: Option<Box<str>>,
    directives: usize,
}

impl GuardFinder {
    pub fn new() -> Self {
        Self {
            state: State::Start,
            name: None,
            directives: 0,
        }
    }

    /// A line that is not a directive.
    pub fn code(&mut self) {
        if !matches!(self.state, State::Open { .. }) {
            self.state = State::NotGuarded;
        }
    }

    /// A directive named `name`, with text after its name when `args`; `guard_name` reads
    /// the macro of an `#ifndef X` or `#if !defined(X)` line (`None` for any other form).
    pub fn directive<'a>(
        &mut self,
        name: &str,
        args: bool,
        guard_name: impl FnOnce() -> Option<&'a str>,
    ) {
        self.directives += 1;
        self.state = match std::mem::replace(&mut self.state, State::NotGuarded) {
            State::Start => match (name, guard_name()) {
                ("ifndef" | "if", Some(macro_name)) => {
                    self.name = Some(macro_name.into());
                    State::Open {
                        in_else: vec![false],
                    }
                }
                _ => State::NotGuarded,
            },
            State::Open { mut in_else } => {
                let depth = in_else.len();
                let after_else = in_else.last().copied().unwrap_or(true);
                match name {
                    "if" | "ifdef" | "ifndef" => {
                        in_else.push(false);
                        State::Open { in_else }
                    }
                    // The guard's own group has one branch; any group's branches must be
                    // well formed even where skipped.
                    "elif" | "else" if depth == 1 || after_else => State::NotGuarded,
                    "else" if args => State::NotGuarded,
                    "else" => {
                        in_else.pop();
                        in_else.push(true);
                        State::Open { in_else }
                    }
                    "endif" if args => State::NotGuarded,
                    "endif" if depth == 1 => State::Closed,
                    "endif" => {
                        in_else.pop();
                        State::Open { in_else }
                    }
                    _ => State::Open { in_else },
                }
            }
            State::Closed | State::NotGuarded => State::NotGuarded,
        };
    }

    pub fn finish(self) -> Option<IncludeGuard> {
        match self.state {
            State::Closed => self.name.map(|name| IncludeGuard {
                name,
                last_block: self.directives,
            }),
            _ => None,
        }
    }
}

/// The macro of a guard condition given as words (identifiers and punctuators, white space
/// dropped): `X` after `#ifndef`, `! defined ( X )` or `! defined X` after `#if`.
pub(crate) fn guard_macro<'a>(directive: &str, words: &[&'a str]) -> Option<&'a str> {
    let name = match (directive, words) {
        ("ifndef", [name]) => name,
        ("if", ["!", "defined", "(", name, ")"] | ["!", "defined", name]) => name,
        _ => return None,
    };
    let is_name = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    (is_name && *name != "defined").then_some(*name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `lines`: `#name words...` for a directive, anything else for code.
    fn find(lines: &[&str]) -> Option<(String, usize)> {
        let mut finder = GuardFinder::new();
        for line in lines {
            match line.strip_prefix('#') {
                Some(rest) => {
                    let mut parts = rest.split_whitespace();
                    let name = parts.next().unwrap_or("");
                    let words: Vec<&str> = parts.collect();
                    finder.directive(name, !words.is_empty(), || guard_macro(name, &words));
                }
                None => finder.code(),
            }
        }
        finder
            .finish()
            .map(|guard| (guard.name.into(), guard.last_block))
    }

    #[test]
    fn a_guard_wraps_the_whole_file() {
        let guarded = ["#ifndef H", "#define H", "#include x", "code", "#endif"];
        assert_eq!(find(&guarded), Some(("H".into(), 4)));
        let nested = [
            "#if ! defined ( H )",
            "#ifdef A",
            "#else",
            "#endif",
            "#endif",
        ];
        assert_eq!(find(&nested), Some(("H".into(), 5)));
        assert_eq!(find(&["#if ! defined H", "#endif"]), Some(("H".into(), 2)));
    }

    #[test]
    fn anything_outside_the_group_or_an_else_is_no_guard() {
        assert_eq!(find(&["code", "#ifndef H", "#endif"]), None);
        assert_eq!(find(&["#ifndef H", "#endif", "code"]), None);
        assert_eq!(find(&["#ifndef H", "#endif", "#define X"]), None);
        assert_eq!(find(&["#ifndef H", "#else", "#endif"]), None);
        assert_eq!(find(&["#ifndef H", "#elif 1", "#endif"]), None);
        assert_eq!(find(&["#ifndef H", "code"]), None);
        assert_eq!(find(&["#ifdef H", "#endif"]), None);
        assert_eq!(find(&["#if !defined(H) && 1", "#endif"]), None);
        assert_eq!(find(&["#ifndef H extra", "#endif"]), None);
        assert_eq!(find(&["#ifndef 1H", "#endif"]), None);
        // What a skipped group still checks: such a file is entered, to report it.
        assert_eq!(
            find(&["#ifndef H", "#if A", "#else", "#else", "#endif", "#endif"]),
            None
        );
        assert_eq!(
            find(&["#ifndef H", "#if A", "#else", "#elif B", "#endif", "#endif"]),
            None
        );
        assert_eq!(find(&["#ifndef H", "#if A", "#endif junk", "#endif"]), None);
        assert_eq!(
            find(&["#ifndef H", "#if A", "#else junk", "#endif", "#endif"]),
            None
        );
        assert_eq!(find(&["#ifndef H", "#endif junk"]), None);
        assert_eq!(find(&[]), None);
    }
}
