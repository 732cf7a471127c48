//! Readers: a Linux sysfs tree, the text of `lscpu -p`, and a TOML file.
//!
//! Every error is a [`ReadError`] that names the file, the line (and column
//! where one applies) and what was expected there. None of these readers
//! panics on any input; the cpulist and `lscpu -p` parsers are property
//! tested on arbitrary text.
//!
//! ## sysfs
//!
//! [`from_sysfs`] takes a root: either a filesystem root holding `sys/`
//! (default `/`), or a sysfs mount itself. It reads
//!
//! * `devices/system/cpu/online`: the CPUs (they must be dense from 0; a
//!   machine with a hole in its online CPUs is refused, since our ids are
//!   the kernel's);
//! * `cpuN/topology/core_cpus_list`, or `thread_siblings_list` on kernels
//!   before 5.6: the SMT core;
//! * `cpuN/cache/index*/` with `level` 3 and its `shared_cpu_list`: the LLC.
//!   Instruction caches are skipped. With no level 3 (an ARM part whose
//!   clusters share an L2) the highest level present is the LLC. With no
//!   cache directory at all (some VMs) the node is taken as the LLC;
//! * `devices/system/node/nodeN/cpulist`: the nodes; one node when the
//!   directory is absent. Memory-only nodes (an empty cpulist) are dropped.
//!
//! All lists are cut to the online CPUs.
//!
//! The kernel's tick, `CONFIG_HZ` ([`kernel_hz`]), comes from the kernel's
//! build config under the same root: `boot/config-RELEASE` (the release
//! from `proc/sys/kernel/osrelease`), else `proc/config.gz`; where neither
//! is there (a saved tree of sysfs alone), [`crate::DEFAULT_HZ`].
//!
//! ## `lscpu -p`
//!
//! [`from_lscpu`] reads the parsable output: comment lines start with `#`,
//! and the last one of the form `# CPU,Core,...` names the columns (the
//! default is `# CPU,Core,Socket,Node,,L1d,L1i,L2,L3`; the empty name between
//! `Node` and `L1d` is a column every row leaves empty). A combined column
//! such as `L1d:L1i:L2:L3` (from `lscpu -p=CPU,CORE,CACHE`) is split on `:`.
//! `lscpu -p` gives no cache sizes: its LLCs get
//! [`crate::topology::DEFAULT_LLC_BYTES`] (32 MiB), an assumption `topo`
//! shows beside each LLC.
//! The LLC is the `L3` column, else the highest `Ln` present (not `L1i`).
//! Cache ids may be sparse; siblings may be numbered `N` and `N+ncores`;
//! an empty `Node` is node 0. Without a header the default columns are
//! assumed.
//!
//! ## TOML
//!
//! [`from_toml`] reads either a uniform shape or an explicit tree:
//!
//! ```toml
//! name = "my-box"             # optional; default: the file's stem
//! llc_bytes = 33554432        # optional: every LLC's size (default 32 MiB;
//!                             # a preset's is sourced, sysfs reads each
//!                             # cache's `size`, `lscpu -p` gives none)
//! hz = 250                    # optional: the kernel's CONFIG_HZ (default 1000)
//!
//! [shape]                     # either this ...
//! nodes = 1
//! llcs_per_node = 2
//! cores_per_llc = 4
//! threads_per_core = 2
//! siblings = "adjacent"       # "adjacent" (2k, 2k+1) or "split" (N, N+ncores)
//!
//! [[node]]                    # ... or this, one table per node
//! id = 0                      # optional; default: its position
//! [[node.llc]]                # one per LLC of the node
//! cores = ["0-1", "2-3"]      # one cpulist per SMT core
//! ```
//!
//! [`TopologySpec`] is the same format as a serde type, so a scenario file
//! can embed it as its `[topology]` table.

mod error;
mod lscpu;
mod sysfs;
mod toml_format;

pub use error::{line_column, read_text, ReadError};
pub use lscpu::{from_lscpu, from_lscpu_file};
pub use sysfs::{from_sysfs, kernel_hz};
pub use toml_format::{
    from_toml, from_toml_file, toml_error, LlcSpec, NodeSpec, ShapeSpec, SiblingsSpec, TopologySpec,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuset::{parse_cpulist, CpuId};
    use std::path::Path;

    #[test]
    fn line_column_counts_chars() {
        let t = "ab\ncdé\nf";
        assert_eq!(line_column(t, 0), (1, 1));
        assert_eq!(line_column(t, 3), (2, 1));
        assert_eq!(line_column(t, 7), (2, 4));
        assert_eq!(line_column(t, 99), (3, 2));
    }

    #[test]
    fn lscpu_default_and_split_siblings() {
        let text = "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n0,0,0,0,,0,0,0,0\n1,1,0,0,,1,1,1,0\n2,0,0,0,,0,0,0,0\n3,1,0,0,,1,1,1,0\n";
        let t = from_lscpu(text, Path::new("x.txt")).unwrap();
        assert_eq!(t.core_cpus(CpuId::new(0)), &parse_cpulist("0,2").unwrap());
        assert_eq!(t.llcs().len(), 1);
    }

    #[test]
    fn lscpu_errors_name_line_and_column() {
        let text = "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n0,0,0,0,,0,0,0,0\n1,x,0,0,,1,1,1,0\n";
        let e = from_lscpu(text, Path::new("bad.txt")).unwrap_err();
        assert_eq!((e.line, e.column), (Some(3), Some(3)), "{e}");
        assert!(
            e.to_string().starts_with("bad.txt:3:3: expected a core id"),
            "{e}"
        );
        let e = from_lscpu("# CPU,Core\n0,0\n0,1\n", Path::new("d")).unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        let e = from_lscpu("# CPU,Core\n0,0,5\n", Path::new("d")).unwrap_err();
        assert_eq!((e.line, e.column), (Some(2), Some(6)), "{e}");
    }

    #[test]
    fn toml_shape_preset_and_tree() {
        let t = from_toml(
            "[shape]\nnodes=1\nllcs_per_node=2\ncores_per_llc=4\nthreads_per_core=2\n",
            Path::new("m.toml"),
        )
        .unwrap();
        assert_eq!((t.num_cpus(), t.name()), (16, "m"));
        let t = from_toml("preset = \"t14\"\n", Path::new("p.toml")).unwrap();
        assert_eq!(t.num_cpus(), 16);
        let t = from_toml(
            "name = \"tiny\"\n[[node]]\n[[node.llc]]\ncores = [\"0-1\", \"2-3\"]\n",
            Path::new("t.toml"),
        )
        .unwrap();
        assert_eq!((t.name(), t.cores().len()), ("tiny", 2));
    }

    #[test]
    fn toml_errors_point_into_the_text() {
        let text = "[[node]]\n[[node.llc]]\ncores = [\"0-1\", \"2-x\"]\n";
        let e = from_toml(text, Path::new("t.toml")).unwrap_err();
        assert_eq!((e.line, e.column), (Some(3), Some(20)), "{e}");
        let text = "[[node]]\n[[node.llc]]\ncores = [\"0-1\", \"1-2\"]\n";
        let e = from_toml(text, Path::new("t.toml")).unwrap_err();
        assert_eq!((e.line, e.column), (Some(3), Some(17)), "{e}");
        assert!(e.message.contains("cpu1 listed in two"), "{e}");
        let e = from_toml("[shape]\nnodes = \"two\"\n", Path::new("s.toml")).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        let e = from_toml("preset = \"nope\"\n", Path::new("s.toml")).unwrap_err();
        assert_eq!((e.line, e.column), (Some(1), Some(10)), "{e}");
        let e = from_toml("bogus = 1\n", Path::new("s.toml")).unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
    }
}
