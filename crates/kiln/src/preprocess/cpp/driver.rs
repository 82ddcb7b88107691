//! One C-preprocessor run (GLSL, HLSL): directives, conditionals, includes, and writing the
//! expanded text with its line map.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::expand::{Builtins, ExpandError, Expander, Macro, Macros, MAX_EXPANDED_TOKENS};
use super::lexer::{would_merge, CLexed, Kind, LogicalLine, Token};
use super::{include_spec, IncludeSpec};
use crate::preprocess::budget::{self, BudgetKind, Meter, PreprocessBudget, Spent, Walk};
use crate::preprocess::cache::{lex_c, Preprocessor};
use crate::preprocess::error::{PreprocessError, SourceLocation};
use crate::preprocess::expr;
use crate::preprocess::include_stack::{self, Frame};
use crate::preprocess::line_map::LineMap;
use crate::preprocess::loader::{FileView, SourceLoader};
use crate::preprocess::macros::{MacroOrigin, MacroTable};
use crate::preprocess::path::include_candidates;
use crate::preprocess::{Dialect, Preprocessed, MAX_INCLUDE_DEPTH};

/// The built-in macros, which cannot be defined or undefined.
const BUILTINS: [&str; 4] = ["__LINE__", "__FILE__", "__VERSION__", "defined"];

/// The extensions under which glslang names files in `__FILE__` and `#line`.
const FILE_NAME_EXTENSIONS: [&str; 2] = [
    "GL_GOOGLE_include_directive",
    "GL_GOOGLE_cpp_style_line_directive",
];

struct LoadedFile {
    path: Arc<str>,
    lexed: Arc<CLexed>,
    once: bool,
    /// The blocks found active in any of its includes (see [`FileView`]).
    active: Vec<u64>,
}

struct Conditional {
    parent_active: bool,
    taken: bool,
    in_else: bool,
    opened: SourceLocation,
    directive: &'static str,
}

/// What `#line` changed in the file being read.
struct FileState {
    line_delta: i64,
    file_token: Option<Token>,
}

pub(crate) struct CDriver<'l> {
    dialect: Dialect,
    include_dirs: Vec<String>,
    loader: &'l dyn SourceLoader,
    cache: Option<&'l Preprocessor>,
    macros: Macros,
    files: Vec<LoadedFile>,
    by_path: FxHashMap<Arc<str>, u32>,
    stack: Vec<Frame>,
    out: String,
    lines: Vec<(u32, u32)>,
    version: Option<u32>,
    /// A GLSL extension that names files in `__FILE__` is enabled (HLSL always does).
    file_names: bool,
    /// Tokens expansions may still make in this run (a bound on hostile input).
    budget: usize,
    meter: Meter,
}

impl<'l> CDriver<'l> {
    pub fn new(
        dialect: Dialect,
        include_dirs: Vec<String>,
        loader: &'l dyn SourceLoader,
        cache: Option<&'l Preprocessor>,
        budget: PreprocessBudget,
    ) -> Self {
        Self {
            dialect,
            include_dirs,
            loader,
            cache,
            macros: Macros::default(),
            files: Vec::new(),
            by_path: FxHashMap::default(),
            stack: Vec::new(),
            out: String::new(),
            lines: Vec::new(),
            version: None,
            file_names: dialect == Dialect::Hlsl,
            // A token is at least a byte of output: a smaller output budget bounds the
            // tokens (and their memory) too.
            budget: MAX_EXPANDED_TOKENS.min(budget.output_limit()),
            meter: Meter::new(budget),
        }
    }

    /// Defines a macro before the first line (a keyword or a caller's define), as
    /// `glslangValidator -D` does: the value is lexed as a replacement list.
    pub fn predefine(&mut self, name: &str, value: &str) -> Result<(), PreprocessError> {
        let invalid = |message: &str| PreprocessError::InvalidPredefine {
            name: name.to_owned(),
            message: message.to_owned(),
        };
        if !crate::preprocess::macros::is_macro_name(name) {
            return Err(invalid("not an identifier ([A-Za-z_][A-Za-z0-9_]*)"));
        }
        if BUILTINS.contains(&name) {
            return Err(invalid("a built-in macro cannot be defined"));
        }
        if value.contains('\n') {
            return Err(invalid("the value spans lines"));
        }
        let lexed = CLexed::lex("<define>", value).map_err(|_| invalid("unterminated comment"))?;
        let body: Vec<Token> = lexed
            .lines()
            .iter()
            .flat_map(|line| lexed.tokens(line).iter().cloned())
            .map(|mut token| {
                token.from_body = true;
                token.line = 0;
                token
            })
            .collect();
        let definition = Macro {
            params: None,
            body,
            origin: None,
        };
        if let Some(existing) = self.macros.get(name) {
            if existing.same_as(&definition) {
                return Ok(());
            }
            return Err(invalid("defined twice with different values"));
        }
        self.macros.insert(name.into(), definition);
        Ok(())
    }

    /// Preprocesses the (normalised) entry file; also says what the run spent.
    pub fn run(mut self, entry: String) -> (Result<Preprocessed, PreprocessError>, Spent) {
        let result = self.run_entry(entry);
        (result, self.meter.spent())
    }

    fn run_entry(&mut self, entry: String) -> Result<Preprocessed, PreprocessError> {
        let source = self.loader.load_viewed(Path::new(&entry)).map_err(|err| {
            PreprocessError::EntryUnreadable {
                file: PathBuf::from(&entry),
                message: err.to_string(),
            }
        })?;
        let entry = self.add_file(entry, &source)?;
        self.stack.push(Frame {
            file: entry,
            included_at: None,
        });
        let processed = self.process_file(entry);
        // Also after an error: it depends on the same part of each file.
        for file in &self.files {
            self.loader
                .viewed(&file.path, &FileView::new(true, file.active.clone()));
        }
        processed?;
        let files = self.files.iter().map(|f| PathBuf::from(&*f.path)).collect();
        Ok(Preprocessed {
            text: std::mem::take(&mut self.out),
            line_map: LineMap::new(files, std::mem::take(&mut self.lines)),
        })
    }

    fn add_file(&mut self, path: String, source: &Arc<str>) -> Result<u32, PreprocessError> {
        if let Some(&id) = self.by_path.get(path.as_str()) {
            return Ok(id);
        }
        let lexed = match lex_c(self.cache, &path, source) {
            Ok(lexed) => lexed,
            Err(error) => {
                // The error depends on the whole text: read it as such.
                let _ = self.loader.load(Path::new(&path));
                return Err(error);
            }
        };
        let id = u32::try_from(self.files.len()).unwrap_or(u32::MAX);
        let path: Arc<str> = match self.cache {
            Some(cache) => cache.shared_path(&path),
            None => path.into(),
        };
        self.by_path.insert(Arc::clone(&path), id);
        self.files.push(LoadedFile {
            path,
            lexed,
            once: false,
            active: Vec::new(),
        });
        Ok(id)
    }

    fn process_file(&mut self, file: u32) -> Result<(), PreprocessError> {
        let lexed = Arc::clone(&self.files[file as usize].lexed);
        let path = Arc::clone(&self.files[file as usize].path);
        let mut conditionals: Vec<Conditional> = Vec::new();
        let mut active = true;
        let mut run: Vec<Token> = Vec::new();
        let mut state = FileState {
            line_delta: 0,
            file_token: None,
        };
        // The block a line is in: the number of directives before it. A block is marked
        // when entered active, also when empty: a line added to it is then seen.
        let mut block = 0usize;
        FileView::mark(&mut self.files[file as usize].active, block);
        let lines = lexed.lines();
        let mut walk = Walk::new(lexed.directive_indices(), lines.len());
        while let Some(index) = walk.next(active) {
            let line = &lines[index];
            let tokens = lexed.tokens(line);
            self.meter
                .read(lexed.line_len(line) + 1, || location(&path, &tokens[0]))?;
            if !line.directive {
                if active {
                    run.extend(tokens.iter().cloned());
                }
                continue;
            }
            block += 1;
            self.flush(file, &mut run, &state)?;
            let at = |token: &Token| location(&path, token);
            let hash = &tokens[0];
            let (name, args) = match tokens.get(1) {
                Some(t) if t.kind == Kind::Ident => (&*t.text, &tokens[2..]),
                Some(_) => ("?", &tokens[1..]),
                None => ("", &tokens[1..]),
            };
            let name_token = tokens.get(1).unwrap_or(hash);
            match name {
                "if" | "ifdef" | "ifndef" => {
                    let directive = match name {
                        "if" => "if",
                        "ifdef" => "ifdef",
                        _ => "ifndef",
                    };
                    let taken = active && self.condition(name, name_token, args, file, &state)?;
                    conditionals.push(Conditional {
                        parent_active: active,
                        taken,
                        in_else: false,
                        opened: at(name_token),
                        directive,
                    });
                    active = taken;
                }
                "elif" => {
                    let Some(group) = conditionals.last() else {
                        return Err(unbalanced("elif", "without a matching #if", at(name_token)));
                    };
                    if group.in_else {
                        return Err(unbalanced("elif", "after #else", at(name_token)));
                    }
                    let evaluate = group.parent_active && !group.taken;
                    let taken =
                        evaluate && self.condition("elif", name_token, args, file, &state)?;
                    if let Some(group) = conditionals.last_mut() {
                        group.taken |= taken;
                    }
                    active = taken;
                }
                "else" | "endif" => {
                    if let Some(extra) = args.first() {
                        return Err(malformed(
                            name,
                            "unexpected text after the directive",
                            at(extra),
                        ));
                    }
                    let Some(group) = conditionals.last_mut() else {
                        return Err(unbalanced(name, "without a matching #if", at(name_token)));
                    };
                    if name == "endif" {
                        active = group.parent_active;
                        conditionals.pop();
                    } else {
                        if group.in_else {
                            return Err(unbalanced("else", "after #else", at(name_token)));
                        }
                        group.in_else = true;
                        active = group.parent_active && !group.taken;
                        group.taken = true;
                    }
                }
                _ if !active => {}
                _ => self.directive(file, &lexed, line, name, name_token, args, &mut state)?,
            }
            if active {
                FileView::mark(&mut self.files[file as usize].active, block);
            }
        }
        self.flush(file, &mut run, &state)?;
        match conditionals.pop() {
            Some(open) => Err(PreprocessError::UnterminatedConditional {
                at: open.opened,
                directive: open.directive.to_owned(),
            }),
            None => Ok(()),
        }
    }

    /// Carries out an active directive other than a conditional.
    #[allow(clippy::too_many_arguments)]
    fn directive(
        &mut self,
        file: u32,
        lexed: &CLexed,
        line: &LogicalLine,
        name: &str,
        name_token: &Token,
        args: &[Token],
        state: &mut FileState,
    ) -> Result<(), PreprocessError> {
        let path = Arc::clone(&self.files[file as usize].path);
        let at = |token: &Token| location(&path, token);
        match name {
            "include" => self.include(file, lexed, line, name_token)?,
            "define" => self.define(file, name_token, args)?,
            "undef" => {
                let macro_name = single_name("undef", name_token, args, &at)?;
                if BUILTINS.contains(&macro_name) {
                    return Err(malformed("undef", "a built-in macro", at(&args[0])));
                }
                self.macros.remove(macro_name);
            }
            "error" => {
                return Err(PreprocessError::ErrorDirective {
                    at: at(name_token),
                    message: join(args),
                })
            }
            "pragma" => {
                // Passed through like every pragma (glslang 12 writes it and ignores it);
                // kiln also honours it.
                if args.len() == 1 && &*args[0].text == "once" {
                    self.files[file as usize].once = true;
                }
                self.emit_directive(file, name_token, args)?;
            }
            "version" | "extension" if self.dialect == Dialect::Hlsl => {
                // glslang's HLSL front end has neither: refused here, located, rather than
                // by the compiler after the whole variant was preprocessed.
                return Err(PreprocessError::UnsupportedDirective {
                    at: at(name_token),
                    name: name.to_owned(),
                    reason: "GLSL-only, not allowed in HLSL".to_owned(),
                });
            }
            "version" => {
                if !self.out.is_empty() {
                    return Err(PreprocessError::VersionNotFirst { at: at(name_token) });
                }
                self.version = args.first().and_then(|t| t.text.parse().ok());
                self.emit_directive(file, name_token, args)?;
            }
            "extension" => {
                let enabled = args.last().is_some_and(|t| &*t.text != "disable");
                if enabled
                    && args
                        .first()
                        .is_some_and(|t| FILE_NAME_EXTENSIONS.contains(&&*t.text))
                {
                    self.file_names = true;
                }
                self.emit_directive(file, name_token, args)?;
            }
            "line" => self.line(file, line, name_token, args, state)?,
            // `#` alone is C's null directive.
            "" => {}
            _ => {
                return Err(PreprocessError::UnknownDirective {
                    at: at(name_token),
                    name: name_token.text.to_string(),
                })
            }
        }
        Ok(())
    }

    fn builtins(&self, file: u32, state: &FileState) -> Builtins {
        let path = &self.files[file as usize].path;
        let like = Token::made(Kind::Number, "0", &placeholder());
        let file_token = match &state.file_token {
            Some(token) => token.clone(),
            None if self.file_names => Token::made(Kind::Str, format!("\"{path}\""), &like),
            None => like,
        };
        Builtins {
            line_delta: state.line_delta,
            file: file_token,
            version: self.version.unwrap_or(100),
            hlsl: self.dialect == Dialect::Hlsl,
        }
    }

    /// Expands a run of code lines and writes it, one output line per source line.
    fn flush(
        &mut self,
        file: u32,
        run: &mut Vec<Token>,
        state: &FileState,
    ) -> Result<(), PreprocessError> {
        if run.is_empty() {
            return Ok(());
        }
        let builtins = self.builtins(file, state);
        let path = Arc::clone(&self.files[file as usize].path);
        // One byte is left for the final newline the expander does not count.
        let bytes = self.output_left().saturating_sub(1);
        let mut expander = Expander::new(&self.macros, &builtins, self.budget, bytes);
        let expanded = expander
            .expand(std::mem::take(run))
            .map_err(|err| expand_error(&path, &expander, err, self.meter.budget()))?;
        self.budget = expander.budget();
        let mut current: Option<u32> = None;
        let mut previous: Option<Token> = None;
        for (line, token) in expanded {
            if token.is_punct("#") {
                return Err(PreprocessError::StrayHash {
                    at: SourceLocation {
                        file: PathBuf::from(&*path),
                        line,
                        columns: if token.from_body {
                            0..1
                        } else {
                            token.columns()
                        },
                    },
                });
            }
            if current != Some(line) {
                if current.is_some() {
                    self.out.push('\n');
                }
                self.lines.push((file, line));
                current = Some(line);
            } else if token.space
                || previous
                    .as_ref()
                    .is_some_and(|p| would_merge(&p.text, &token.text))
            {
                self.out.push(' ');
            }
            self.out.push_str(&token.text);
            previous = Some(token);
        }
        if current.is_some() {
            self.out.push('\n');
        }
        Ok(())
    }

    /// The bytes the output may still grow by.
    fn output_left(&self) -> usize {
        self.meter
            .budget()
            .output_limit()
            .saturating_sub(self.out.len())
    }

    /// A directive written to the output (`#version`, `#extension`, `#pragma`), its
    /// tokens as written (not expanded), white space normalised.
    fn emit_directive(
        &mut self,
        file: u32,
        name: &Token,
        args: &[Token],
    ) -> Result<(), PreprocessError> {
        // `#`, the name, and each token with one separator, and the newline.
        let length = args.iter().fold(name.text.len() + 2, |sum, t| {
            sum.saturating_add(t.text.len() + 1)
        });
        if length > self.output_left() {
            let at = location(&self.files[file as usize].path, name);
            return Err(budget::exceeded(
                at,
                BudgetKind::OutputBytes,
                self.meter.budget(),
            ));
        }
        self.out.push('#');
        self.out.push_str(&name.text);
        let mut previous: &Token = name;
        for token in args {
            if token.space || would_merge(&previous.text, &token.text) {
                self.out.push(' ');
            }
            self.out.push_str(&token.text);
            previous = token;
        }
        self.out.push('\n');
        self.lines.push((file, name.line));
        Ok(())
    }

    fn condition(
        &mut self,
        name: &str,
        name_token: &Token,
        args: &[Token],
        file: u32,
        state: &FileState,
    ) -> Result<bool, PreprocessError> {
        let path: &str = &self.files[file as usize].path;
        let at = |token: &Token| location(path, token);
        if name != "if" && name != "elif" {
            let macro_name = single_name(name, name_token, args, &at)?;
            let defined = self.is_defined(macro_name);
            return Ok(defined == (name == "ifdef"));
        }
        let invalid = |message: String, token: &Token| PreprocessError::InvalidExpression {
            at: at(token),
            message,
        };
        // `defined X` and `defined ( X )` are answered before any expansion.
        let mut tokens = Vec::with_capacity(args.len());
        let mut i = 0;
        while i < args.len() {
            let token = &args[i];
            i += 1;
            if &*token.text != "defined" {
                tokens.push(token.clone());
                continue;
            }
            let parenthesised = args.get(i).is_some_and(|t| t.is_punct("("));
            let operand = args.get(i + usize::from(parenthesised));
            let Some(operand) = operand.filter(|t| t.kind == Kind::Ident) else {
                return Err(invalid("`defined` needs a macro name".into(), token));
            };
            i += 1 + usize::from(parenthesised);
            if parenthesised {
                if !args.get(i).is_some_and(|t| t.is_punct(")")) {
                    return Err(invalid("expected `)` after `defined(NAME`".into(), operand));
                }
                i += 1;
            }
            let value = if self.is_defined(&operand.text) {
                "1"
            } else {
                "0"
            };
            tokens.push(Token::made(Kind::Number, value, token));
        }
        if tokens.is_empty() {
            return Err(invalid("expected an expression".into(), name_token));
        }
        let builtins = self.builtins(file, state);
        let mut expander = Expander::new(&self.macros, &builtins, self.budget, self.output_left());
        let expanded = expander
            .expand(tokens)
            .map_err(|err| expand_error(path, &expander, err, self.meter.budget()))?;
        self.budget = expander.budget();
        if expanded.iter().any(|(_, t)| &*t.text == "defined") {
            return Err(invalid(
                "`defined` produced by a macro expansion is not allowed".into(),
                name_token,
            ));
        }
        let text = join(&expanded.into_iter().map(|(_, t)| t).collect::<Vec<_>>());
        expr::evaluate_as(&text, 0, &MacroTable::default(), expr::Flavor::Glslang)
            .map_err(|err| invalid(err.message, args.first().unwrap_or(name_token)))
    }

    fn is_defined(&self, name: &str) -> bool {
        matches!(name, "__LINE__" | "__FILE__" | "__VERSION__") || self.macros.get(name).is_some()
    }

    fn define(
        &mut self,
        file: u32,
        name_token: &Token,
        args: &[Token],
    ) -> Result<(), PreprocessError> {
        let path = Arc::clone(&self.files[file as usize].path);
        let at = |token: &Token| location(&path, token);
        let Some(macro_name) = args.first().filter(|t| t.kind == Kind::Ident) else {
            return Err(malformed(
                "define",
                "expected a macro name",
                at(args.first().unwrap_or(name_token)),
            ));
        };
        if BUILTINS.contains(&&*macro_name.text) {
            return Err(malformed(
                "define",
                "a built-in macro cannot be defined",
                at(macro_name),
            ));
        }
        if macro_name.text.starts_with("GL_") {
            return Err(malformed(
                "define",
                "names beginning with `GL_` are reserved (glslang refuses them)",
                at(macro_name),
            ));
        }
        let mut rest = &args[1..];
        let mut params = None;
        if let Some(open) = rest.first().filter(|t| t.is_punct("(") && !t.space) {
            let mut names: Vec<Arc<str>> = Vec::new();
            let mut i = 1;
            loop {
                let Some(token) = rest.get(i) else {
                    return Err(malformed(
                        "define",
                        "missing `)` after the parameters",
                        at(open),
                    ));
                };
                if token.is_punct(")") && names.is_empty() {
                    i += 1;
                    break;
                }
                if token.is_punct("...") {
                    return Err(malformed(
                        "define",
                        "variadic macros are not supported (glslang refuses them)",
                        at(token),
                    ));
                }
                if token.kind != Kind::Ident {
                    return Err(malformed("define", "expected a parameter name", at(token)));
                }
                if names.contains(&token.text) {
                    return Err(malformed("define", "duplicate parameter name", at(token)));
                }
                names.push(Arc::clone(&token.text));
                match rest.get(i + 1) {
                    Some(t) if t.is_punct(",") => i += 2,
                    Some(t) if t.is_punct(")") => {
                        i += 2;
                        break;
                    }
                    Some(t) => return Err(malformed("define", "expected `,` or `)`", at(t))),
                    None => {
                        return Err(malformed(
                            "define",
                            "missing `)` after the parameters",
                            at(open),
                        ))
                    }
                }
            }
            params = Some(names);
            rest = &rest[i..];
        } else if rest.first().is_some_and(|t| !t.space) {
            return Err(malformed(
                "define",
                "missing space after the macro name",
                at(&rest[0]),
            ));
        }
        let body = rest
            .iter()
            .cloned()
            .map(|mut token| {
                token.from_body = true;
                token
            })
            .collect();
        let definition = Macro {
            params,
            body,
            origin: Some(MacroOrigin {
                file,
                line: macro_name.line,
                columns: macro_name.columns(),
            }),
        };
        if let Some(existing) = self.macros.get(&macro_name.text) {
            if existing.same_as(&definition) {
                return Ok(());
            }
            return Err(PreprocessError::MacroRedefined {
                at: at(macro_name),
                name: macro_name.text.to_string(),
                previous: existing.origin.as_ref().map(|origin| SourceLocation {
                    file: PathBuf::from(&*self.files[origin.file as usize].path),
                    line: origin.line,
                    columns: origin.columns.clone(),
                }),
            });
        }
        self.macros.insert(Arc::clone(&macro_name.text), definition);
        Ok(())
    }

    fn line(
        &mut self,
        file: u32,
        line: &LogicalLine,
        name_token: &Token,
        args: &[Token],
        state: &mut FileState,
    ) -> Result<(), PreprocessError> {
        let path = Arc::clone(&self.files[file as usize].path);
        let at = |token: &Token| location(&path, token);
        let builtins = self.builtins(file, state);
        let mut expander = Expander::new(&self.macros, &builtins, self.budget, self.output_left());
        let expanded: Vec<Token> = expander
            .expand(args.to_vec())
            .map_err(|err| expand_error(&path, &expander, err, self.meter.budget()))?
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        self.budget = expander.budget();
        let number = expanded
            .first()
            .filter(|t| t.kind == Kind::Number)
            .and_then(|t| t.text.parse::<u32>().ok());
        let Some(number) = number else {
            return Err(malformed(
                "line",
                "expected a line number",
                at(args.first().unwrap_or(name_token)),
            ));
        };
        match expanded.get(1..) {
            Some([]) | None => {}
            Some([source]) if matches!(source.kind, Kind::Number | Kind::Str) => {
                state.file_token = Some(source.clone());
            }
            Some(_) => {
                return Err(malformed(
                    "line",
                    "expected a line number and an optional source-string number or \"name\"",
                    at(name_token),
                ))
            }
        }
        state.line_delta = i64::from(number) - (i64::from(line.last_line) + 1);
        Ok(())
    }

    fn include(
        &mut self,
        file: u32,
        lexed: &CLexed,
        line: &LogicalLine,
        name_token: &Token,
    ) -> Result<(), PreprocessError> {
        let including = Arc::clone(&self.files[file as usize].path);
        let spec = include_spec(lexed, line).map_err(|(message, token)| {
            malformed(
                "include",
                message,
                location(&including, token.unwrap_or(name_token)),
            )
        })?;
        let IncludeSpec { path, angled, at } = spec;
        let at = location(&including, at);
        let candidates = include_candidates(&including, path, angled, &self.include_dirs).map_err(
            |problem| PreprocessError::IncludePathRefused {
                at: at.clone(),
                spec: path.to_owned(),
                problem,
            },
        )?;
        let mut found = None;
        for candidate in &candidates {
            if let Some(&id) = self.by_path.get(candidate.as_str()) {
                found = Some(id);
                break;
            }
            match self.loader.load_viewed(Path::new(candidate)) {
                Ok(source) => {
                    found = Some(self.add_file(candidate.clone(), &source)?);
                    break;
                }
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => {
                    return Err(PreprocessError::IncludeUnreadable {
                        at,
                        path: candidate.into(),
                        message: err.to_string(),
                    })
                }
            }
        }
        let Some(child) = found else {
            return Err(PreprocessError::IncludeNotFound {
                at,
                path: candidates
                    .first()
                    .map_or_else(|| PathBuf::from(path), PathBuf::from),
            });
        };
        if self.files[child as usize].once {
            return Ok(());
        }
        // Entering a guarded file while its guard is defined would skip every line of it:
        // not entering gives the same run, and costs nothing (see `guard.rs`).
        let skipped = self.files[child as usize]
            .lexed
            .guard()
            .filter(|guard| self.is_defined(&guard.name))
            .map(|guard| guard.last_block);
        if let Some(last_block) = skipped {
            let active = &mut self.files[child as usize].active;
            FileView::mark(active, 0);
            FileView::mark(active, last_block);
            return Ok(());
        }
        if self.stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(include_stack::too_deep(&self.stack, child, at, |f| {
                PathBuf::from(&*self.files[f as usize].path)
            }));
        }
        self.meter.include(|| at.clone())?;
        self.stack.push(Frame {
            file: child,
            included_at: Some(at),
        });
        self.process_file(child)?;
        self.stack.pop();
        Ok(())
    }
}

fn placeholder() -> Token {
    Token {
        kind: Kind::Number,
        text: "0".into(),
        space: true,
        line: 0,
        column: 0,
        from_body: true,
    }
}

/// Token texts joined by single spaces.
fn join(tokens: &[Token]) -> String {
    let mut text = String::new();
    for (i, token) in tokens.iter().enumerate() {
        if i > 0 {
            text.push(' ');
        }
        text.push_str(&token.text);
    }
    text
}

fn location(path: &str, token: &Token) -> SourceLocation {
    SourceLocation {
        file: PathBuf::from(path),
        line: token.line,
        columns: token.columns(),
    }
}

fn expand_error(
    path: &str,
    expander: &Expander<'_>,
    err: ExpandError,
    budget: &PreprocessBudget,
) -> PreprocessError {
    // A name from a replacement list is reported where the text being expanded was.
    let at = |token: &Token| {
        if token.from_body || token.line == 0 {
            SourceLocation {
                file: PathBuf::from(path),
                line: expander.current_line(),
                columns: 0..1,
            }
        } else {
            location(path, token)
        }
    };
    match err {
        ExpandError::Unterminated { name } => PreprocessError::MacroCallUnterminated {
            at: at(&name),
            name: name.text.to_string(),
        },
        ExpandError::ArgumentCount {
            name,
            expected,
            found,
        } => PreprocessError::MacroArgumentCount {
            at: at(&name),
            name: name.text.to_string(),
            expected,
            found,
        },
        ExpandError::BadPaste { at: name, message } => PreprocessError::BadTokenPaste {
            at: at(&name),
            name: name.text.to_string(),
            message,
        },
        ExpandError::TooLarge { name } => PreprocessError::MacroExpansionTooLarge {
            at: at(&name),
            name: name.text.to_string(),
        },
        ExpandError::OverBudget { at: token } => {
            budget::exceeded(at(&token), BudgetKind::OutputBytes, budget)
        }
    }
}

/// The one macro name `#ifdef`, `#ifndef` or `#undef` takes.
fn single_name<'a>(
    directive: &str,
    name_token: &Token,
    args: &'a [Token],
    at: &dyn Fn(&Token) -> SourceLocation,
) -> Result<&'a str, PreprocessError> {
    match args {
        [name] if name.kind == Kind::Ident => Ok(&name.text),
        [] => Err(malformed(
            directive,
            "expected a macro name",
            at(name_token),
        )),
        [name] => Err(malformed(directive, "expected a macro name", at(name))),
        [_, extra, ..] => Err(malformed(
            directive,
            "unexpected text after the macro name",
            at(extra),
        )),
    }
}

fn malformed(directive: &str, message: &str, at: SourceLocation) -> PreprocessError {
    PreprocessError::MalformedDirective {
        at,
        directive: directive.to_owned(),
        message: message.to_owned(),
    }
}

fn unbalanced(directive: &str, message: &str, at: SourceLocation) -> PreprocessError {
    PreprocessError::UnbalancedConditional {
        at,
        directive: directive.to_owned(),
        message: message.to_owned(),
    }
}
