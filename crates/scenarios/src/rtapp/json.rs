//! rt-app's JSON as json-c takes it: C comments and trailing commas
//! blanked (positions kept), objects read in file order with every value
//! still raw, so each error can name its line and column.

use std::collections::BTreeMap;
use std::path::Path;

use schedlab_topology::read::{line_column, ReadError};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

/// A JSON object's members in file order (duplicates kept, as workgen's
/// numbered keys would be), each value still raw so it knows its place.
pub(super) struct Obj<'a>(pub(super) Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Obj<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Obj<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Obj<'de>, M::Error> {
                let mut v = Vec::new();
                while let Some(e) = m.next_entry::<String, &'de RawValue>()? {
                    v.push(e);
                }
                Ok(Obj(v))
            }
        }
        d.deserialize_map(V)
    }
}

/// The file being read: its text, its name, and what it noted.
pub(super) struct Reader<'a> {
    pub(super) text: &'a str,
    pub(super) file: &'a Path,
    pub(super) notes: Vec<String>,
    /// rt-app's legacy `resources` section: a `signal` or `broadcast`
    /// resource names the condition (`target`) its events wake.
    pub(super) targets: BTreeMap<String, String>,
}

pub(super) type Res<T> = Result<T, ReadError>;

impl<'a> Reader<'a> {
    /// Where `v` starts in the text, in bytes.
    pub(super) fn offset(&self, v: &RawValue) -> usize {
        (v.get().as_ptr() as usize).saturating_sub(self.text.as_ptr() as usize)
    }

    pub(super) fn at(&self, v: &RawValue, message: String) -> ReadError {
        self.at_offset(self.offset(v), message)
    }

    pub(super) fn at_offset(&self, offset: usize, message: String) -> ReadError {
        let (l, c) = line_column(self.text, offset);
        ReadError {
            file: self.file.to_path_buf(),
            line: Some(l),
            column: Some(c),
            message,
        }
    }

    pub(super) fn note(&mut self, v: &RawValue, what: &str) {
        let e = self.at(v, what.to_string());
        self.notes.push(e.to_string());
    }

    pub(super) fn parse<T: Deserialize<'a>>(&self, v: &'a RawValue, expected: &str) -> Res<T> {
        serde_json::from_str(v.get()).map_err(|_| {
            let found: String = v.get().chars().take(40).collect();
            self.at(v, format!("expected {expected}, found {found}"))
        })
    }

    pub(super) fn obj(&self, v: &'a RawValue) -> Res<Obj<'a>> {
        self.parse(v, "an object")
    }

    pub(super) fn int(&self, v: &'a RawValue) -> Res<i64> {
        self.parse(v, "an integer")
    }

    /// A duration in µs, as ns.
    pub(super) fn us(&self, v: &'a RawValue) -> Res<u64> {
        let n = self.int(v)?;
        u64::try_from(n)
            .map(|n| n.saturating_mul(1000))
            .map_err(|_| {
                self.at(
                    v,
                    format!("expected a duration in µs (0 or more), found {n}"),
                )
            })
    }

    pub(super) fn string(&self, v: &'a RawValue) -> Res<String> {
        self.parse(v, "a string")
    }

    /// The condition a signal names: its legacy resource's target, if any.
    pub(super) fn target(&self, name: String) -> String {
        self.targets.get(&name).cloned().unwrap_or(name)
    }
}

/// Blanks C comments (`/* */`, `//`) to spaces, keeping every newline, so
/// offsets, lines and columns stay the file's.
pub(super) fn strip_comments(text: &str) -> Result<String, String> {
    use std::io::Read;
    let settings = json_comments::CommentSettings::c_style();
    let mut out = Vec::with_capacity(text.len());
    settings
        .strip_comments(text.as_bytes())
        .read_to_end(&mut out)
        .map_err(|e| format!("unbalanced comment: {e}"))?;
    for (o, i) in out.iter_mut().zip(text.bytes()) {
        if i == b'\n' {
            *o = b'\n';
        }
    }
    blank_trailing_commas(&mut out);
    String::from_utf8(out).map_err(|e| format!("not UTF-8 after comments: {e}"))
}

/// Blanks a comma that only whitespace separates from a closing `}` or
/// `]`: json-c, which rt-app reads with, accepts one there (rt-app's own
/// examples have them); serde_json does not.
fn blank_trailing_commas(b: &mut [u8]) {
    let (mut in_string, mut escaped) = (false, false);
    let mut comma: Option<usize> = None;
    for i in 0..b.len() {
        let c = b[i];
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => {
                in_string = true;
                comma = None;
            }
            b',' => comma = Some(i),
            b'}' | b']' => {
                if let Some(j) = comma.take() {
                    b[j] = b' ';
                }
            }
            c if c.is_ascii_whitespace() => {}
            _ => comma = None,
        }
    }
}
