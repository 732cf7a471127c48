//! rt-app's JSON as json-c takes it: C comments and trailing commas
//! blanked (positions kept), objects read in file order with every value
//! still raw, so each error can name its line and column.

use std::collections::BTreeMap;
use std::path::Path;

use schedlab_topology::read::ReadError;
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
    /// The mutexes the thread being read holds at this point of its
    /// events, in file order (an unlock of one it does not hold is an
    /// error at its place).
    pub(super) held: std::collections::BTreeSet<String>,
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
        ReadError::at(self.file, self.text, offset, message)
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

/// An object or array `workgen` is inside of.
struct Frame {
    object: bool,
    /// The key it is the value of.
    key: Option<String>,
    /// The keys it has, as numbered.
    keys: std::collections::BTreeSet<String>,
    next_id: u32,
}

impl Frame {
    /// Key `name` as workgen numbers it here: itself the first time, else
    /// with the counter appended, moved on while the numbered key is taken.
    fn numbered(&mut self, name: &str) -> String {
        let mut key = name.to_string();
        while self.keys.contains(&key) {
            key = format!("{name}{}", self.next_id);
            if self.keys.contains(&key) {
                self.next_id += 1;
            }
        }
        self.keys.insert(key.clone());
        key
    }
}

/// The closing quote of the string opening at `b[i]`, past escapes.
fn string_end(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    while i < b.len() && b[i] != b'"' {
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    (i < b.len()).then_some(i)
}

/// The thread whose object the innermost frame is in (`tasks.THREAD`, at
/// any depth below it).
fn thread_of(stack: &[Frame]) -> Option<String> {
    match (stack.get(1), stack.get(2)) {
        (Some(t), Some(th)) if t.key.as_deref() == Some("tasks") => th.key.clone(),
        _ => None,
    }
}

/// What rt-app's `workgen` script does to a file before rt-app reads it
/// (`doc/workgen`: `check_suspend_json()`, then `check_unikid_json()`),
/// done on the JSON's tokens rather than its lines:
///
/// * a bare `"suspend"` member (no `:` and no value) becomes `"suspend" :
///   "THREAD"`, THREAD being the key of the thread object it is in
///   (`tasks.THREAD`, at any depth below it);
/// * a key repeated in one object gets a number appended: the object's
///   counter (from 1), moved on while the numbered key is taken, as
///   `KEY1`, `KEY2`, ... (json-c keeps only the last of a repeated key).
///
/// Returns the text rewritten and a note per rewrite at its byte offset.
/// No newline is added, so lines stay the file's; a column after an
/// insertion on its line moves by the insertion.
pub(super) fn workgen(text: &str) -> (String, Vec<(usize, String)>) {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut notes = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let (mut expect_key, mut last_key): (bool, Option<String>) = (false, None);
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' | b'[' => {
                stack.push(Frame {
                    object: b[i] == b'{',
                    key: last_key.take(),
                    keys: Default::default(),
                    next_id: 1,
                });
                expect_key = b[i] == b'{';
            }
            b'}' | b']' => {
                stack.pop();
                expect_key = false;
            }
            b',' => {
                last_key = None;
                expect_key = stack.last().is_some_and(|f| f.object);
            }
            b'"' => {
                let start = i;
                let Some(close) = string_end(b, i) else {
                    // An unterminated string: the parser reports it.
                    break;
                };
                i = close;
                let end = i + 1;
                let name = &text[start + 1..i];
                let next = b[end..].iter().find(|c| !c.is_ascii_whitespace()).copied();
                let in_object = stack.last().is_some_and(|f| f.object);
                if expect_key && in_object && matches!(next, Some(b':' | b',' | b'}')) {
                    let bare = next != Some(b':');
                    let thread = thread_of(&stack);
                    if bare && (name != "suspend" || thread.is_none()) {
                        // A syntax error, left for the parser to report.
                        i = end;
                        expect_key = false;
                        continue;
                    }
                    let key = stack.last_mut().expect("in an object").numbered(name);
                    if key != name {
                        notes.push((
                            start,
                            format!("{name:?} repeated in one object: read as {key:?}, the number workgen gives it"),
                        ));
                    }
                    out.push_str(&text[copied..start]);
                    out.push_str(&format!("\"{key}\""));
                    copied = end;
                    if bare {
                        let t = thread.expect("checked");
                        out.push_str(&format!(" : \"{t}\""));
                        notes.push((
                            start,
                            format!("a bare \"suspend\" in thread {t:?}: given the thread's name, as workgen does"),
                        ));
                    }
                    last_key = Some(key);
                    expect_key = false;
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out.push_str(&text[copied.min(text.len())..]);
    (out, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workgen_names_a_bare_suspend_and_numbers_repeated_keys() {
        // video-short.json's DispSync, as rt-app ships it (after comments).
        let text = r#"{ "tasks" : { "DispSync" : { "phases" : { "p1" : {
            "suspend",
            "run" : 35,
            "resume" : "EventThread",
            "run" : 40
        } } } } }"#;
        let (out, notes) = workgen(text);
        let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON now");
        let p1 = &v["tasks"]["DispSync"]["phases"]["p1"];
        assert_eq!(p1["suspend"], "DispSync", "{out}");
        assert_eq!(
            (p1["run"].as_i64(), p1["run1"].as_i64()),
            (Some(35), Some(40)),
            "{out}"
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert_eq!(out.lines().count(), text.lines().count(), "no line added");
    }

    #[test]
    fn workgen_moves_its_counter_past_a_taken_number() {
        // check_unikid_json(): run -> run1 (taken) -> run2; the counter
        // is the object's, so a later sleep repeat is sleep2.
        let (out, _) = workgen(r#"{"run": 1, "run1": 2, "run": 3, "sleep": 4, "sleep": 5}"#);
        assert_eq!(
            out,
            r#"{"run": 1, "run1": 2, "run2": 3, "sleep": 4, "sleep2": 5}"#
        );
    }

    #[test]
    fn an_unterminated_string_is_left_for_the_parser() {
        for text in ["{\"ab\u{20ac}", "{\"a\\", "{\"tasks\": {\"t\": {\"suspend"] {
            assert_eq!(workgen(text).0, text, "unchanged: {text:?}");
        }
    }

    #[test]
    fn a_file_workgen_need_not_touch_is_left_as_it_is() {
        let text = r#"{ "tasks": { "a": { "run": 10, "sleep": 10 } }, "global": {} }"#;
        assert_eq!(workgen(text), (text.to_string(), vec![]));
    }
}
