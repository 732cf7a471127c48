//! Cost files: a cost model measured on a machine (`schedlab calibrate`),
//! with when, where and how each value was measured, that every command
//! takes as `--costs FILE`.
//!
//! ```toml
//! [measured]
//! date = "2026-12-04"
//! kernel = "6.18.44"
//! cpu_model = "AMD EPYC"
//! topology = "sysfs:/"
//! shape = { cpus = 2, cores = 2, llcs = 1, nodes = 1 }
//!
//! [cost]            # every field of schedlab_sim::CostModel, none left out
//! context_switch_ns = 2100
//! ...
//!
//! [[measurement]]   # what calibrate measured, and the field it set
//! name = "pipe round trip, same CPU"
//! sets = "context_switch_ns"
//! ...
//! ```
//!
//! A file measured on a machine of another shape (CPUs, cores, LLCs,
//! nodes) is refused unless `--costs-any-shape` says to use it anyway:
//! costs by distance mean nothing where the distances differ.

use std::path::Path;

use schedlab_sim::CostModel;
use schedlab_topology::read::{line_column, toml_error};
use schedlab_topology::Topology;
use serde::{Deserialize, Serialize};

use crate::Error;

/// A machine's shape: what must match for its costs to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub cpus: usize,
    pub cores: usize,
    pub llcs: usize,
    pub nodes: usize,
}

impl Shape {
    pub fn of(t: &Topology) -> Shape {
        Shape {
            cpus: t.num_cpus(),
            cores: t.cores().len(),
            llcs: t.llcs().len(),
            nodes: t.nodes().len(),
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} CPUs, {} cores, {} LLC(s), {} node(s)",
            self.cpus, self.cores, self.llcs, self.nodes
        )
    }
}

/// Where and when the costs were measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// UTC, `YYYY-MM-DD`.
    pub date: String,
    pub kernel: String,
    pub cpu_model: String,
    pub topology: String,
    pub shape: Shape,
}

/// One measurement and the cost-model field it set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    pub name: String,
    /// The field it set (`context_switch_ns`, `line_ns.llc`, ...).
    pub sets: String,
    pub unit: String,
    pub median: f64,
    pub p25: f64,
    pub p75: f64,
    pub samples: usize,
    /// The value the field was given.
    pub value: f64,
    /// The mean, where a tool nobody here wrote measured the same and
    /// prints a mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// That tool's own figure, in the same unit, beside ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<Peer>,
}

/// A tool's own figure for a measurement: `perf bench sched pipe`'s
/// µs per op, cyclictest's average latency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    /// The command, as run.
    pub tool: String,
    pub value: f64,
}

/// A cost file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostsFile {
    pub measured: Provenance,
    pub cost: CostModel,
    #[serde(default, rename = "measurement")]
    pub measurements: Vec<Measurement>,
}

impl CostsFile {
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("plain data")
    }

    /// Reads a cost file: every field of the cost model present, none
    /// unknown, none negative; errors name the file, line and column.
    pub fn load(path: &Path) -> Result<CostsFile, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Input(format!("{}: cannot read: {e}", path.display())))?;
        CostsFile::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<CostsFile, Error> {
        let f: CostsFile = toml::from_str(text)
            .map_err(|e| Error::Input(toml_error(text, path, &e).to_string()))?;
        let at = |key: &str| {
            // The key's own line in the file, for the error's position.
            let off = text
                .lines()
                .scan(0, |o, l| {
                    let start = *o;
                    *o += l.len() + 1;
                    Some((start, l))
                })
                .find(|(_, l)| l.trim_start().starts_with(key))
                .map_or(0, |(o, l)| o + l.len() - l.trim_start().len());
            let (l, c) = line_column(text, off);
            format!("{}:{l}:{c}", path.display())
        };
        let written: toml::Table = toml::from_str(text).expect("parsed above");
        let cost = written.get("cost").and_then(|c| c.as_table());
        let all = toml::Table::try_from(CostModel::default()).expect("plain data");
        for key in all.keys() {
            if !cost.is_some_and(|c| c.contains_key(key)) {
                return Err(Error::Input(format!(
                    "{}: [cost] has no {key}: a cost file gives every field (schedlab calibrate writes them all)",
                    at("[cost]")
                )));
            }
        }
        let parsed = toml::Table::try_from(f.cost).expect("plain data");
        if let Some((k, v)) = negative(&parsed) {
            return Err(Error::Input(format!(
                "{}: expected {k} of 0 or more, found {v}",
                at(k.rsplit('.').next().unwrap_or(&k))
            )));
        }
        Ok(f)
    }

    /// Refuses the file on a machine of another shape, unless `any`.
    pub fn check_shape(&self, path: &Path, topo: &Topology, any: bool) -> Result<(), Error> {
        let here = Shape::of(topo);
        if here != self.measured.shape && !any {
            return Err(Error::Input(format!(
                "{}: measured on {} ({}), and {} is {}: costs by distance do not carry over (--costs-any-shape uses them anyway)",
                path.display(),
                self.measured.topology,
                self.measured.shape,
                topo.name(),
                here
            )));
        }
        Ok(())
    }
}

/// The first negative number in `t` (nested tables and arrays walked),
/// with its dotted name.
fn negative(t: &toml::Table) -> Option<(String, f64)> {
    fn walk(name: &str, v: &toml::Value) -> Option<(String, f64)> {
        match v {
            toml::Value::Integer(i) if *i < 0 => Some((name.to_string(), *i as f64)),
            toml::Value::Float(x) if *x < 0.0 => Some((name.to_string(), *x)),
            toml::Value::Table(t) => t.iter().find_map(|(k, v)| walk(&format!("{name}.{k}"), v)),
            toml::Value::Array(a) => a.iter().find_map(|v| walk(name, v)),
            _ => None,
        }
    }
    t.iter().find_map(|(k, v)| walk(k, v))
}

/// Today's date, UTC (`YYYY-MM-DD`), from the system clock: days since
/// the epoch to a civil date (Howard Hinnant's `civil_from_days`).
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02}")
}

/// `--costs FILE`: the scenario's costs from a cost file measured on a
/// machine of its shape (`any`: of any shape).
pub fn apply(
    path: Option<&Path>,
    any: bool,
    s: &mut schedlab_scenarios::Scenario,
) -> Result<(), Error> {
    if let Some(p) = path {
        let f = CostsFile::load(p)?;
        f.check_shape(p, &s.spec.topology, any)?;
        s.spec.cost = f.cost;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> CostsFile {
        CostsFile {
            measured: Provenance {
                date: "2026-12-04".into(),
                kernel: "6.18".into(),
                cpu_model: "test".into(),
                topology: "amd-2x8".into(),
                shape: Shape::of(&schedlab_topology::presets::preset("amd-2x8").unwrap()),
            },
            cost: CostModel {
                context_switch_ns: 2_345,
                ..CostModel::default()
            },
            measurements: vec![Measurement {
                name: "pipe round trip, same CPU".into(),
                sets: "context_switch_ns".into(),
                unit: "ns".into(),
                median: 5_300.0,
                p25: 5_100.0,
                p75: 5_600.0,
                samples: 400,
                value: 2_345.0,
                mean: Some(5_400.0),
                peer: Some(Peer {
                    tool: "perf bench sched pipe".into(),
                    value: 5_000.0,
                }),
            }],
        }
    }

    #[test]
    fn a_cost_file_round_trips() {
        let f = file();
        let back =
            CostsFile::parse(&f.to_toml(), Path::new("c.toml")).expect("its own output reads back");
        assert_eq!(back, f);
    }

    #[test]
    fn a_missing_or_negative_value_is_refused_at_its_place() {
        let text = file().to_toml();
        let missing = text.replace("context_switch_ns = 2345\n", "");
        let Err(Error::Input(e)) = CostsFile::parse(&missing, Path::new("c.toml")) else {
            panic!("a missing field must be refused");
        };
        assert!(
            e.contains("c.toml:") && e.contains("has no context_switch_ns"),
            "{e}"
        );
        let negative = text.replace("smt_slowdown = 1.6", "smt_slowdown = -1.6");
        let Err(Error::Input(e)) = CostsFile::parse(&negative, Path::new("c.toml")) else {
            panic!("a negative value must be refused");
        };
        let line = text
            .lines()
            .position(|l| l.starts_with("smt_slowdown"))
            .unwrap()
            + 1;
        assert!(
            e.contains(&format!("c.toml:{line}:1")) && e.contains("0 or more"),
            "{e}"
        );
        let unknown = text.replace("[cost]\n", "[cost]\nturbo = 3\n");
        let Err(Error::Input(e)) = CostsFile::parse(&unknown, Path::new("c.toml")) else {
            panic!("an unknown field must be refused");
        };
        assert!(e.contains("turbo"), "{e}");
    }

    #[test]
    fn a_cost_file_of_another_shape_is_refused_unless_told() {
        let f = file();
        let t14 = schedlab_topology::presets::preset("t14").unwrap();
        let amd = schedlab_topology::presets::preset("amd-2x8").unwrap();
        assert!(f.check_shape(Path::new("c.toml"), &amd, false).is_ok());
        let Err(Error::Input(e)) = f.check_shape(Path::new("c.toml"), &t14, false) else {
            panic!("another shape must be refused");
        };
        assert!(e.contains("--costs-any-shape"), "{e}");
        assert!(f.check_shape(Path::new("c.toml"), &t14, true).is_ok());
    }

    #[test]
    fn today_is_a_date() {
        let d = today();
        assert_eq!(d.len(), 10, "{d}");
        assert!(d.starts_with("20"), "{d}");
    }
}
