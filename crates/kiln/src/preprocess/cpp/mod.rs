//! The C preprocessor of GLSL and HLSL, as glslang implements it (`glslangValidator -E`).
//!
//! - `lexer.rs`: translation phases (backslash-newline, comments) and preprocessing tokens,
//!   grouped into logical lines.
//! - `expand.rs`: object-like and function-like macros, `##`, `__LINE__`, `__FILE__`,
//!   `__VERSION__`, with glslang's rules and hard limits against hostile input.
//! - `driver.rs`: directives, conditionals, includes (with include directories) and the
//!   output text with its line map.
//!
//! WGSL keeps kiln's own smaller directive language (`super::driver`).

mod driver;
mod expand;
pub(crate) mod lexer;

pub(crate) use driver::CDriver;
pub(crate) use lexer::CLexed;

use lexer::{Kind, LogicalLine, Token};

/// The file named by an `#include` line.
pub(crate) struct IncludeSpec<'a> {
    /// The path as written, without quotes or angle brackets.
    pub path: &'a str,
    /// `<path>`: searched in the include directories only.
    pub angled: bool,
    /// The path's first token, for errors.
    pub at: &'a Token,
}

/// Reads `#include "path"` or `#include <path>` (the path of `<...>` as written, spaces
/// and all); on error, a message and the offending token.
pub(crate) fn include_spec<'a>(
    lexed: &'a CLexed,
    line: &LogicalLine,
) -> Result<IncludeSpec<'a>, (&'static str, Option<&'a Token>)> {
    let tokens = lexed.tokens(line);
    let Some(first) = tokens.get(2) else {
        return Err(("expected \"path\" or <path>", None));
    };
    if first.kind == Kind::Str {
        let Some(path) = first
            .text
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
        else {
            return Err(("missing closing `\"`", Some(first)));
        };
        if let Some(extra) = tokens.get(3) {
            return Err(("unexpected text after the path", Some(extra)));
        }
        return Ok(IncludeSpec {
            path,
            angled: false,
            at: first,
        });
    }
    if first.is_punct("<") {
        let Some(close) = tokens
            .iter()
            .rposition(|t| t.is_punct(">"))
            .filter(|&c| c > 2)
        else {
            return Err(("missing closing `>`", Some(first)));
        };
        if let Some(extra) = tokens.get(close + 1) {
            return Err(("unexpected text after the path", Some(extra)));
        }
        return Ok(IncludeSpec {
            path: lexed.text_between(line, 2, close),
            angled: true,
            at: first,
        });
    }
    Err(("expected \"path\" or <path>", Some(first)))
}

/// Whether a logical line is an `#include`.
pub(crate) fn is_include(lexed: &CLexed, line: &LogicalLine) -> bool {
    line.directive
        && lexed
            .tokens(line)
            .get(1)
            .is_some_and(|t| t.kind == Kind::Ident && &*t.text == "include")
}
