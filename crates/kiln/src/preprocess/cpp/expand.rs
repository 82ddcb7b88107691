//! Macros and their expansion, as glslang's preprocessor does it.
//!
//! The C algorithm with glslang's rules where it differs from C: a macro is not expanded
//! again while its own replacement is being read ("busy", which for all practical inputs is
//! C's hide set); arguments are fully expanded before substitution except next to `##`
//! (HLSL pastes expanded arguments, as glslang's HLSL front end does); `##` joins an
//! identifier with an identifier or number, or two operators into one operator, and
//! nothing else; `F()` is a call with no arguments, so a one-parameter macro called so has
//! too few (glslang counts it so). The invocation of a function-like macro may span lines
//! but not a directive, and the name of one not followed by `(` is left alone.
//!
//! Hostile input cannot hang or exhaust memory: expansions nest at most
//! [`MAX_NESTING`] deep and one preprocessing run (a variant, all its files) may make at
//! most [`MAX_EXPANDED_TOKENS`] tokens by expansion (counting those made while expanding
//! arguments), after which expansion stops with an error naming the macro. Bytes are
//! bounded too, since one token can be long (a 1 MiB identifier, or `##` joining long ones):
//! an expander is given the bytes its output may still take (the run's output budget) and
//! charges every token it outputs and every token `##` makes before making it.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::lexer::{Kind, Token};
use crate::preprocess::macros::MacroOrigin;

/// How deeply macro replacements (and calls inside arguments) may nest.
pub(crate) const MAX_NESTING: usize = 256;
/// How many tokens expansions may make in one preprocessing run, all counted (a real
/// shader makes a few thousand).
pub(crate) const MAX_EXPANDED_TOKENS: usize = 1 << 21;

/// A `#define`d macro.
#[derive(Debug)]
pub(crate) struct Macro {
    /// `Some` for a function-like macro: its parameter names.
    pub params: Option<Vec<Arc<str>>>,
    pub body: Vec<Token>,
    /// `None` when the build predefined it.
    pub origin: Option<MacroOrigin>,
}

impl Macro {
    /// Same parameters and the same replacement list (spelling and whether tokens are
    /// separated by white space), as C requires of a redefinition.
    pub fn same_as(&self, other: &Macro) -> bool {
        self.params == other.params
            && self.body.len() == other.body.len()
            && self
                .body
                .iter()
                .zip(&other.body)
                .enumerate()
                .all(|(i, (a, b))| a.text == b.text && (i == 0 || a.space == b.space))
    }
}

/// The defined macros, by name.
#[derive(Debug, Default)]
pub(crate) struct Macros {
    map: FxHashMap<Arc<str>, Arc<Macro>>,
}

impl Macros {
    pub fn get(&self, name: &str) -> Option<&Arc<Macro>> {
        self.map.get(name)
    }

    pub fn insert(&mut self, name: Arc<str>, definition: Macro) {
        self.map.insert(name, Arc::new(definition));
    }

    pub fn remove(&mut self, name: &str) {
        self.map.remove(name);
    }
}

/// What the built-in macros expand to at this point of the text.
#[derive(Clone, Debug)]
pub(crate) struct Builtins {
    /// Added to a physical line to give `__LINE__` (set by `#line`).
    pub line_delta: i64,
    /// `__FILE__`: a source-string number or a quoted name.
    pub file: Token,
    /// `__VERSION__`.
    pub version: u32,
    /// HLSL rules (`##` pastes expanded arguments, `{ }` group arguments).
    pub hlsl: bool,
}

/// Why an expansion failed; the driver adds the file.
#[derive(Debug)]
pub(crate) enum ExpandError {
    /// The call's `)` never came (end of the text, or a directive).
    Unterminated { name: Token },
    /// Too few or too many arguments.
    ArgumentCount {
        name: Token,
        expected: usize,
        found: usize,
    },
    /// `##` with nothing on one side, or tokens that do not join into one token.
    BadPaste { at: Token, message: String },
    /// Nesting or output over the limits.
    TooLarge { name: Token },
    /// The output (or a token `##` would make) would pass the run's output budget; `at` is
    /// the token being output, or the macro whose `##` it was.
    OverBudget { at: Token },
}

/// A sequence of tokens being read; a macro's replacement keeps the macro busy.
struct Frame {
    tokens: Vec<Token>,
    pos: usize,
    busy: Option<Arc<str>>,
    /// The text being expanded (not a replacement, not an argument): reading it moves
    /// the current line, which `__LINE__` in a replacement reports.
    text: bool,
}

/// One expansion of a run of text (or of a directive's tokens).
pub(crate) struct Expander<'m> {
    macros: &'m Macros,
    builtins: &'m Builtins,
    budget: usize,
    /// Bytes the output may still take (each token counted with one separator).
    bytes: usize,
    busy: Vec<Arc<str>>,
    depth: usize,
    /// The physical line of the last token read from the text.
    current_line: u32,
}

impl<'m> Expander<'m> {
    /// An expander that may make `budget` tokens (see [`Self::budget`]) and output `bytes`
    /// bytes.
    pub fn new(macros: &'m Macros, builtins: &'m Builtins, budget: usize, bytes: usize) -> Self {
        Self {
            macros,
            builtins,
            budget,
            bytes,
            busy: Vec::new(),
            depth: 0,
            current_line: 0,
        }
    }

    /// How many more tokens expansions may make: the next expander's budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The physical line of the last token read from the text (where an error in a
    /// replacement list is reported).
    pub fn current_line(&self) -> u32 {
        self.current_line
    }

    /// Expands `tokens` completely. Each output token comes with the physical line it is
    /// written on: its own for text, the line of the outermost macro name for an expansion.
    pub fn expand(&mut self, tokens: Vec<Token>) -> Result<Vec<(u32, Token)>, ExpandError> {
        let mut stack = vec![Frame {
            tokens,
            pos: 0,
            busy: None,
            text: true,
        }];
        let mut out = Vec::new();
        let mut anchor = 0;
        while let Some((token, from_text)) = self.next(&mut stack) {
            if from_text {
                anchor = token.line;
            }
            if let Some(token) = self.step(&mut stack, token)? {
                self.spend_bytes(token.text.len().saturating_add(1), &token)?;
                out.push((anchor, token));
            }
        }
        Ok(out)
    }

    fn spend_bytes(&mut self, bytes: usize, at: &Token) -> Result<(), ExpandError> {
        self.bytes = self
            .bytes
            .checked_sub(bytes)
            .ok_or_else(|| ExpandError::OverBudget { at: at.clone() })?;
        Ok(())
    }

    /// Expands an argument on its own stack (what `)` closes can not reach past it).
    fn expand_argument(
        &mut self,
        tokens: &[Token],
        name: &Token,
    ) -> Result<Vec<Token>, ExpandError> {
        if self.depth >= MAX_NESTING {
            return Err(ExpandError::TooLarge { name: name.clone() });
        }
        self.depth += 1;
        let mut stack = vec![Frame {
            tokens: tokens.to_vec(),
            pos: 0,
            busy: None,
            text: false,
        }];
        let mut out = Vec::new();
        let result = (|| {
            while let Some((token, _)) = self.next(&mut stack) {
                if let Some(token) = self.step(&mut stack, token)? {
                    self.spend(name)?;
                    out.push(token);
                }
            }
            Ok(())
        })();
        // A failed expansion can leave frames: their macros are no longer busy.
        while let Some(frame) = stack.pop() {
            self.release(frame);
        }
        self.depth -= 1;
        result.map(|()| out)
    }

    /// Handles one token: returns it when it is output, or starts a macro's expansion.
    fn step(&mut self, stack: &mut Vec<Frame>, token: Token) -> Result<Option<Token>, ExpandError> {
        if token.kind != Kind::Ident {
            return Ok(Some(token));
        }
        match &*token.text {
            "__LINE__" => {
                let physical = if token.from_body {
                    self.current_line
                } else {
                    token.line
                };
                let value = i64::from(physical) + self.builtins.line_delta;
                return Ok(Some(Token::made(Kind::Number, value.to_string(), &token)));
            }
            "__FILE__" => {
                let file = &self.builtins.file;
                return Ok(Some(Token::made(file.kind, Arc::clone(&file.text), &token)));
            }
            "__VERSION__" => {
                let version = self.builtins.version.to_string();
                return Ok(Some(Token::made(Kind::Number, version, &token)));
            }
            _ => {}
        }
        let Some(definition) = self.macros.get(&token.text) else {
            return Ok(Some(token));
        };
        if self.busy.iter().any(|name| **name == *token.text) {
            return Ok(Some(token));
        }
        let definition = Arc::clone(definition);
        let replacement = match &definition.params {
            None => definition.body.clone(),
            Some(params) => {
                if !self.peek_is(stack, "(") {
                    return Ok(Some(token));
                }
                let args = self.arguments(stack, &token, params.len())?;
                self.substitute(&definition, params, &args, &token)?
            }
        };
        if stack.len() > MAX_NESTING {
            return Err(ExpandError::TooLarge { name: token });
        }
        let mut replacement = replacement;
        for _ in &replacement {
            self.spend(&token)?;
        }
        if let Some(first) = replacement.first_mut() {
            first.space = token.space;
        }
        self.busy.push(Arc::clone(&token.text));
        stack.push(Frame {
            tokens: replacement,
            pos: 0,
            busy: Some(Arc::clone(&token.text)),
            text: false,
        });
        Ok(None)
    }

    fn spend(&mut self, name: &Token) -> Result<(), ExpandError> {
        self.budget = self
            .budget
            .checked_sub(1)
            .ok_or_else(|| ExpandError::TooLarge { name: name.clone() })?;
        Ok(())
    }

    /// The next token, and whether it comes from the text itself (the bottom frame).
    /// Exhausted replacements are popped, which ends their macro's busy time.
    fn next(&mut self, stack: &mut Vec<Frame>) -> Option<(Token, bool)> {
        loop {
            let depth = stack.len();
            let frame = stack.last_mut()?;
            if let Some(token) = frame.tokens.get(frame.pos) {
                frame.pos += 1;
                if frame.text {
                    self.current_line = token.line;
                }
                return Some((token.clone(), frame.text));
            }
            if depth == 1 {
                return None;
            }
            if let Some(frame) = stack.pop() {
                self.release(frame);
            }
        }
    }

    fn peek_is(&mut self, stack: &mut Vec<Frame>, punct: &str) -> bool {
        loop {
            let depth = stack.len();
            let Some(frame) = stack.last() else {
                return false;
            };
            if let Some(token) = frame.tokens.get(frame.pos) {
                return token.is_punct(punct);
            }
            if depth == 1 {
                return false;
            }
            if let Some(frame) = stack.pop() {
                self.release(frame);
            }
        }
    }

    fn release(&mut self, frame: Frame) {
        if let Some(name) = frame.busy {
            if let Some(index) = self.busy.iter().rposition(|b| *b == name) {
                self.busy.remove(index);
            }
        }
    }

    /// Reads a call's arguments after its name (the next token is `(`).
    fn arguments(
        &mut self,
        stack: &mut Vec<Frame>,
        name: &Token,
        expected: usize,
    ) -> Result<Vec<Vec<Token>>, ExpandError> {
        let _open = self.next(stack);
        let mut args: Vec<Vec<Token>> = vec![Vec::new()];
        let mut nesting: Vec<&'static str> = Vec::new();
        loop {
            let Some((token, _)) = self.next(stack) else {
                return Err(ExpandError::Unterminated { name: name.clone() });
            };
            if nesting.is_empty() && token.is_punct(")") {
                break;
            }
            if nesting.is_empty() && token.is_punct(",") {
                args.push(Vec::new());
                continue;
            }
            if token.is_punct("(") {
                nesting.push(")");
            } else if token.is_punct("{") && self.builtins.hlsl {
                nesting.push("}");
            } else if nesting.last().is_some_and(|close| token.is_punct(close)) {
                nesting.pop();
            }
            self.spend(name)?;
            if let Some(arg) = args.last_mut() {
                arg.push(token);
            }
        }
        // `F()` is no argument at all for glslang.
        let found = if args.len() == 1 && args[0].is_empty() {
            0
        } else {
            args.len()
        };
        if found != expected {
            return Err(ExpandError::ArgumentCount {
                name: name.clone(),
                expected,
                found,
            });
        }
        Ok(args)
    }

    /// The replacement list with arguments substituted and `##` applied.
    fn substitute(
        &mut self,
        definition: &Macro,
        params: &[Arc<str>],
        args: &[Vec<Token>],
        name: &Token,
    ) -> Result<Vec<Token>, ExpandError> {
        let body = &definition.body;
        let param_index = |token: &Token| {
            (token.kind == Kind::Ident)
                .then(|| params.iter().position(|p| **p == *token.text))
                .flatten()
        };
        let mut expanded: Vec<Option<Vec<Token>>> = vec![None; args.len()];
        let mut out: Vec<Token> = Vec::new();
        let mut i = 0;
        while i < body.len() {
            let token = &body[i];
            if token.is_punct("##") {
                let Some(left) = out.pop() else {
                    return Err(bad_paste(name, "`##` has nothing on its left"));
                };
                let Some(right_token) = body.get(i + 1) else {
                    return Err(bad_paste(name, "`##` has nothing on its right"));
                };
                let mut right = match param_index(right_token) {
                    Some(p) if self.builtins.hlsl => self.expanded(&mut expanded, args, p, name)?,
                    Some(p) => args[p].clone(),
                    None => vec![right_token.clone()],
                };
                if right.is_empty() {
                    return Err(bad_paste(name, "`##` has an empty argument on its right"));
                }
                let first = right.remove(0);
                self.spend_bytes(left.text.len().saturating_add(first.text.len()), name)?;
                out.push(paste(&left, &first, name)?);
                out.extend(right);
                i += 2;
                continue;
            }
            match param_index(token) {
                Some(p) => {
                    let next_pastes = body.get(i + 1).is_some_and(|t| t.is_punct("##"));
                    let mut tokens = if next_pastes && !self.builtins.hlsl {
                        args[p].clone()
                    } else {
                        self.expanded(&mut expanded, args, p, name)?
                    };
                    if tokens.is_empty() && next_pastes {
                        return Err(bad_paste(name, "`##` has an empty argument on its left"));
                    }
                    if let Some(first) = tokens.first_mut() {
                        first.space = token.space;
                    }
                    out.extend(tokens);
                }
                None => {
                    let mut token = token.clone();
                    token.from_body = true;
                    out.push(token);
                }
            }
            i += 1;
        }
        Ok(out)
    }

    fn expanded(
        &mut self,
        cache: &mut [Option<Vec<Token>>],
        args: &[Vec<Token>],
        index: usize,
        name: &Token,
    ) -> Result<Vec<Token>, ExpandError> {
        if let Some(done) = &cache[index] {
            return Ok(done.clone());
        }
        let done = self.expand_argument(&args[index], name)?;
        cache[index] = Some(done.clone());
        Ok(done)
    }
}

fn bad_paste(name: &Token, message: &str) -> ExpandError {
    ExpandError::BadPaste {
        at: name.clone(),
        message: message.to_owned(),
    }
}

/// The operators glslang lets `##` extend on the left.
const PASTE_OPERATORS: [&str; 19] = [
    "=", "!", "-", "~", "+", "*", "/", "%", "<", ">", "|", "^", "&", ">>", "<<", "&&", "||", "^^",
    "==",
];

/// Joins two tokens by `##`, as glslang allows: identifier + identifier or number is an
/// identifier; an operator + an operator must spell one operator.
fn paste(left: &Token, right: &Token, name: &Token) -> Result<Token, ExpandError> {
    let text = format!("{}{}", left.text, right.text);
    let ok = match left.kind {
        Kind::Ident => matches!(right.kind, Kind::Ident | Kind::Number),
        Kind::Punct if PASTE_OPERATORS.contains(&&*left.text) => {
            right.kind == Kind::Punct && super::lexer::token_at(&text) == (Kind::Punct, text.len())
        }
        _ => false,
    };
    if !ok {
        return Err(bad_paste(
            name,
            &format!(
                "`{}` ## `{}` does not form one token (glslang joins an identifier with an identifier or number, or two operators into one)",
                left.text, right.text
            ),
        ));
    }
    let kind = if left.kind == Kind::Ident {
        Kind::Ident
    } else {
        Kind::Punct
    };
    let mut token = Token::made(kind, text, left);
    token.from_body = left.from_body;
    Ok(token)
}
