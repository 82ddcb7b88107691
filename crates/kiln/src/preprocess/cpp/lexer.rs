//! C preprocessing tokens of one file, grouped into logical lines.
//!
//! The translation phases of C (and of the GLSL and HLSL preprocessors, which follow them):
//! a backslash-newline is removed first (so it can continue a directive, a comment or even a
//! token), then every comment becomes one space (a block comment may span lines: the logical
//! line goes on), then the text is split into preprocessing tokens. Each token remembers
//! whether whitespace or a comment preceded it, so that comment edits never change the
//! output, and the physical line and column where it starts, for the line map and errors.

use std::ops::Range;
use std::sync::Arc;

use crate::preprocess::error::{PreprocessError, SourceLocation};
use crate::preprocess::guard::{guard_macro, GuardFinder, IncludeGuard};
use crate::preprocess::loader::FileView;

/// What a preprocessing token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `[A-Za-z_][A-Za-z0-9_]*`.
    Ident,
    /// A preprocessing number: a digit (or `.` and a digit), then letters, digits, `_`, `.`
    /// and exponent signs (`1.5e-3f`, `0x1Fu`).
    Number,
    /// An operator or punctuator (`+`, `<<=`, `##`, `(`).
    Punct,
    /// `"..."` (HLSL strings, `#include "x"`, `__FILE__`).
    Str,
    /// Any other character (`@`, `'`, `\`, a non-ASCII character).
    Other,
}

/// One preprocessing token.
#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub kind: Kind,
    pub text: Arc<str>,
    /// Whitespace or a comment came before it on its logical line.
    pub space: bool,
    /// 1-based physical line where it starts (of its file; for a token of a macro's
    /// replacement list, of the `#define`).
    pub line: u32,
    /// 0-based byte column where it starts in that physical line.
    pub column: u32,
    /// It came from a macro's replacement list rather than from the text being expanded.
    pub from_body: bool,
}

impl Token {
    /// A token made by the preprocessor (`__LINE__`'s value, a pasted token).
    pub fn made(kind: Kind, text: impl Into<Arc<str>>, like: &Token) -> Token {
        Token {
            kind,
            text: text.into(),
            space: like.space,
            line: like.line,
            column: like.column,
            from_body: like.from_body,
        }
    }

    /// Whether this is the punctuator `p`.
    pub fn is_punct(&self, p: &str) -> bool {
        self.kind == Kind::Punct && &*self.text == p
    }

    /// The byte columns it covers on its line (a token continued over a backslash-newline
    /// is reported by its start).
    pub fn columns(&self) -> Range<u32> {
        let len = u32::try_from(self.text.len()).unwrap_or(u32::MAX);
        self.column..self.column.saturating_add(len.max(1))
    }
}

/// A logical line: its tokens, and the physical lines it spans.
#[derive(Clone, Debug)]
pub(crate) struct LogicalLine {
    /// The first token is `#`.
    pub directive: bool,
    /// The physical line holding the newline that ends it.
    pub last_line: u32,
    tokens: Range<u32>,
    /// Byte range of the line in the spliced text (for `#include <a/b.glsl>`).
    spliced: Range<u32>,
    /// Byte offset in the spliced text of each token, parallel to `tokens`.
    offsets: Range<u32>,
}

/// A file's logical lines (blank ones dropped) and their tokens.
#[derive(Debug, Default)]
pub(crate) struct CLexed {
    tokens: Vec<Token>,
    offsets: Vec<u32>,
    lines: Vec<LogicalLine>,
    spliced: String,
    /// Indices in `lines` of the directive lines.
    directives: Vec<u32>,
    guard: Option<IncludeGuard>,
}

impl CLexed {
    /// The non-blank logical lines, in order.
    pub fn lines(&self) -> &[LogicalLine] {
        &self.lines
    }

    /// A line's tokens.
    pub fn tokens(&self, line: &LogicalLine) -> &[Token] {
        &self.tokens[line.tokens.start as usize..line.tokens.end as usize]
    }

    /// The spliced source text between two tokens of `line` (exclusive of both), comments
    /// included: the path of `#include <...>`.
    pub fn text_between(&self, line: &LogicalLine, first: usize, last: usize) -> &str {
        let offsets = &self.offsets[line.offsets.start as usize..line.offsets.end as usize];
        let (Some(&a), Some(&b)) = (offsets.get(first), offsets.get(last)) else {
            return "";
        };
        let start = a as usize + 1;
        let end = (b as usize).min(line.spliced.end as usize);
        self.spliced.get(start..end).unwrap_or("")
    }

    /// A hash of the part of this file `view` names (see [`FileView`]): each directive line
    /// and each code line of an active block, with everything the driver reads of it (its
    /// spliced text, its tokens with their positions). Lines of inactive blocks are not
    /// hashed.
    pub fn view_hash(&self, view: &FileView) -> [u8; 32] {
        view.hash(
            b"kiln c file view 1",
            &self.lines,
            |line| line.directive,
            |hasher, line| {
                hasher.update(&line.last_line.to_le_bytes());
                let spliced = self
                    .spliced
                    .get(line.spliced.start as usize..line.spliced.end as usize)
                    .unwrap_or("");
                hasher.update(&(spliced.len() as u64).to_le_bytes());
                hasher.update(spliced.as_bytes());
                let offsets = self
                    .offsets
                    .get(line.offsets.start as usize..line.offsets.end as usize)
                    .unwrap_or(&[]);
                let tokens = self.tokens(line);
                for (token, offset) in tokens.iter().zip(offsets) {
                    hasher.update(&[
                        token.kind as u8,
                        u8::from(token.space),
                        u8::from(token.from_body),
                    ]);
                    hasher.update(&token.line.to_le_bytes());
                    hasher.update(&token.column.to_le_bytes());
                    // Within the line: a longer line before it moves every later offset.
                    hasher.update(&offset.wrapping_sub(line.spliced.start).to_le_bytes());
                    hasher.update(&(token.text.len() as u64).to_le_bytes());
                    hasher.update(token.text.as_bytes());
                }
                hasher.update(&(tokens.len() as u64).to_le_bytes());
            },
        )
    }

    /// Lexes `source`; `file` (root-relative) only names the file in errors.
    pub fn lex(file: &str, source: &str) -> Result<Self, PreprocessError> {
        let source = source.strip_prefix('\u{feff}').unwrap_or(source);
        let (spliced, line_starts) = splice(source);
        let mut lexed = CLexed {
            spliced: String::new(),
            ..CLexed::default()
        };
        let bytes = spliced.as_bytes();
        let position = |offset: usize| -> (u32, u32) {
            let offset = to_u32(offset);
            let index = line_starts.partition_point(|&start| start <= offset);
            let line = index.max(1);
            (to_u32(line), offset - line_starts[line - 1])
        };
        let mut i = 0;
        let mut space = false;
        let mut line_start = 0usize;
        let mut first_token = lexed.tokens.len();
        while i <= bytes.len() {
            let Some(&b) = bytes.get(i) else {
                lexed.end_line(first_token, line_start, i, position(i).0);
                break;
            };
            match b {
                b'\n' => {
                    lexed.end_line(first_token, line_start, i, position(i).0);
                    first_token = lexed.tokens.len();
                    line_start = i + 1;
                    space = false;
                    i += 1;
                    continue;
                }
                b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c' => {
                    space = true;
                    i += 1;
                    continue;
                }
                b'/' if bytes.get(i + 1) == Some(&b'/') => {
                    i = spliced[i..].find('\n').map_or(bytes.len(), |n| i + n);
                    space = true;
                    continue;
                }
                b'/' if bytes.get(i + 1) == Some(&b'*') => {
                    match spliced[i + 2..].find("*/") {
                        Some(close) => i = i + 2 + close + 2,
                        None => {
                            let (line, column) = position(i);
                            return Err(PreprocessError::UnterminatedComment {
                                at: SourceLocation {
                                    file: file.into(),
                                    line,
                                    columns: column..column + 2,
                                },
                            });
                        }
                    }
                    space = true;
                    continue;
                }
                _ => {}
            }
            let start = i;
            let (kind, len) = token_at(&spliced[i..]);
            i += len;
            let (line, column) = position(start);
            lexed.tokens.push(Token {
                kind,
                text: spliced[start..i].into(),
                space,
                line,
                column,
                from_body: false,
            });
            lexed.offsets.push(to_u32(start));
            space = false;
        }
        lexed.spliced = spliced;
        lexed.directives = (0..lexed.lines.len())
            .filter(|&i| lexed.lines[i].directive)
            .map(to_u32)
            .collect();
        lexed.guard = lexed.find_guard();
        Ok(lexed)
    }

    fn find_guard(&self) -> Option<IncludeGuard> {
        let mut finder = GuardFinder::new();
        for line in &self.lines {
            if !line.directive {
                finder.code();
                continue;
            }
            let tokens = self.tokens(line);
            let name = match tokens.get(1) {
                Some(t) if t.kind == Kind::Ident => &*t.text,
                _ => "",
            };
            finder.directive(name, tokens.len() > 2, || {
                let words: Vec<&str> = tokens.iter().skip(2).map(|t| &*t.text).collect();
                guard_macro(name, &words)
            });
        }
        finder.finish()
    }

    /// The indices in [`Self::lines`] of the directive lines.
    pub fn directive_indices(&self) -> &[u32] {
        &self.directives
    }

    /// A logical line's length in the spliced text (comments included), as its view
    /// holds it.
    pub fn line_len(&self, line: &LogicalLine) -> usize {
        (line.spliced.end - line.spliced.start) as usize
    }

    /// The file's include guard, if it has one (see [`crate::preprocess::guard`]).
    pub fn guard(&self) -> Option<&IncludeGuard> {
        self.guard.as_ref()
    }

    fn end_line(&mut self, first_token: usize, line_start: usize, end: usize, last_line: u32) {
        let Some(first) = self.tokens.get(first_token) else {
            return;
        };
        self.lines.push(LogicalLine {
            directive: first.is_punct("#"),
            last_line,
            tokens: to_u32(first_token)..to_u32(self.tokens.len()),
            spliced: to_u32(line_start)..to_u32(end),
            offsets: to_u32(first_token)..to_u32(self.offsets.len()),
        });
    }
}

/// Removes every backslash-newline; returns the spliced text and, for each physical line,
/// the offset in the spliced text where it starts. `\r\n` ends a line like `\n`.
fn splice(source: &str) -> (String, Vec<u32>) {
    let mut out = String::with_capacity(source.len());
    let mut starts = vec![0u32];
    let mut rest = source;
    while let Some(newline) = rest.find('\n') {
        let line = &rest[..newline];
        let line = line.strip_suffix('\r').unwrap_or(line);
        match line.strip_suffix('\\') {
            Some(continued) => out.push_str(continued),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
        starts.push(to_u32(out.len()));
        rest = &rest[newline + 1..];
    }
    out.push_str(rest);
    (out, starts)
}

/// The punctuators of GLSL and HLSL of more than one character, longest first.
const LONG_PUNCTUATORS: [&str; 25] = [
    "<<=", ">>=", "...", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "^^", "++", "--", "+=",
    "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##", "::", "->",
];

/// The kind and byte length of the token at the start of `text` (not whitespace, not a
/// comment, not empty).
pub(crate) fn token_at(text: &str) -> (Kind, usize) {
    let bytes = text.as_bytes();
    let b = bytes[0];
    if b.is_ascii_alphabetic() || b == b'_' {
        let len = bytes
            .iter()
            .position(|&c| !(c.is_ascii_alphanumeric() || c == b'_'))
            .unwrap_or(bytes.len());
        return (Kind::Ident, len);
    }
    if b.is_ascii_digit() || (b == b'.' && bytes.get(1).is_some_and(u8::is_ascii_digit)) {
        let hex = bytes.len() > 1 && b == b'0' && matches!(bytes[1], b'x' | b'X');
        let mut i = 1;
        while let Some(&c) = bytes.get(i) {
            let exponent_sign = (c == b'+' || c == b'-')
                && !hex
                && matches!(bytes[i - 1], b'e' | b'E')
                && bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
            if !(c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || exponent_sign) {
                break;
            }
            i += 1;
        }
        return (Kind::Number, i);
    }
    if b == b'"' {
        // A string ends on its line; an unterminated `"` is a character of its own.
        if let Some(close) = text[1..]
            .find(['"', '\n'])
            .filter(|&c| bytes[1 + c] == b'"')
        {
            return (Kind::Str, close + 2);
        }
        return (Kind::Other, 1);
    }
    if let Some(p) = LONG_PUNCTUATORS.iter().find(|p| text.starts_with(**p)) {
        return (Kind::Punct, p.len());
    }
    if b"!%&*+-./:;<=>?^|~()[]{},#".contains(&b) {
        return (Kind::Punct, 1);
    }
    let len = text.chars().next().map_or(1, char::len_utf8);
    (Kind::Other, len)
}

/// Whether writing `next` right after `previous` would lex as something else (`+` `+` as
/// `++`, `a` `b` as `ab`), so that a space must separate them.
pub(crate) fn would_merge(previous: &str, next: &str) -> bool {
    if previous.is_empty() || next.is_empty() {
        return false;
    }
    let joined = format!("{previous}{next}");
    token_at(&joined).1 != previous.len()
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(source: &str) -> Vec<(u32, u32, bool, Vec<String>)> {
        let lexed = CLexed::lex("t.frag", source).unwrap();
        lexed
            .lines()
            .iter()
            .map(|l| {
                (
                    lexed.tokens(l)[0].line,
                    l.last_line,
                    l.directive,
                    lexed.tokens(l).iter().map(|t| t.text.to_string()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn splices_continuations_before_comments_and_tokens() {
        let src =
            "#define X 1 \\\n + 2 // c \\\n still comment\nfl\\\noat y = .5e-3f; /* a\n b */ z\n";
        assert_eq!(
            lines(src),
            vec![
                (
                    1,
                    3,
                    true,
                    vec!["#", "define", "X", "1", "+", "2"]
                        .into_iter()
                        .map(String::from)
                        .collect()
                ),
                (
                    4,
                    6,
                    false,
                    vec!["float", "y", "=", ".5e-3f", ";", "z"]
                        .into_iter()
                        .map(String::from)
                        .collect()
                ),
            ]
        );
    }

    #[test]
    fn tokens_know_their_physical_position_and_spacing() {
        let lexed = CLexed::lex("t", "a/**/b  c\n\\\n  d<<=e").unwrap();
        let all: Vec<(String, bool, u32, u32)> = lexed
            .lines()
            .iter()
            .flat_map(|l| lexed.tokens(l).iter())
            .map(|t| (t.text.to_string(), t.space, t.line, t.column))
            .collect();
        assert_eq!(
            all,
            vec![
                ("a".into(), false, 1, 0),
                ("b".into(), true, 1, 5),
                ("c".into(), true, 1, 8),
                ("d".into(), true, 3, 2),
                ("<<=".into(), false, 3, 3),
                ("e".into(), false, 3, 6),
            ]
        );
    }

    #[test]
    fn merging_is_detected() {
        assert!(would_merge("+", "+"));
        assert!(would_merge("a", "b1"));
        assert!(would_merge("1", ".5"));
        assert!(!would_merge("a", "+"));
        assert!(!would_merge(")", "a"));
        assert!(would_merge("<", "<="));
    }

    #[test]
    fn unterminated_block_comment_is_located() {
        let err = CLexed::lex("t.frag", "a\n  /* open").unwrap_err();
        assert_eq!(err.location().map(|at| at.line), Some(2));
    }
}
