//! What every reader shares: the error that names file, line and column,
//! and reading a file's text or a one-line cpulist.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::cpuset::{parse_cpulist, CpuSet};

/// An input that is not a machine: where, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    pub file: PathBuf,
    /// 1-based; `None` when the fault is the file as a whole (missing, say).
    pub line: Option<usize>,
    /// 1-based character column within the line.
    pub column: Option<usize>,
    /// "expected ..., found ..." or a sentence that says both.
    pub message: String,
}

impl ReadError {
    pub(crate) fn new(
        file: &Path,
        line: Option<usize>,
        column: Option<usize>,
        message: impl Into<String>,
    ) -> Self {
        ReadError {
            file: file.to_path_buf(),
            line,
            column,
            message: message.into(),
        }
    }

    /// An error at byte `offset` of `text` (its line and column), read
    /// from `file`.
    pub fn at(file: &Path, text: &str, offset: usize, message: impl Into<String>) -> Self {
        let (l, c) = line_column(text, offset);
        ReadError::new(file, Some(l), Some(c), message)
    }

    /// An error of `file` as a whole.
    pub fn whole(file: &Path, message: impl Into<String>) -> Self {
        ReadError::new(file, None, None, message)
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ReadError {}

/// A file's text, or an error naming it.
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    fs::read_to_string(path).map_err(|e| ReadError::whole(path, format!("cannot read: {e}")))
}

/// Reads a one-line cpulist file (sysfs), errors at line 1 and its column.
pub(crate) fn read_cpulist(path: &Path) -> Result<CpuSet, ReadError> {
    let text = read_text(path)?;
    let first = text.lines().next().unwrap_or("");
    if text.trim_end().lines().count() > 1 {
        return Err(ReadError::new(
            path,
            Some(2),
            Some(1),
            "expected one line holding a cpulist, found a second line",
        ));
    }
    parse_cpulist(first).map_err(|e| {
        ReadError::new(
            path,
            Some(1),
            Some(e.column),
            format!("expected {}, found {}", e.expected, e.found),
        )
    })
}

/// The `(line, column)` of byte `offset` in `text`, both 1-based.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let mut cut = offset;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let before = &text[..cut];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, col)
}
