//! One preprocessing run: walking the entry's lines, following conditionals and includes,
//! substituting macros, and writing the output text and its line map.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::budget::{self, BudgetKind, Meter, PreprocessBudget, Spent, Walk};
use super::cache::{lex, Preprocessor};
use super::directive::Directive;
use super::error::{PreprocessError, SourceLocation};
use super::expr;
use super::include_stack::{self, Frame};
use super::lexer::{LexLine, LexedFile};
use super::line_map::LineMap;
use super::loader::{FileView, SourceLoader};
use super::macros::{macro_name_len, ExpansionTooLarge, MacroOrigin, MacroTable};
use super::path::include_candidates;
use super::{Dialect, Preprocessed, MAX_INCLUDE_DEPTH};

/// A file read during this run.
struct LoadedFile {
    path: Arc<str>,
    lexed: Arc<LexedFile>,
    /// `#pragma once` was seen: later includes of it are skipped.
    once: bool,
    /// The blocks found active in any of its includes (see [`FileView`]).
    active: Vec<u64>,
}

/// An open `#if` / `#ifdef` / `#ifndef` group.
struct Conditional {
    /// Whether the enclosing text is active.
    parent_active: bool,
    /// Whether some branch of this group has been taken already.
    taken: bool,
    /// Whether `#else` was seen.
    in_else: bool,
    /// The opening directive's line and span, made a location only on error.
    opened: (LexLine, Range<u32>),
    directive: &'static str,
}

pub(crate) struct Driver<'l> {
    language: Dialect,
    include_dirs: Vec<String>,
    loader: &'l dyn SourceLoader,
    cache: Option<&'l Preprocessor>,
    macros: MacroTable,
    files: Vec<LoadedFile>,
    by_path: FxHashMap<Arc<str>, u32>,
    stack: Vec<Frame>,
    out: String,
    lines: Vec<(u32, u32)>,
    meter: Meter,
}

impl<'l> Driver<'l> {
    pub fn new(
        language: Dialect,
        include_dirs: Vec<String>,
        loader: &'l dyn SourceLoader,
        cache: Option<&'l Preprocessor>,
        budget: PreprocessBudget,
    ) -> Self {
        Self {
            language,
            include_dirs,
            loader,
            cache,
            macros: MacroTable::default(),
            files: Vec::new(),
            by_path: FxHashMap::default(),
            stack: Vec::new(),
            out: String::new(),
            lines: Vec::new(),
            meter: Meter::new(budget),
        }
    }

    /// Defines a macro before the first line (a keyword or a caller's define).
    pub fn predefine(&mut self, name: &str, value: &str) -> Result<(), PreprocessError> {
        let invalid = |message: &str| PreprocessError::InvalidPredefine {
            name: name.to_owned(),
            message: message.to_owned(),
        };
        if !super::macros::is_macro_name(name) {
            return Err(invalid("not an identifier ([A-Za-z_][A-Za-z0-9_]*)"));
        }
        if name == "defined" {
            return Err(invalid("`defined` cannot be a macro"));
        }
        self.macros
            .define(name, value, None)
            .map_err(|_| invalid("defined twice with different values"))
    }

    /// Preprocesses the (normalised) entry file; also says what the run spent.
    pub fn run(mut self, entry: String) -> (Result<Preprocessed, PreprocessError>, Spent) {
        let result = self.run_entry(entry);
        (result, self.meter.spent())
    }

    fn run_entry(&mut self, entry: String) -> Result<Preprocessed, PreprocessError> {
        let entry = self.load(entry, None)?;
        self.stack.push(Frame {
            file: entry,
            included_at: None,
        });
        let processed = self.process_file(entry);
        // Also after an error: it depends on the same part of each file.
        for file in &self.files {
            self.loader
                .viewed(&file.path, &FileView::new(false, file.active.clone()));
        }
        processed?;
        let files = self.files.iter().map(|f| PathBuf::from(&*f.path)).collect();
        Ok(Preprocessed {
            text: std::mem::take(&mut self.out),
            line_map: LineMap::new(files, std::mem::take(&mut self.lines)),
        })
    }

    /// Reads and lexes a file once per run; later requests reuse it.
    fn load(&mut self, path: String, at: Option<&SourceLocation>) -> Result<u32, PreprocessError> {
        if let Some(&id) = self.by_path.get(path.as_str()) {
            return Ok(id);
        }
        let source = self
            .loader
            .load_viewed(Path::new(&path))
            .map_err(|err| read_error(&path, at, &err))?;
        self.add_file(path, &source)
    }

    fn add_file(&mut self, path: String, source: &Arc<str>) -> Result<u32, PreprocessError> {
        if let Some(&id) = self.by_path.get(path.as_str()) {
            return Ok(id);
        }
        let lexed = match lex(self.cache, &path, source) {
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
        // The block a line is in: the number of directives before it. A block is marked
        // when entered active, also when empty: a line added to it is then seen.
        let mut block = 0usize;
        FileView::mark(&mut self.files[file as usize].active, block);
        let lines = lexed.lines();
        let mut walk = Walk::new(lexed.directive_indices(), lines.len());
        while let Some(index) = walk.next(active) {
            let line = &lines[index];
            let length = lexed.text(line).len();
            self.meter.read(length + 1, || {
                location(&path, &lexed, line, 0..to_u32(length))
            })?;
            if !line.directive {
                if active {
                    self.emit_code(file, &lexed, line)?;
                }
                continue;
            }
            block += 1;
            let text = lexed.text(line);
            let directive = Directive::parse(text);
            let at = |span: Range<u32>| location(&path, &lexed, line, span);
            match directive.name {
                name @ ("if" | "ifdef" | "ifndef") => {
                    let taken = active && self.condition(name, &directive, &at)?;
                    conditionals.push(Conditional {
                        parent_active: active,
                        taken,
                        in_else: false,
                        opened: (*line, directive.span.clone()),
                        directive: match name {
                            "if" => "if",
                            "ifdef" => "ifdef",
                            _ => "ifndef",
                        },
                    });
                    active = taken;
                }
                "elif" => {
                    let Some(group) = conditionals.last() else {
                        return Err(unbalanced(
                            "elif",
                            "without a matching #if",
                            at(directive.span.clone()),
                        ));
                    };
                    if group.in_else {
                        return Err(unbalanced(
                            "elif",
                            "after #else",
                            at(directive.span.clone()),
                        ));
                    }
                    let evaluate = group.parent_active && !group.taken;
                    let taken = evaluate && self.condition("elif", &directive, &at)?;
                    if let Some(group) = conditionals.last_mut() {
                        group.taken |= taken;
                    }
                    active = taken;
                }
                name @ ("else" | "endif") => {
                    if !directive.args.is_empty() {
                        return Err(malformed(
                            name,
                            "unexpected text after the directive",
                            at(directive.all_args_span()),
                        ));
                    }
                    let Some(group) = conditionals.last_mut() else {
                        return Err(unbalanced(
                            name,
                            "without a matching #if",
                            at(directive.span.clone()),
                        ));
                    };
                    if name == "endif" {
                        active = group.parent_active;
                        conditionals.pop();
                    } else {
                        if group.in_else {
                            return Err(unbalanced(
                                "else",
                                "after #else",
                                at(directive.span.clone()),
                            ));
                        }
                        group.in_else = true;
                        active = group.parent_active && !group.taken;
                        group.taken = true;
                    }
                }
                _ if !active => {}
                _ => self.directive(file, &lexed, line, &directive, &at)?,
            }
            if active {
                FileView::mark(&mut self.files[file as usize].active, block);
            }
        }
        match conditionals.pop() {
            Some(open) => Err(PreprocessError::UnterminatedConditional {
                at: location(&path, &lexed, &open.opened.0, open.opened.1),
                directive: open.directive.to_owned(),
            }),
            None => Ok(()),
        }
    }

    /// Carries out an active directive other than a conditional.
    fn directive(
        &mut self,
        file: u32,
        lexed: &LexedFile,
        line: &LexLine,
        directive: &Directive<'_>,
        at: &dyn Fn(Range<u32>) -> SourceLocation,
    ) -> Result<(), PreprocessError> {
        let text = lexed.text(line);
        match directive.name {
            "include" => self.include(file, directive, at)?,
            "define" => self.define(file, lexed, line, directive, at)?,
            "undef" => {
                let name = single_name("undef", directive, at)?;
                self.macros.undefine(name);
            }
            "error" => {
                return Err(PreprocessError::ErrorDirective {
                    at: at(directive.span.clone()),
                    message: directive.args.to_owned(),
                })
            }
            "pragma" => {
                if directive.args == "once" {
                    self.files[file as usize].once = true;
                } else if self.language != Dialect::Wgsl {
                    // GLSL and HLSL pragmas are the compiler's (`pack_matrix`, `optimize`).
                    self.emit_verbatim(file, lexed, line, text)?;
                } else {
                    return Err(unsupported(
                        "pragma",
                        "WGSL has no pragmas; only `#pragma once` is understood",
                        at(directive.span.clone()),
                    ));
                }
            }
            name @ ("version" | "extension") => {
                if self.language != Dialect::Glsl {
                    return Err(unsupported(
                        name,
                        "GLSL-only, not allowed in WGSL or HLSL",
                        at(directive.span.clone()),
                    ));
                }
                if name == "version" && !self.out.is_empty() {
                    return Err(PreprocessError::VersionNotFirst {
                        at: at(directive.span.clone()),
                    });
                }
                self.emit_verbatim(file, lexed, line, text)?;
            }
            "line" => {
                return Err(unsupported(
                    "line",
                    "kiln keeps its own line map; `#line` would break it",
                    at(directive.span.clone()),
                ));
            }
            // `#` alone is C's null directive.
            "" if directive.args.is_empty() => {}
            "" => {
                let word = directive
                    .args
                    .split_ascii_whitespace()
                    .next()
                    .unwrap_or_default();
                return Err(PreprocessError::UnknownDirective {
                    at: at(directive.span.clone()),
                    name: word.to_owned(),
                });
            }
            other => {
                return Err(PreprocessError::UnknownDirective {
                    at: at(directive.span.clone()),
                    name: other.to_owned(),
                })
            }
        }
        Ok(())
    }

    /// Evaluates the condition of `#if`, `#elif`, `#ifdef` or `#ifndef`.
    fn condition(
        &self,
        name: &str,
        directive: &Directive<'_>,
        at: &dyn Fn(Range<u32>) -> SourceLocation,
    ) -> Result<bool, PreprocessError> {
        match name {
            "ifdef" | "ifndef" => {
                let macro_name = single_name(name, directive, at)?;
                Ok(self.macros.is_defined(macro_name) == (name == "ifdef"))
            }
            _ => {
                expr::evaluate(directive.args, directive.args_start, &self.macros).map_err(|err| {
                    PreprocessError::InvalidExpression {
                        at: at(if directive.args.is_empty() {
                            directive.span.clone()
                        } else {
                            err.span
                        }),
                        message: err.message,
                    }
                })
            }
        }
    }

    fn define(
        &mut self,
        file: u32,
        lexed: &LexedFile,
        line: &LexLine,
        directive: &Directive<'_>,
        at: &dyn Fn(Range<u32>) -> SourceLocation,
    ) -> Result<(), PreprocessError> {
        let args = directive.args;
        let name_len = macro_name_len(args);
        if name_len == 0 {
            return Err(malformed(
                "define",
                "expected a macro name",
                at(directive.all_args_span()),
            ));
        }
        let name = &args[..name_len];
        let name_span = directive.args_span(0..name_len);
        if args[name_len..].starts_with('(') {
            return Err(PreprocessError::FunctionLikeMacro {
                at: at(name_span),
                name: name.to_owned(),
            });
        }
        if name == "defined" {
            return Err(malformed(
                "define",
                "`defined` cannot be a macro",
                at(name_span),
            ));
        }
        let origin = MacroOrigin {
            file,
            line: line.number,
            columns: lexed.original_column(line, name_span.start)
                ..lexed.original_column(line, name_span.end),
        };
        self.macros
            .define(name, &args[name_len..], Some(origin))
            .map_err(|previous| PreprocessError::MacroRedefined {
                at: at(name_span),
                name: name.to_owned(),
                previous: previous.map(|origin| SourceLocation {
                    file: PathBuf::from(&*self.files[origin.file as usize].path),
                    line: origin.line,
                    columns: origin.columns,
                }),
            })
    }

    fn include(
        &mut self,
        file: u32,
        directive: &Directive<'_>,
        at: &dyn Fn(Range<u32>) -> SourceLocation,
    ) -> Result<(), PreprocessError> {
        let (spec, span) = directive
            .include_spec()
            .map_err(|message| malformed("include", message, at(directive.all_args_span())))?;
        let location = at(span);
        let candidates = include_candidates(
            &self.files[file as usize].path,
            spec,
            false,
            &self.include_dirs,
        )
        .map_err(|problem| PreprocessError::IncludePathRefused {
            at: location.clone(),
            spec: spec.to_owned(),
            problem,
        })?;
        let mut child = None;
        for (index, candidate) in candidates.iter().enumerate() {
            let last = index + 1 == candidates.len();
            if let Some(&id) = self.by_path.get(candidate.as_str()) {
                child = Some(id);
                break;
            }
            match self.loader.load_viewed(Path::new(candidate)) {
                Err(err) if err.kind() == std::io::ErrorKind::NotFound && !last => {}
                Err(err) => return Err(read_error(candidate, Some(&location), &err)),
                Ok(source) => {
                    child = Some(self.add_file(candidate.clone(), &source)?);
                    break;
                }
            }
        }
        let Some(child) = child else {
            return Err(read_error(
                spec,
                Some(&location),
                &std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        };
        let included = &mut self.files[child as usize];
        if included.once {
            return Ok(());
        }
        // Entering a guarded file while its guard is defined would skip every line of it:
        // not entering gives the same run, and costs nothing (see `guard.rs`).
        if let Some(guard) = included.lexed.guard() {
            if self.macros.is_defined(&guard.name) {
                FileView::mark(&mut included.active, 0);
                FileView::mark(&mut included.active, guard.last_block);
                return Ok(());
            }
        }
        if self.stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(include_stack::too_deep(&self.stack, child, location, |f| {
                PathBuf::from(&*self.files[f as usize].path)
            }));
        }
        self.meter.include(|| location.clone())?;
        self.stack.push(Frame {
            file: child,
            included_at: Some(location),
        });
        self.process_file(child)?;
        self.stack.pop();
        Ok(())
    }

    fn emit_code(
        &mut self,
        file: u32,
        lexed: &LexedFile,
        line: &LexLine,
    ) -> Result<(), PreprocessError> {
        let start = self.out.len();
        let max_len = self.meter.budget().output_limit();
        if let Err(too_large) = self.macros.expand_line(
            lexed.text(line),
            lexed.identifiers(line),
            &mut self.out,
            max_len,
        ) {
            let span = 0..u32::try_from(lexed.text(line).len()).unwrap_or(u32::MAX);
            let at = location(&self.files[file as usize].path, lexed, line, span);
            return Err(match too_large {
                ExpansionTooLarge::Budget => {
                    budget::exceeded(at, BudgetKind::OutputBytes, self.meter.budget())
                }
                ExpansionTooLarge::Macro { name } => {
                    PreprocessError::MacroExpansionTooLarge { at, name }
                }
            });
        }
        // A line can expand to nothing (`EMPTY_MACRO`); it must vanish like a blank line.
        let kept = self.out[start..].trim_end().len();
        if kept == 0 {
            self.out.truncate(start);
            return Ok(());
        }
        self.out.truncate(start + kept);
        self.out.push('\n');
        self.lines.push((file, line.number));
        Ok(())
    }

    /// A GLSL directive passed to naga as written (`#version`, `#extension`, `#pragma`).
    fn emit_verbatim(
        &mut self,
        file: u32,
        lexed: &LexedFile,
        line: &LexLine,
        text: &str,
    ) -> Result<(), PreprocessError> {
        let text = text.trim();
        if self.out.len() + text.len() + 1 > self.meter.budget().output_limit() {
            let span = 0..u32::try_from(text.len()).unwrap_or(u32::MAX);
            let at = location(&self.files[file as usize].path, lexed, line, span);
            return Err(budget::exceeded(
                at,
                BudgetKind::OutputBytes,
                self.meter.budget(),
            ));
        }
        self.out.push_str(text);
        self.out.push('\n');
        self.lines.push((file, line.number));
        Ok(())
    }
}

/// A span of a line's comment-free text, as a location in the original file.
fn location(path: &str, lexed: &LexedFile, line: &LexLine, span: Range<u32>) -> SourceLocation {
    SourceLocation {
        file: PathBuf::from(path),
        line: line.number,
        columns: lexed.original_column(line, span.start)..lexed.original_column(line, span.end),
    }
}

/// The one macro name `#ifdef`, `#ifndef` or `#undef` takes.
fn single_name<'a>(
    directive_name: &str,
    directive: &Directive<'a>,
    at: &dyn Fn(Range<u32>) -> SourceLocation,
) -> Result<&'a str, PreprocessError> {
    let args = directive.args;
    let len = macro_name_len(args);
    if len == 0 {
        return Err(malformed(
            directive_name,
            "expected a macro name",
            at(directive.all_args_span()),
        ));
    }
    if len < args.len() {
        let rest = &args[len..];
        let extra = len + (rest.len() - rest.trim_start().len());
        return Err(malformed(
            directive_name,
            "unexpected text after the macro name",
            at(directive.args_span(extra..args.len())),
        ));
    }
    Ok(args)
}

fn read_error(path: &str, at: Option<&SourceLocation>, err: &std::io::Error) -> PreprocessError {
    match at {
        None => PreprocessError::EntryUnreadable {
            file: path.into(),
            message: err.to_string(),
        },
        Some(at) if err.kind() == std::io::ErrorKind::NotFound => {
            PreprocessError::IncludeNotFound {
                at: at.clone(),
                path: path.into(),
            }
        }
        Some(at) => PreprocessError::IncludeUnreadable {
            at: at.clone(),
            path: path.into(),
            message: err.to_string(),
        },
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

fn unsupported(name: &str, reason: &str, at: SourceLocation) -> PreprocessError {
    PreprocessError::UnsupportedDirective {
        at,
        name: name.to_owned(),
        reason: reason.to_owned(),
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
