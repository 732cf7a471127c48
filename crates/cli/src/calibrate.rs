//! `schedlab calibrate`: this machine's microbenchmarks run for real and
//! the cost model fitted to them (`schedlab_validate::calibrate`, whose doc
//! has the table of what is measured and what each sets), written as a
//! cost file, then the table printed.

use std::path::PathBuf;

use clap::Args;
use schedlab_sim::Registry;

use crate::pool::Bar;
use crate::Failure;

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Where the cost file goes.
    #[arg(long, value_name = "FILE", default_value = "costs.toml")]
    out: PathBuf,
    /// Round trips per microbenchmark (more: steadier, slower).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    rounds: u64,
}

pub fn run(a: &CalibrateArgs, reg: &Registry) -> Result<(), Failure> {
    let machine = schedlab_scenarios::topology("sysfs").map_err(|e| Failure::Input(e.0))?;
    let c = schedlab_validate::calibrate(&machine, a.rounds, reg, &Bar::default())?;
    std::fs::write(&a.out, c.text())
        .map_err(|e| Failure::Input(format!("{}: cannot write: {e}", a.out.display())))?;
    let m = &c.file.measured;
    say!(
        "calibrated {} ({}; Linux {}) into {}:",
        m.topology,
        m.cpu_model,
        m.kernel,
        a.out.display()
    );
    say!(
        "{:66} {:>10} {:>20} {:>8}  sets",
        "measurement (ns)",
        "median",
        "p25-p75",
        "samples"
    );
    for m in &c.file.measurements {
        say!(
            "{:66} {:>10.1} {:>20} {:>8}  {} = {:.1}",
            m.name,
            m.median,
            format!("{:.1}-{:.1}", m.p25, m.p75),
            m.samples,
            m.sets,
            m.value
        );
        if let Some(mean) = m.mean {
            match &m.peer {
                Some(p) => say!(
                    "{:66} mean {:.1}; {}: {:.1} ({:+.0} %)",
                    "",
                    mean,
                    p.tool,
                    p.value,
                    (mean / p.value - 1.0) * 100.0
                ),
                None => say!("{:66} mean {:.1}; its tool is not installed", "", mean),
            }
        }
    }
    for n in &c.notes {
        say!("note: {n}");
    }
    Ok(())
}
