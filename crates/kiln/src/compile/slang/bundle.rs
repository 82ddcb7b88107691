//! A Slang variant's whole input as one text: the entry file, every file its imports and
//! includes can reach with the content kiln read through its engine, the search directories
//! and the macros. Slang is given exactly these files and nothing from the disk (the worker's
//! file system serves only them), so the compile is a function of this text: its hash keys
//! the variant cache and the store like a preprocessed text, and no file kiln did not track
//! can reach an artifact.
//!
//! The encoding is line-based with length-prefixed fields (`<bytes>:<field>`), so that no two
//! bundles share a text whatever the paths or contents hold.

use super::super::{CompileError, CompilePhase};

const MAGIC: &str = "kiln-slang-bundle 1\n";

/// A decoded bundle, borrowing the text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlangBundle<'a> {
    /// The entry file (root-relative, `/`-separated).
    pub main: &'a str,
    /// The directories searched for imports and includes, in order (root-relative).
    pub search_dirs: Vec<&'a str>,
    /// The preprocessor macros: keywords as `NAME` = `1`, then the manifest's defines.
    pub defines: Vec<(&'a str, &'a str)>,
    /// Every file Slang may read, with its content, the entry first.
    pub files: Vec<(&'a str, &'a str)>,
}

impl<'a> SlangBundle<'a> {
    /// The bundle as one text.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(
            MAGIC.len()
                + 64
                + self
                    .files
                    .iter()
                    .map(|(p, t)| p.len() + t.len() + 24)
                    .sum::<usize>(),
        );
        out.push_str(MAGIC);
        field_line(&mut out, "main", &[self.main]);
        for dir in &self.search_dirs {
            field_line(&mut out, "dir", &[dir]);
        }
        for (name, value) in &self.defines {
            field_line(&mut out, "define", &[name, value]);
        }
        for (path, text) in &self.files {
            field_line(&mut out, "file", &[path, text]);
        }
        out
    }

    /// Reads a bundle written by [`SlangBundle::encode`].
    pub fn decode(text: &'a str) -> Result<Self, CompileError> {
        let malformed = |what: &str| {
            CompileError::new(
                CompilePhase::Parse,
                format!("not a Slang bundle: {what}"),
                None,
            )
        };
        let mut rest = text
            .strip_prefix(MAGIC)
            .ok_or_else(|| malformed("no header"))?;
        let mut bundle = SlangBundle::default();
        let mut has_main = false;
        while !rest.is_empty() {
            let (tag, after) = rest
                .split_once(' ')
                .ok_or_else(|| malformed("a line without a tag"))?;
            rest = after;
            let mut next = || -> Result<&'a str, CompileError> {
                let (field, after) = take_field(rest).ok_or_else(|| malformed("a bad field"))?;
                rest = after;
                Ok(field)
            };
            match tag {
                "main" => {
                    bundle.main = next()?;
                    has_main = true;
                }
                "dir" => bundle.search_dirs.push(next()?),
                "define" => {
                    let name = next()?;
                    let value = next()?;
                    bundle.defines.push((name, value));
                }
                "file" => {
                    let path = next()?;
                    let content = next()?;
                    bundle.files.push((path, content));
                }
                _ => return Err(malformed("an unknown tag")),
            }
            rest = rest
                .strip_prefix('\n')
                .ok_or_else(|| malformed("a line that does not end"))?;
        }
        if !has_main {
            return Err(malformed("no entry file"));
        }
        Ok(bundle)
    }
}

impl SlangBundle<'_> {
    /// Per line of the bundle's text `text` (what [`SlangBundle::decode`] read), where it came
    /// from: `(index in files, 1-based line)`; a line of the header names the entry file's
    /// first line. A file's first line shares its bundle line with the file's tag, after it,
    /// so a position in a file is that line with the file's own column.
    pub fn line_origins(&self, text: &str) -> Vec<(u32, u32)> {
        let mut origins = Vec::with_capacity(text.bytes().filter(|&b| b == b'\n').count());
        let mut at = 0;
        for (index, (_, content)) in self.files.iter().enumerate() {
            let start = offset_in(text, content);
            let header_lines = text[at..start].bytes().filter(|&b| b == b'\n').count();
            origins.extend(std::iter::repeat_n((0, 1), header_lines));
            let lines = content.bytes().filter(|&b| b == b'\n').count() + 1;
            origins.extend((1..=lines).map(|line| (index as u32, line as u32)));
            // The content's last line ends with the tag line's own newline.
            at = start + content.len() + 1;
        }
        let rest = text.get(at..).unwrap_or("");
        origins.extend(std::iter::repeat_n(
            (0, 1),
            rest.bytes().filter(|&b| b == b'\n').count(),
        ));
        origins
    }

    /// The 1-based bundle line of line `line` of file `path`, if the bundle holds it.
    pub fn bundle_line(&self, text: &str, path: &str, line: u32) -> Option<u32> {
        let (_, content) = self.files.iter().find(|(p, _)| *p == path)?;
        let lines = content.bytes().filter(|&b| b == b'\n').count() + 1;
        if line == 0 || line as usize > lines {
            return None;
        }
        let start = offset_in(text, content);
        let before = text[..start].bytes().filter(|&b| b == b'\n').count();
        u32::try_from(before + line as usize).ok()
    }
}

/// Where `part`, a slice of `text`, starts in it.
fn offset_in(text: &str, part: &str) -> usize {
    (part.as_ptr() as usize)
        .saturating_sub(text.as_ptr() as usize)
        .min(text.len())
}

/// `tag <len>:<field> <len>:<field>\n`.
fn field_line(out: &mut String, tag: &str, fields: &[&str]) {
    out.push_str(tag);
    for field in fields {
        out.push(' ');
        out.push_str(&field.len().to_string());
        out.push(':');
        out.push_str(field);
    }
    out.push('\n');
}

/// One ` <len>:<field>` (the leading space optional for the first), and what follows it.
fn take_field(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix(' ').unwrap_or(text);
    let (len, rest) = text.split_once(':')?;
    if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) || len.len() > 12 {
        return None;
    }
    let len: usize = len.parse().ok()?;
    if !rest.is_char_boundary(len.min(rest.len())) || rest.len() < len {
        return None;
    }
    Some(rest.split_at(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_reads_back_whatever_its_fields_hold() {
        let bundle = SlangBundle {
            main: "shaders/main.slang",
            search_dirs: vec!["shaders/modules", "weird dir/with\nnewline"],
            defines: vec![("FOG", "1"), ("N", "4 2:3 ")],
            files: vec![
                ("shaders/main.slang", "import lighting;\nfile 3:abc\n"),
                ("shaders/modules/lighting.slang", ""),
                ("ünïcode/パス.slang", "// \u{1F600}\n"),
            ],
        };
        let text = bundle.encode();
        assert_eq!(SlangBundle::decode(&text).unwrap(), bundle);
        // Field boundaries are in the encoding: moving a byte between fields changes it.
        let moved = SlangBundle {
            defines: vec![("FOG", "1"), ("N", "4 2:3")],
            files: vec![
                ("shaders/main.slang", " import lighting;\nfile 3:abc\n"),
                ("shaders/modules/lighting.slang", ""),
                ("ünïcode/パス.slang", "// \u{1F600}\n"),
            ],
            ..bundle.clone()
        };
        assert_ne!(moved.encode(), text);
    }

    #[test]
    fn every_line_of_a_bundle_names_its_file_and_line() {
        let bundle = SlangBundle {
            main: "m.slang",
            search_dirs: vec!["inc"],
            defines: vec![("FOG", "1")],
            files: vec![("m.slang", "a\nb\n"), ("inc/x.slang", "x1\nx2")],
        };
        let text = bundle.encode();
        let decoded = SlangBundle::decode(&text).unwrap();
        let origins = decoded.line_origins(&text);
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        assert_eq!(origins.len(), lines.len());
        for (file, (path, content)) in bundle.files.iter().enumerate() {
            for (n, source_line) in content.split('\n').enumerate() {
                let at = decoded.bundle_line(&text, path, n as u32 + 1).unwrap();
                assert_eq!(origins[at as usize - 1], (file as u32, n as u32 + 1));
                assert!(lines[at as usize - 1].contains(source_line), "{path}:{n}");
            }
        }
        assert_eq!(decoded.bundle_line(&text, "inc/x.slang", 3), None);
        assert_eq!(decoded.bundle_line(&text, "nope.slang", 1), None);
    }

    #[test]
    fn a_damaged_bundle_is_an_error_not_a_panic() {
        let text = SlangBundle {
            main: "a.slang",
            files: vec![("a.slang", "float4 main() {}")],
            ..Default::default()
        }
        .encode();
        for cut in 0..text.len() {
            if text.is_char_boundary(cut) {
                let _ = SlangBundle::decode(&text[..cut]);
            }
        }
        for bad in [
            "",
            "kiln-slang-bundle 1\n",
            "kiln-slang-bundle 1\nfile 99:x\n",
            "kiln-slang-bundle 1\nmain 1:a",
        ] {
            assert!(SlangBundle::decode(bad).is_err(), "{bad:?}");
        }
    }
}
