//! Projects written as one string of files, in the shape of rust-analyzer's test fixtures:
//!
//! ```text
//! //- /kiln.toml
//! [project]
//! targets = ["spirv"]
//!
//! //- /shaders/a.wgsl
//! @fragment fn fs_main() {}
//! ```
//!
//! A line starting with `//- ` opens a file at the path after it (the leading `/` is the
//! project's root); the lines up to the next such line are its text. The whole string is
//! first unindented with [`trim_indent`], so a fixture can be indented with the test's code.

/// `text` without the first line break and with the indentation common to its non-blank
/// lines removed from every line, so that a raw string can sit indented in a test.
pub fn trim_indent(text: &str) -> String {
    let text = text.strip_prefix('\n').unwrap_or(text);
    let indent = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        // A blank line may be shorter than the indent; it stays blank.
        out.push_str(line.get(indent..).unwrap_or_else(|| {
            if line.ends_with('\n') {
                "\n"
            } else {
                ""
            }
        }));
    }
    out
}

/// The files of `fixture`, as (path relative to the root, text) pairs in their order.
///
/// Each text ends with one line break: the blank lines that separate files in the fixture
/// are not part of them. Panics on text before the first file, on an empty path and on a
/// path given twice, since each is a mistake in the test rather than a project to build.
pub fn parse(fixture: &str) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = Vec::new();
    for line in trim_indent(fixture).lines() {
        if let Some(path) = line.strip_prefix("//- ") {
            let path = path.trim().trim_start_matches('/');
            assert!(!path.is_empty(), "fixture: a `//-` line without a path");
            assert!(
                files.iter().all(|(seen, _)| seen != path),
                "fixture: {path} is given twice"
            );
            files.push((path.to_owned(), String::new()));
            continue;
        }
        match files.last_mut() {
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
            None => assert!(
                line.trim().is_empty(),
                "fixture: {line:?} comes before the first `//- /path` line"
            ),
        }
    }
    for (_, text) in &mut files {
        let kept = text.trim_end_matches('\n').len();
        text.truncate(kept);
        if kept > 0 {
            text.push('\n');
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_indent_removes_the_common_indent_and_the_first_line_break() {
        let text = "
            a
              b

            c
        ";
        assert_eq!(trim_indent(text), "a\n  b\n\nc\n");
        assert_eq!(trim_indent("no indent\n"), "no indent\n");
        assert_eq!(trim_indent(""), "");
    }

    #[test]
    fn files_are_split_on_their_markers() {
        let files = parse(
            r#"
            //- /kiln.toml
            [project]
            targets = ["spirv"]

            //- /shaders/a.wgsl
            fn a() {
                return;
            }
            //- shaders/empty.wgsl
            "#,
        );
        assert_eq!(
            files,
            [
                (
                    "kiln.toml".to_owned(),
                    "[project]\ntargets = [\"spirv\"]\n".to_owned()
                ),
                (
                    "shaders/a.wgsl".to_owned(),
                    "fn a() {\n    return;\n}\n".to_owned()
                ),
                ("shaders/empty.wgsl".to_owned(), String::new()),
            ]
        );
    }

    #[test]
    fn blank_lines_inside_a_file_are_kept() {
        let files = parse("//- /a\nx\n\n\ny\n\n//- /b\nz");
        assert_eq!(files[0].1, "x\n\n\ny\n");
        assert_eq!(files[1].1, "z\n");
    }

    #[test]
    #[should_panic(expected = "before the first")]
    fn text_before_the_first_file_is_refused() {
        parse("stray\n//- /a\n");
    }

    #[test]
    #[should_panic(expected = "given twice")]
    fn a_path_given_twice_is_refused() {
        parse("//- /a\n//- a\n");
    }
}
