//! Shared by the `preprocess_*` tests: an in-memory loader that records every read.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kiln::preprocess::{
    preprocess, PreprocessBudget, PreprocessError, PreprocessRequest, Preprocessed, SourceLanguage,
    SourceLoader,
};

/// Source files in memory; every `load` is recorded, in order.
#[derive(Default)]
pub struct Files {
    texts: BTreeMap<PathBuf, Arc<str>>,
    loads: Mutex<Vec<PathBuf>>,
}

impl Files {
    pub fn new(files: &[(&str, &str)]) -> Self {
        let mut this = Self::default();
        for (path, text) in files {
            this.set(path, text);
        }
        this
    }

    pub fn set(&mut self, path: &str, text: &str) {
        self.texts.insert(PathBuf::from(path), Arc::from(text));
    }

    pub fn text(&self, path: &str) -> String {
        self.texts[Path::new(path)].to_string()
    }

    /// The paths loaded so far, in order, as strings.
    pub fn loads(&self) -> Vec<String> {
        self.loads
            .lock()
            .unwrap()
            .iter()
            .map(|p| p.to_str().unwrap().to_owned())
            .collect()
    }

    pub fn clear_loads(&self) {
        self.loads.lock().unwrap().clear();
    }
}

impl SourceLoader for Files {
    fn load(&self, path: &Path) -> Result<Arc<str>, io::Error> {
        self.loads.lock().unwrap().push(path.to_path_buf());
        self.texts
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }
}

pub fn run(
    files: &Files,
    entry: &str,
    language: SourceLanguage,
    keywords: &[&str],
    defines: &[(&str, &str)],
) -> Result<Preprocessed, PreprocessError> {
    preprocess(
        &PreprocessRequest {
            entry: Path::new(entry),
            language: language.into(),
            include_dirs: &[],
            keywords,
            defines,
            budget: PreprocessBudget::default(),
        },
        files,
    )
}

pub fn wgsl(
    files: &Files,
    entry: &str,
    keywords: &[&str],
) -> Result<Preprocessed, PreprocessError> {
    run(files, entry, SourceLanguage::Wgsl, keywords, &[])
}

pub fn glsl(
    files: &Files,
    entry: &str,
    keywords: &[&str],
) -> Result<Preprocessed, PreprocessError> {
    run(files, entry, SourceLanguage::Glsl, keywords, &[])
}

/// Each output line with its origin: (text, file, line).
pub fn origins(out: &Preprocessed) -> Vec<(String, String, u32)> {
    out.text
        .lines()
        .enumerate()
        .map(|(i, text)| {
            let origin = out
                .origin(u32::try_from(i + 1).unwrap())
                .expect("every output line has an origin");
            (
                text.to_owned(),
                origin.file.to_str().unwrap().to_owned(),
                origin.line,
            )
        })
        .collect()
}

/// (file, line, columns) of an error, as plain values.
pub fn place(err: &PreprocessError) -> (String, u32, std::ops::Range<u32>) {
    let (file, line, columns) = err
        .span()
        .unwrap_or_else(|| panic!("error without a location: {err}"));
    (file.to_str().unwrap().to_owned(), line, columns)
}
