//! The TOML topology format's reader (the module doc of `read` has the
//! format).

use std::path::Path;

use serde::Deserialize;

use super::error::{read_text, ReadError};
use crate::cpuset::{parse_cpulist, CpuSet};
use crate::topology::{Shape, Siblings, Topology};

/// The TOML topology format (see the module doc), as a serde type.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    pub name: Option<String>,
    /// A preset's name, for scenario files: `preset = "amd-2x8"`.
    pub preset: Option<toml::Spanned<String>>,
    pub shape: Option<ShapeSpec>,
    #[serde(default)]
    pub node: Vec<NodeSpec>,
    /// Every LLC's size in bytes (a preset's own, or 32 MiB, otherwise).
    pub llc_bytes: Option<toml::Spanned<u64>>,
    /// The kernel's `CONFIG_HZ` (default 1000).
    pub hz: Option<toml::Spanned<u32>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeSpec {
    pub nodes: usize,
    pub llcs_per_node: usize,
    pub cores_per_llc: usize,
    pub threads_per_core: usize,
    #[serde(default = "adjacent")]
    pub siblings: SiblingsSpec,
}

fn adjacent() -> SiblingsSpec {
    SiblingsSpec::Adjacent
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SiblingsSpec {
    Adjacent,
    Split,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub id: Option<u32>,
    #[serde(default)]
    pub llc: Vec<LlcSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlcSpec {
    pub cores: Vec<toml::Spanned<String>>,
}

impl TopologySpec {
    /// Builds the machine. `text` is the document the spec was read from, so
    /// errors can point into it; `default_name` is used when it names none.
    pub fn build(
        &self,
        text: &str,
        file: &Path,
        default_name: &str,
    ) -> Result<Topology, ReadError> {
        let mut t = self.groups(text, file, default_name)?;
        if let Some(hz) = &self.hz {
            let v = *hz.get_ref();
            if !(1..=10_000).contains(&v) {
                return Err(ReadError::at(
                    file,
                    text,
                    hz.span().start,
                    format!("expected hz (CONFIG_HZ) from 1 to 10000, found {v}"),
                ));
            }
            t = t.with_hz(v);
        }
        match &self.llc_bytes {
            None => Ok(t),
            Some(b) if *b.get_ref() == 0 => Err(ReadError::at(
                file,
                text,
                b.span().start,
                "expected llc_bytes of 1 or more, found 0",
            )),
            Some(b) => Ok(t.with_llc_bytes(*b.get_ref())),
        }
    }

    fn groups(&self, text: &str, file: &Path, default_name: &str) -> Result<Topology, ReadError> {
        let at = |offset: usize, msg: String| ReadError::at(file, text, offset, msg);
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| default_name.to_string());
        let sources = self.preset.is_some() as u8
            + self.shape.is_some() as u8
            + (!self.node.is_empty()) as u8;
        if sources != 1 {
            return Err(ReadError::new(
                file,
                None,
                None,
                format!("expected exactly one of `preset`, `[shape]` or `[[node]]` tables, found {sources}"),
            ));
        }
        if let Some(p) = &self.preset {
            let t = crate::presets::preset(p.get_ref()).ok_or_else(|| {
                let names: Vec<&str> = crate::presets::PRESETS.iter().map(|p| p.name).collect();
                at(
                    p.span().start,
                    format!(
                        "expected a preset ({}), found {:?}",
                        names.join(", "),
                        p.get_ref()
                    ),
                )
            })?;
            return Ok(match &self.name {
                Some(n) => t.renamed(n),
                None => t,
            });
        }
        if let Some(s) = &self.shape {
            return s.build(&name, file);
        }
        self.tree(&name, text, file)
    }

    /// The `[[node]]` tables' tree.
    fn tree(&self, name: &str, text: &str, file: &Path) -> Result<Topology, ReadError> {
        let at = |offset: usize, msg: String| ReadError::at(file, text, offset, msg);
        let mut cores = Vec::new();
        let mut spans = Vec::new();
        let mut llcs = Vec::new();
        let mut nodes = Vec::new();
        for (i, n) in self.node.iter().enumerate() {
            let mut node_set = CpuSet::new();
            for l in &n.llc {
                let mut llc_set = CpuSet::new();
                for c in &l.cores {
                    // +1: the span starts at the opening quote.
                    let set = parse_cpulist(c.get_ref()).map_err(|e| {
                        at(
                            c.span().start + 1 + byte_of_column(c.get_ref(), e.column),
                            format!("expected {}, found {}", e.expected, e.found),
                        )
                    })?;
                    llc_set = llc_set | set;
                    cores.push(set);
                    spans.push((set, c.span().start));
                }
                node_set = node_set | llc_set;
                llcs.push(llc_set);
            }
            nodes.push((n.id.unwrap_or(i as u32), node_set));
        }
        Topology::from_groups(name, &cores, &llcs, &nodes).map_err(|e| {
            // Point at the last core string that holds the blamed CPU.
            match e
                .cpu()
                .and_then(|cpu| spans.iter().rev().find(|(s, _)| s.contains(cpu)))
            {
                Some((_, off)) => at(*off, e.to_string()),
                None => ReadError::new(file, None, None, e.to_string()),
            }
        })
    }
}

fn byte_of_column(s: &str, column: usize) -> usize {
    s.char_indices()
        .nth(column.saturating_sub(1))
        .map(|(b, _)| b)
        .unwrap_or(s.len())
}

/// Maps a TOML parse error to a [`ReadError`] at its line and column.
pub fn toml_error(text: &str, file: &Path, e: &toml::de::Error) -> ReadError {
    let msg = e.message().trim().to_string();
    match e.span() {
        Some(span) => ReadError::at(file, text, span.start, msg),
        None => ReadError::whole(file, msg),
    }
}

/// Reads the TOML topology format from `text`; `file` names it in errors.
pub fn from_toml(text: &str, file: &Path) -> Result<Topology, ReadError> {
    let spec: TopologySpec = toml::from_str(text).map_err(|e| toml_error(text, file, &e))?;
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "toml".into());
    spec.build(text, file, &stem)
}

/// Reads a TOML topology file.
pub fn from_toml_file(path: &Path) -> Result<Topology, ReadError> {
    from_toml(&read_text(path)?, path)
}

impl ShapeSpec {
    /// The uniform machine this `[shape]` describes, named `name`.
    fn build(&self, name: &str, file: &Path) -> Result<Topology, ReadError> {
        let shape = Shape {
            nodes: self.nodes,
            llcs_per_node: self.llcs_per_node,
            cores_per_llc: self.cores_per_llc,
            threads_per_core: self.threads_per_core,
            siblings: match self.siblings {
                SiblingsSpec::Adjacent => Siblings::Adjacent,
                SiblingsSpec::Split => Siblings::Split,
            },
        };
        shape
            .build(name)
            .map_err(|e| ReadError::new(file, None, None, format!("[shape]: {e}")))
    }
}
