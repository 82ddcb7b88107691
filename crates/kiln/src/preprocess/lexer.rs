//! Splitting one source file into its meaningful lines: comments removed, blank lines dropped,
//! trailing whitespace trimmed, each line tagged with its 1-based number.
//!
//! This is where comment edits stop mattering: a comment (`//` or `/* */`, also spanning
//! lines) becomes a single space, so editing its text, or adding or removing whole comment or
//! blank lines, changes no line that survives. `"..."` is read as a string (for
//! `#include "a//b"`); neither WGSL nor GLSL has string literals otherwise. `\r\n` and `\n`
//! endings read alike, and a leading UTF-8 byte-order mark is ignored.

use super::directive::Directive;
use super::error::{PreprocessError, SourceLocation};
use super::guard::{guard_macro, GuardFinder, IncludeGuard};
use super::loader::FileView;
use super::macros::Identifiers;

/// One surviving line of a file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LexLine {
    /// 1-based line number in the original file.
    pub number: u32,
    /// Whether the first non-blank character is `#`.
    pub directive: bool,
    start: u32,
    end: u32,
    cuts_start: u32,
    cuts_end: u32,
    identifiers_start: u32,
    identifiers_end: u32,
}

/// Where removed comments shifted the text: from `stripped` on, the line's text continues at
/// byte `original` of the original line. Kept only for error columns.
#[derive(Clone, Copy, Debug)]
struct Cut {
    stripped: u32,
    original: u32,
}

/// A file's surviving lines, their comment-free text held in one buffer.
#[derive(Debug, Default)]
pub(crate) struct LexedFile {
    text: String,
    lines: Vec<LexLine>,
    cuts: Vec<Cut>,
    /// Byte ranges of each code line's identifiers, found once so that every variant's
    /// macro substitution only looks at identifiers.
    identifiers: Vec<(u32, u32)>,
    /// Indices in `lines` of the directive lines.
    directives: Vec<u32>,
    guard: Option<IncludeGuard>,
}

impl LexedFile {
    /// Lexes `source`; `file` (root-relative) only names the file in errors.
    pub fn lex(file: &str, source: &str) -> Result<Self, PreprocessError> {
        let source = source.strip_prefix('\u{feff}').unwrap_or(source);
        let mut lexed = LexedFile {
            text: String::with_capacity(source.len()),
            lines: Vec::new(),
            cuts: Vec::new(),
            identifiers: Vec::new(),
            directives: Vec::new(),
            guard: None,
        };
        // Where an open block comment started: (line, column).
        let mut open_comment: Option<(u32, u32)> = None;
        for (index, raw) in source.split('\n').enumerate() {
            let number = u32::try_from(index + 1).unwrap_or(u32::MAX);
            let raw = raw.strip_suffix('\r').unwrap_or(raw);
            open_comment = lexed.lex_line(number, raw, open_comment);
        }
        if let Some((line, column)) = open_comment {
            return Err(PreprocessError::UnterminatedComment {
                at: SourceLocation {
                    file: file.into(),
                    line,
                    columns: column..column + 2,
                },
            });
        }
        lexed.directives = (0..lexed.lines.len())
            .filter(|&i| lexed.lines[i].directive)
            .map(to_u32)
            .collect();
        lexed.guard = lexed.find_guard();
        Ok(lexed)
    }

    /// Appends one physical line; returns the block comment still open after it, if any.
    fn lex_line(
        &mut self,
        number: u32,
        raw: &str,
        mut open_comment: Option<(u32, u32)>,
    ) -> Option<(u32, u32)> {
        let bytes = raw.as_bytes();
        let start = self.text.len();
        let cuts_start = self.cuts.len();
        let mut i = 0;
        let mut run_start = 0;
        if open_comment.is_some() {
            match raw.find("*/") {
                Some(close) => {
                    open_comment = None;
                    i = close + 2;
                    run_start = i;
                    self.text.push(' ');
                    self.cut(start, i);
                }
                None => return open_comment,
            }
        }
        while i < bytes.len() {
            // Only `/` and `"` can start a comment or a string.
            match bytes[i..].iter().position(|&b| b == b'/' || b == b'"') {
                Some(skip) => i += skip,
                None => break,
            }
            match bytes[i] {
                b'/' if bytes.get(i + 1) == Some(&b'/') => {
                    self.text.push_str(&raw[run_start..i]);
                    run_start = bytes.len();
                    break;
                }
                b'/' if bytes.get(i + 1) == Some(&b'*') => {
                    self.text.push_str(&raw[run_start..i]);
                    self.text.push(' ');
                    match raw[i + 2..].find("*/") {
                        Some(close) => {
                            i = i + 2 + close + 2;
                            run_start = i;
                            self.cut(start, i);
                        }
                        None => {
                            open_comment = Some((number, u32::try_from(i).unwrap_or(u32::MAX)));
                            run_start = bytes.len();
                            break;
                        }
                    }
                }
                b'"' => {
                    i = match raw[i + 1..].find('"') {
                        Some(close) => i + 1 + close + 1,
                        None => bytes.len(),
                    };
                }
                _ => i += 1,
            }
        }
        if run_start < bytes.len() {
            self.text.push_str(&raw[run_start..]);
        }
        let kept = self.text[start..].trim_end().len();
        self.text.truncate(start + kept);
        let first = self.text.as_bytes()[start..]
            .iter()
            .find(|b| !b.is_ascii_whitespace());
        match first {
            None => {
                self.text.truncate(start);
                self.cuts.truncate(cuts_start);
            }
            Some(&first) => {
                let directive = first == b'#';
                let identifiers_start = self.identifiers.len();
                if !directive {
                    let text = &self.text[start..];
                    self.identifiers
                        .extend(Identifiers::new(text).map(|r| (to_u32(r.start), to_u32(r.end))));
                }
                self.lines.push(LexLine {
                    number,
                    directive,
                    start: to_u32(start),
                    end: to_u32(self.text.len()),
                    cuts_start: to_u32(cuts_start),
                    cuts_end: to_u32(self.cuts.len()),
                    identifiers_start: to_u32(identifiers_start),
                    identifiers_end: to_u32(self.identifiers.len()),
                });
            }
        }
        open_comment
    }

    fn cut(&mut self, line_start: usize, original: usize) {
        self.cuts.push(Cut {
            stripped: to_u32(self.text.len() - line_start),
            original: to_u32(original),
        });
    }

    fn find_guard(&self) -> Option<IncludeGuard> {
        let mut finder = GuardFinder::new();
        for line in &self.lines {
            if !line.directive {
                finder.code();
                continue;
            }
            let directive = Directive::parse(self.text(line));
            finder.directive(directive.name, !directive.args.is_empty(), || {
                let words = words(directive.args);
                guard_macro(directive.name, &words)
            });
        }
        finder.finish()
    }

    /// The indices in [`Self::lines`] of the directive lines.
    pub fn directive_indices(&self) -> &[u32] {
        &self.directives
    }

    /// The file's include guard, if it has one (see [`super::guard`]).
    pub fn guard(&self) -> Option<&IncludeGuard> {
        self.guard.as_ref()
    }

    /// The surviving lines, in file order.
    pub fn lines(&self) -> &[LexLine] {
        &self.lines
    }

    /// A line's comment-free text, trailing whitespace trimmed, never blank.
    pub fn text(&self, line: &LexLine) -> &str {
        &self.text[line.start as usize..line.end as usize]
    }

    /// The byte ranges (within [`Self::text`]) of a code line's identifiers; empty for
    /// directives.
    pub fn identifiers(&self, line: &LexLine) -> &[(u32, u32)] {
        &self.identifiers[line.identifiers_start as usize..line.identifiers_end as usize]
    }

    /// A hash of the part of this file `view` names (see [`FileView`]): each directive line
    /// and each code line of an active block, with its number, text and comment cuts (which
    /// give error columns). Equal hashes for the same view mean a run that depends only on
    /// that part gives the same output; lines of inactive blocks are not hashed.
    pub fn view_hash(&self, view: &FileView) -> [u8; 32] {
        view.hash(
            b"kiln file view 1",
            &self.lines,
            |line| line.directive,
            |hasher, line| {
                let text = self.text(line);
                hasher.update(&line.number.to_le_bytes());
                hasher.update(&(text.len() as u64).to_le_bytes());
                hasher.update(text.as_bytes());
                let cuts = &self.cuts[line.cuts_start as usize..line.cuts_end as usize];
                hasher.update(&(cuts.len() as u64).to_le_bytes());
                for cut in cuts {
                    hasher.update(&cut.stripped.to_le_bytes());
                    hasher.update(&cut.original.to_le_bytes());
                }
            },
        )
    }

    /// Maps a byte column of a line's comment-free text to the column in the original line.
    pub fn original_column(&self, line: &LexLine, stripped: u32) -> u32 {
        let cuts = &self.cuts[line.cuts_start as usize..line.cuts_end as usize];
        match cuts.iter().rev().find(|cut| cut.stripped <= stripped) {
            Some(cut) => cut.original + (stripped - cut.stripped),
            None => stripped,
        }
    }
}

/// A directive's arguments as identifiers and single punctuation characters.
fn words(args: &str) -> Vec<&str> {
    let bytes = args.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
        } else {
            i += args[i..].chars().next().map_or(1, char::len_utf8);
        }
        words.push(&args[start..i]);
    }
    words
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(source: &str) -> Vec<(u32, String)> {
        let lexed = LexedFile::lex("t.wgsl", source).unwrap();
        lexed
            .lines()
            .iter()
            .map(|l| (l.number, lexed.text(l).to_owned()))
            .collect()
    }

    #[test]
    fn strips_comments_and_blank_lines() {
        let src = "a // c\r\n\n  /* x\n y */ b /* z */ c  \n// only\n#define X \"a//b\" // c\n";
        assert_eq!(
            lines(src),
            vec![
                (1, "a".to_owned()),
                (4, "  b   c".to_owned()),
                (6, "#define X \"a//b\"".to_owned()),
            ]
        );
    }

    #[test]
    fn maps_columns_past_removed_comments() {
        let lexed = LexedFile::lex("t", "/* long comment */ #bad").unwrap();
        let line = lexed.lines()[0];
        assert!(line.directive);
        let text = lexed.text(&line);
        let hash = u32::try_from(text.find('#').unwrap()).unwrap();
        assert_eq!(lexed.original_column(&line, hash), 19);
    }

    #[test]
    fn reports_unterminated_block_comments() {
        let err = LexedFile::lex("t.wgsl", "a\n  /* open\nb").unwrap_err();
        assert_eq!(
            err.location().map(|at| (at.line, at.columns.clone())),
            Some((2, 2..4))
        );
    }
}
