//! Evaluating the expression of `#if` / `#elif`.
//!
//! Supported: integer literals (decimal, `0x` hex, leading-`0` octal), `defined(X)` /
//! `defined X`, identifiers (a macro's value, rescanned; an undefined name is 0, as in C),
//! parentheses, unary `! - + ~`, and binary `* / %  + -  << >>  < > <= >=  == !=  &  ^  |
//! &&  ||` with C precedence. There is no `?:`, as in glslang. A shift's count is taken
//! modulo the width (what glslang's compiled `a << b` does on x86 and ARM64).
//!
//! Two arithmetics ([`Flavor`]): kiln's WGSL directives compute in 64 bits, accept `u`/`l`
//! suffixes and short-circuit (`0 && 1/0` is fine); GLSL and HLSL compute as glslang does,
//! in 32-bit `int`: a literal must fit in 32 bits (above `INT_MAX` it wraps) and takes no
//! suffix, a division by zero is an error even where `&&` or `||` would not evaluate it,
//! and `INT_MIN / -1` is 0.

use std::ops::Range;

use super::macros::{is_ident_continue, is_ident_start, MacroTable};

/// How deeply parentheses and unary operators may nest (a bound on recursion).
const MAX_NESTING: u32 = 256;

/// A failed evaluation: what went wrong and where, as a byte range of the directive's text.
#[derive(Debug)]
pub(crate) struct ExprError {
    pub message: String,
    pub span: Range<u32>,
}

/// Whose arithmetic an expression is evaluated with (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// kiln's WGSL directives: 64-bit, suffixes allowed, short-circuiting.
    Wgsl,
    /// glslang's preprocessor (GLSL, HLSL): 32-bit `int`.
    Glslang,
}

impl Flavor {
    /// `value` as this arithmetic holds it.
    fn wrap(self, value: i64) -> i64 {
        match self {
            Self::Wgsl => value,
            Self::Glslang => i64::from(value as i32),
        }
    }

    fn bits(self) -> u32 {
        match self {
            Self::Wgsl => 64,
            Self::Glslang => 32,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Not,
    Tilde,
    Star,
    Slash,
    Percent,
    Plus,
    Minus,
    Less,
    Greater,
    LessEq,
    GreaterEq,
    Shl,
    Shr,
    Amp,
    Caret,
    Pipe,
    EqEq,
    NotEq,
    AndAnd,
    OrOr,
    LParen,
    RParen,
}

#[derive(Clone, Copy, Debug)]
enum Tok<'a> {
    Num(i64),
    Ident(&'a str),
    Op(Op),
}

#[derive(Clone, Debug)]
struct Token<'a> {
    tok: Tok<'a>,
    span: Range<u32>,
}

/// Evaluates `expr`, which starts at byte `offset` of the directive's text, with WGSL's
/// arithmetic; true if non-zero.
pub(crate) fn evaluate(expr: &str, offset: u32, macros: &MacroTable) -> Result<bool, ExprError> {
    evaluate_as(expr, offset, macros, Flavor::Wgsl)
}

/// [`evaluate`] with the given arithmetic.
pub(crate) fn evaluate_as(
    expr: &str,
    offset: u32,
    macros: &MacroTable,
    flavor: Flavor,
) -> Result<bool, ExprError> {
    let tokens = tokenize(expr, offset, None, flavor)?;
    let mut expanded = Vec::with_capacity(tokens.len());
    let mut active = Vec::new();
    expand(&tokens, macros, &mut active, None, &mut expanded, flavor)?;
    let whole = offset..offset + u32::try_from(expr.len()).unwrap_or(u32::MAX);
    if expanded.is_empty() {
        return Err(ExprError {
            message: "expected an expression".into(),
            span: whole,
        });
    }
    let mut parser = Parser {
        tokens: &expanded,
        pos: 0,
        depth: 0,
        macros,
        end: whole.end..whole.end,
        flavor,
    };
    let value = parser.binary(1, true)?;
    if let Some(extra) = parser.tokens.get(parser.pos) {
        return Err(ExprError {
            message: "unexpected token after the expression".into(),
            span: extra.span.clone(),
        });
    }
    Ok(value != 0)
}

/// Splits `text` into tokens; spans are `offset`-based, or all `fixed` for a macro's value.
fn tokenize<'a>(
    text: &'a str,
    offset: u32,
    fixed: Option<&Range<u32>>,
    flavor: Flavor,
) -> Result<Vec<Token<'a>>, ExprError> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    let span_of = |start: usize, end: usize| match fixed {
        Some(span) => span.clone(),
        None => offset + to_u32(start)..offset + to_u32(end),
    };
    while i < bytes.len() {
        let b = bytes[i];
        let start = i;
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let tok = if is_ident_start(b) {
            while i < bytes.len() && is_ident_continue(bytes[i]) {
                i += 1;
            }
            Tok::Ident(&text[start..i])
        } else if b.is_ascii_digit() {
            while i < bytes.len() && (is_ident_continue(bytes[i]) || bytes[i] == b'.') {
                i += 1;
            }
            let value = parse_int(&text[start..i], flavor).ok_or_else(|| ExprError {
                message: format!("`{}` is not an integer literal", &text[start..i]),
                span: span_of(start, i),
            })?;
            Tok::Num(value)
        } else {
            let next = bytes.get(i + 1).copied();
            let (op, len) = match (b, next) {
                (b'&', Some(b'&')) => (Op::AndAnd, 2),
                (b'|', Some(b'|')) => (Op::OrOr, 2),
                (b'<', Some(b'<')) => (Op::Shl, 2),
                (b'>', Some(b'>')) => (Op::Shr, 2),
                (b'=', Some(b'=')) => (Op::EqEq, 2),
                (b'!', Some(b'=')) => (Op::NotEq, 2),
                (b'<', Some(b'=')) => (Op::LessEq, 2),
                (b'>', Some(b'=')) => (Op::GreaterEq, 2),
                (b'!', _) => (Op::Not, 1),
                (b'~', _) => (Op::Tilde, 1),
                (b'*', _) => (Op::Star, 1),
                (b'/', _) => (Op::Slash, 1),
                (b'%', _) => (Op::Percent, 1),
                (b'+', _) => (Op::Plus, 1),
                (b'-', _) => (Op::Minus, 1),
                (b'<', _) => (Op::Less, 1),
                (b'>', _) => (Op::Greater, 1),
                (b'&', _) => (Op::Amp, 1),
                (b'^', _) => (Op::Caret, 1),
                (b'|', _) => (Op::Pipe, 1),
                (b'(', _) => (Op::LParen, 1),
                (b')', _) => (Op::RParen, 1),
                _ => {
                    let end = start + text[start..].chars().next().map_or(1, char::len_utf8);
                    return Err(ExprError {
                        message: format!("unexpected `{}`", &text[start..end]),
                        span: span_of(start, end),
                    });
                }
            };
            i += len;
            Tok::Op(op)
        };
        tokens.push(Token {
            tok,
            span: span_of(start, i),
        });
    }
    Ok(tokens)
}

/// Parses a C integer literal: with optional `u`/`l` suffixes for WGSL, within 32 bits and
/// without a suffix for glslang.
fn parse_int(literal: &str, flavor: Flavor) -> Option<i64> {
    let digits = match flavor {
        Flavor::Wgsl => literal.trim_end_matches(['u', 'U', 'l', 'L']),
        Flavor::Glslang => literal,
    };
    let (digits, radix) = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        (hex, 16)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (&digits[1..], 8)
    } else {
        (digits, 10)
    };
    if digits.is_empty() {
        return None;
    }
    let value = u64::from_str_radix(digits, radix).ok()?;
    if flavor == Flavor::Glslang && value > u64::from(u32::MAX) {
        return None;
    }
    // Literals above the signed maximum (unsigned in C) wrap, as the arithmetic does.
    Some(flavor.wrap(value as i64))
}

/// Replaces macros by their values' tokens, leaving the operand of `defined` alone.
/// Tokens produced by a macro take the span of the identifier that named it (`outer`).
fn expand<'a>(
    tokens: &[Token<'a>],
    macros: &'a MacroTable,
    active: &mut Vec<&'a str>,
    outer: Option<&Range<u32>>,
    out: &mut Vec<Token<'a>>,
    flavor: Flavor,
) -> Result<(), ExprError> {
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        let span = outer.unwrap_or(&token.span);
        i += 1;
        match token.tok {
            Tok::Ident("defined") => {
                out.push(Token {
                    tok: token.tok,
                    span: span.clone(),
                });
                // `defined X` or `defined ( X )`: copied verbatim, never expanded.
                let operand_len = match tokens.get(i..i + 3) {
                    Some(
                        [Token {
                            tok: Tok::Op(Op::LParen),
                            ..
                        }, _, Token {
                            tok: Tok::Op(Op::RParen),
                            ..
                        }],
                    ) => 3,
                    _ => 1,
                };
                for operand in tokens.iter().skip(i).take(operand_len) {
                    out.push(Token {
                        tok: operand.tok,
                        span: outer.unwrap_or(&operand.span).clone(),
                    });
                }
                i += operand_len.min(tokens.len() - i);
            }
            Tok::Ident(name) => match macros.lookup(name) {
                Some((name, value)) if !active.contains(&name) => {
                    if active.len() >= MAX_NESTING as usize {
                        return Err(ExprError {
                            message: format!("expansion of `{name}` nests too deeply"),
                            span: span.clone(),
                        });
                    }
                    let value_tokens =
                        tokenize(value, 0, Some(span), flavor).map_err(|e| ExprError {
                            message: format!("in the value of `{name}`: {}", e.message),
                            span: e.span,
                        })?;
                    active.push(name);
                    expand(&value_tokens, macros, active, Some(span), out, flavor)?;
                    active.pop();
                }
                _ => out.push(Token {
                    tok: token.tok,
                    span: span.clone(),
                }),
            },
            _ => out.push(Token {
                tok: token.tok,
                span: span.clone(),
            }),
        }
    }
    Ok(())
}

struct Parser<'t, 'a> {
    tokens: &'t [Token<'a>],
    pos: usize,
    depth: u32,
    macros: &'a MacroTable,
    /// Where "end of expression" errors point.
    end: Range<u32>,
    flavor: Flavor,
}

/// Binding strength of a binary operator (higher binds tighter).
fn precedence(op: Op) -> Option<u8> {
    Some(match op {
        Op::OrOr => 1,
        Op::AndAnd => 2,
        Op::Pipe => 3,
        Op::Caret => 4,
        Op::Amp => 5,
        Op::EqEq | Op::NotEq => 6,
        Op::Less | Op::Greater | Op::LessEq | Op::GreaterEq => 7,
        Op::Shl | Op::Shr => 8,
        Op::Plus | Op::Minus => 9,
        Op::Star | Op::Slash | Op::Percent => 10,
        Op::Not | Op::Tilde | Op::LParen | Op::RParen => return None,
    })
}

impl<'a> Parser<'_, 'a> {
    fn peek(&self) -> Option<&Token<'a>> {
        self.tokens.get(self.pos)
    }

    fn error<T>(&self, message: &str) -> Result<T, ExprError> {
        let span = self
            .peek()
            .map_or_else(|| self.end.clone(), |t| t.span.clone());
        Err(ExprError {
            message: message.into(),
            span,
        })
    }

    /// Precedence climbing; `live` is false on the unevaluated side of `&&` / `||`.
    fn binary(&mut self, min_precedence: u8, live: bool) -> Result<i64, ExprError> {
        let mut lhs = self.unary(live)?;
        while let Some(Token {
            tok: Tok::Op(op),
            span,
        }) = self.peek()
        {
            let (op, span) = (*op, span.clone());
            let Some(precedence) = precedence(op) else {
                break;
            };
            if precedence < min_precedence {
                break;
            }
            self.pos += 1;
            lhs = match op {
                Op::OrOr => {
                    let rhs = self.binary(precedence + 1, live && lhs == 0)?;
                    i64::from(lhs != 0 || rhs != 0)
                }
                Op::AndAnd => {
                    let rhs = self.binary(precedence + 1, live && lhs != 0)?;
                    i64::from(lhs != 0 && rhs != 0)
                }
                _ => {
                    let rhs = self.binary(precedence + 1, live)?;
                    apply(op, lhs, rhs, live, self.flavor).ok_or(ExprError {
                        message: "division by zero".into(),
                        span,
                    })?
                }
            };
        }
        Ok(lhs)
    }

    fn unary(&mut self, live: bool) -> Result<i64, ExprError> {
        if self.depth >= MAX_NESTING {
            return self.error("expression nests too deeply");
        }
        self.depth += 1;
        let value = self.unary_inner(live);
        self.depth -= 1;
        value
    }

    fn unary_inner(&mut self, live: bool) -> Result<i64, ExprError> {
        let Some(token) = self.peek() else {
            return self.error("expected a value at the end of the expression");
        };
        let tok = token.tok;
        match tok {
            Tok::Num(value) => {
                self.pos += 1;
                Ok(value)
            }
            Tok::Ident("defined") => {
                self.pos += 1;
                let parenthesised = matches!(
                    self.peek(),
                    Some(Token {
                        tok: Tok::Op(Op::LParen),
                        ..
                    })
                );
                if parenthesised {
                    self.pos += 1;
                }
                let Some(Token {
                    tok: Tok::Ident(name),
                    ..
                }) = self.peek()
                else {
                    return self.error("`defined` needs a macro name");
                };
                let defined = self.macros.is_defined(name);
                self.pos += 1;
                if parenthesised {
                    self.expect_rparen()?;
                }
                Ok(i64::from(defined))
            }
            // An identifier left after expansion is not a macro: 0, as in C.
            Tok::Ident(_) => {
                self.pos += 1;
                Ok(0)
            }
            Tok::Op(Op::LParen) => {
                self.pos += 1;
                let value = self.binary(1, live)?;
                self.expect_rparen()?;
                Ok(value)
            }
            Tok::Op(op @ (Op::Not | Op::Minus | Op::Plus | Op::Tilde)) => {
                self.pos += 1;
                let value = self.unary(live)?;
                Ok(self.flavor.wrap(match op {
                    Op::Not => i64::from(value == 0),
                    Op::Minus => value.wrapping_neg(),
                    Op::Tilde => !value,
                    _ => value,
                }))
            }
            Tok::Op(_) => self.error("expected a value"),
        }
    }

    fn expect_rparen(&mut self) -> Result<(), ExprError> {
        match self.peek() {
            Some(Token {
                tok: Tok::Op(Op::RParen),
                ..
            }) => {
                self.pos += 1;
                Ok(())
            }
            _ => self.error("expected `)`"),
        }
    }
}

/// A non-logical binary operator; `None` for a division by zero that is an error (one
/// that is evaluated, or any in glslang's arithmetic).
fn apply(op: Op, lhs: i64, rhs: i64, live: bool, flavor: Flavor) -> Option<i64> {
    let shift = |rhs: i64| (rhs as u32) % flavor.bits();
    let value = match op {
        Op::Star => lhs.wrapping_mul(rhs),
        Op::Slash | Op::Percent if rhs == 0 => {
            if live || flavor == Flavor::Glslang {
                return None;
            }
            0
        }
        // The one quotient that overflows: glslang defines it as 0.
        Op::Slash | Op::Percent
            if flavor == Flavor::Glslang && lhs == i64::from(i32::MIN) && rhs == -1 =>
        {
            0
        }
        Op::Slash => lhs.wrapping_div(rhs),
        Op::Percent => lhs.wrapping_rem(rhs),
        Op::Plus => lhs.wrapping_add(rhs),
        Op::Minus => lhs.wrapping_sub(rhs),
        Op::Shl => lhs.wrapping_shl(shift(rhs)),
        Op::Shr => lhs.wrapping_shr(shift(rhs)),
        Op::Amp => lhs & rhs,
        Op::Caret => lhs ^ rhs,
        Op::Pipe => lhs | rhs,
        Op::Less => i64::from(lhs < rhs),
        Op::Greater => i64::from(lhs > rhs),
        Op::LessEq => i64::from(lhs <= rhs),
        Op::GreaterEq => i64::from(lhs >= rhs),
        Op::EqEq => i64::from(lhs == rhs),
        Op::NotEq => i64::from(lhs != rhs),
        Op::AndAnd => i64::from(lhs != 0 && rhs != 0),
        Op::OrOr => i64::from(lhs != 0 || rhs != 0),
        Op::Not | Op::Tilde | Op::LParen | Op::RParen => 0,
    };
    Some(flavor.wrap(value))
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(expr: &str, defines: &[(&str, &str)]) -> Result<bool, String> {
        let mut table = MacroTable::default();
        for (name, value) in defines {
            table.define(name, value, None).unwrap();
        }
        evaluate(expr, 0, &table).map_err(|e| format!("{} @{:?}", e.message, e.span))
    }

    #[test]
    fn evaluates_c_expressions() {
        let d = [
            ("FOG", "1"),
            ("LIGHTS", "4"),
            ("TWICE", "LIGHTS * 2"),
            ("EMPTY", ""),
        ];
        assert_eq!(eval("defined(FOG) && !defined SKIN", &d), Ok(true));
        assert_eq!(eval("LIGHTS >= 4 && LIGHTS < 0x10", &d), Ok(true));
        assert_eq!(eval("TWICE == 8", &d), Ok(true));
        assert_eq!(eval("1 + 2 * 3 == 7 && (1 + 2) * 3 == 9", &d), Ok(true));
        assert_eq!(eval("UNKNOWN", &d), Ok(false));
        assert_eq!(eval("-1 < 0 && 010 == 8 && 2u != 3", &d), Ok(true));
        assert_eq!(eval("0 && 1 / 0", &d), Ok(false));
        assert_eq!(eval("1 || 1 % 0", &d), Ok(true));
        assert!(eval("defined(EMPTY) && !EMPTY", &d).is_err());
        assert_eq!(eval("1 - 1 - 1 == -1", &d), Ok(true));
    }

    fn glsl(expr: &str) -> Result<bool, String> {
        evaluate_as(expr, 0, &MacroTable::default(), Flavor::Glslang)
            .map_err(|e| format!("{} @{:?}", e.message, e.span))
    }

    #[test]
    fn shifts_and_bitwise_operators_bind_as_in_c() {
        // Issue 25: `<<` was read as two `<` ("expected a value").
        assert_eq!(eval("(1 << 2) == 4", &[]), Ok(true));
        assert_eq!(glsl("(1 << 2) == 4"), Ok(true));
        assert_eq!(eval("1 << 2 + 1 == 8", &[]), Ok(true));
        assert_eq!(eval("-16 >> 2 == -4", &[]), Ok(true));
        assert_eq!(
            eval("(6 & 3) == 2 && (6 | 3) == 7 && (6 ^ 3) == 5", &[]),
            Ok(true)
        );
        // `==` binds tighter than `&`, `&` than `^`, `^` than `|`.
        assert_eq!(eval("1 ^ 3 == 2", &[]), Ok(true));
        assert_eq!(eval("2 & 3 == 3", &[]), Ok(false));
        assert_eq!(eval("1 | 2 ^ 3 & 4", &[]), Ok(true));
        assert_eq!(
            eval("(1 | 2 ^ 3 & 4) == (1 | (2 ^ (3 & 4)))", &[]),
            Ok(true)
        );
        assert_eq!(eval("1 < 2 << 1", &[]), Ok(true));
        assert!(eval("1 <<= 2", &[]).is_err());
    }

    #[test]
    fn glslang_arithmetic_is_32_bit() {
        assert_eq!(glsl("0x7fffffff + 1 < 0"), Ok(true));
        assert_eq!(eval("0x7fffffff + 1 < 0", &[]), Ok(false));
        assert_eq!(glsl("4294967295 == -1"), Ok(true));
        assert_eq!(glsl("037777777777 == -1"), Ok(true));
        assert_eq!(glsl("(-2147483647 - 1) / -1 == 0"), Ok(true));
        assert_eq!(glsl("(-2147483647 - 1) % -1 == 0"), Ok(true));
        assert_eq!(glsl("-(-2147483647 - 1) < 0"), Ok(true));
        assert_eq!(glsl("65536 * 65536 == 0"), Ok(true));
        assert_eq!(glsl("1 << 33 == 2"), Ok(true));
        assert!(glsl("4294967296").is_err());
        assert!(glsl("0x100000000").is_err());
        assert!(glsl("1u").is_err());
        assert!(eval("1u", &[]).is_ok());
        // glslang reports a division by zero even where `&&` would not evaluate it.
        assert!(glsl("0 && 1 / 0").is_err());
        assert!(glsl("1 || 1 % 0").is_err());
        assert_eq!(eval("0 && 1 / 0", &[]), Ok(false));
    }

    #[test]
    fn reports_errors_with_spans() {
        assert_eq!(eval("1 / 0", &[]), Err("division by zero @2..3".into()));
        assert_eq!(eval("(1", &[]), Err("expected `)` @2..2".into()));
        assert_eq!(
            eval("1 +", &[]),
            Err("expected a value at the end of the expression @3..3".into())
        );
        assert_eq!(
            eval("1.5", &[]),
            Err("`1.5` is not an integer literal @0..3".into())
        );
        assert_eq!(eval("1 @ 2", &[]), Err("unexpected `@` @2..3".into()));
        assert_eq!(eval("1 ? 2 : 3", &[]), Err("unexpected `?` @2..3".into()));
        assert!(eval("", &[]).is_err());
        let deep = format!("{}1{}", "(".repeat(1000), ")".repeat(1000));
        assert!(eval(&deep, &[]).is_err());
    }
}
