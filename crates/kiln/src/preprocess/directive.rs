//! Reading a directive line: its name, its arguments, and the quoted path of `#include`.

use std::ops::Range;

/// A directive line split into parts; spans are byte ranges of the comment-free line text.
#[derive(Debug)]
pub(crate) struct Directive<'a> {
    /// The name after `#` (letters, digits, `_`); empty for `#` alone or `# 12 ...`.
    pub name: &'a str,
    /// Everything after the name, leading whitespace skipped (trailing was trimmed already).
    pub args: &'a str,
    /// Where `args` starts.
    pub args_start: u32,
    /// From `#` to the end of the line.
    pub span: Range<u32>,
}

impl<'a> Directive<'a> {
    /// Splits a line whose first non-blank character is `#`.
    pub fn parse(line: &'a str) -> Self {
        let hash = line.len() - line.trim_start().len();
        let after_hash = &line[hash + 1..];
        let name_start = hash + 1 + (after_hash.len() - after_hash.trim_start().len());
        let name_len = line[name_start..]
            .bytes()
            .position(|b| !(b.is_ascii_alphanumeric() || b == b'_'))
            .unwrap_or(line.len() - name_start);
        let name_end = name_start + name_len;
        let rest = &line[name_end..];
        let args_start = name_end + (rest.len() - rest.trim_start().len());
        Directive {
            name: &line[name_start..name_end],
            args: &line[args_start..],
            args_start: to_u32(args_start),
            span: to_u32(hash)..to_u32(line.len()),
        }
    }

    /// The span of `args[range]` in the line.
    pub fn args_span(&self, range: Range<usize>) -> Range<u32> {
        self.args_start + to_u32(range.start)..self.args_start + to_u32(range.end)
    }

    /// The whole argument text's span (the directive's span when there are no arguments).
    pub fn all_args_span(&self) -> Range<u32> {
        if self.args.is_empty() {
            self.span.clone()
        } else {
            self.args_span(0..self.args.len())
        }
    }

    /// The `"path"` of an `#include`: the path and its span (quotes included), or a message.
    pub fn include_spec(&self) -> Result<(&'a str, Range<u32>), &'static str> {
        let args = self.args;
        if args.starts_with('<') {
            return Err("`#include <...>` is not supported; write `#include \"path\"` relative to this file");
        }
        let Some(quoted) = args.strip_prefix('"') else {
            return Err("expected a quoted path: `#include \"path\"`");
        };
        let Some(close) = quoted.find('"') else {
            return Err("missing closing `\"`");
        };
        if !quoted[close + 1..].trim().is_empty() {
            return Err("unexpected text after the path");
        }
        Ok((&quoted[..close], self.args_span(0..close + 2)))
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_name_and_arguments() {
        let d = Directive::parse("  #  define  X 1");
        assert_eq!(
            (d.name, d.args, d.args_start, d.span),
            ("define", "X 1", 13, 2..16)
        );
        let d = Directive::parse("#endif");
        assert_eq!((d.name, d.args), ("endif", ""));
        let d = Directive::parse("#");
        assert_eq!((d.name, d.args), ("", ""));
        let d = Directive::parse("#include \"a/b.wgsl\"");
        assert_eq!(d.include_spec(), Ok(("a/b.wgsl", 9..19)));
        assert!(Directive::parse("#include <a>").include_spec().is_err());
        assert!(Directive::parse("#include \"a\" b").include_spec().is_err());
        assert!(Directive::parse("#include a").include_spec().is_err());
    }
}
