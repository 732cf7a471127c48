//! `schedlab features`: the fair class's switches by Linux's names, and
//! each kernel release's defaults (`schedlab_sched::fair::features`).

use clap::Args;
use serde_json::{json, Value};

use schedlab_sim::sched::fair::features::{Kernel, KERNELS, NOT_MODELLED};
use schedlab_sim::sched::fair::{FeatureSet, ALL_FEATURES};

use crate::Failure;

#[derive(Args, Debug)]
pub struct FeaturesArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: &FeaturesArgs) -> Result<(), Failure> {
    if a.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&json()).expect("plain data")
        );
        return Ok(());
    }
    say_part!("{:<24}", "feature");
    for k in KERNELS {
        say_part!(" {:>5}", k.name());
    }
    say!("  what it does");
    for f in ALL_FEATURES {
        say_part!("{:<24}", f.name);
        for k in KERNELS {
            let on = FeatureSet::of(k).has(f.set());
            say_part!(" {:>5}", if on { "on" } else { "-" });
        }
        say!("  {}", f.about);
    }
    say!(
        "\nlinux, linux-cas and linux-cas-wake run {}; every other policy runs {} \
         (--kernel RELEASE and --features NAME,NO_NAME change any run's).",
        FeatureSet::LINUX,
        FeatureSet::default()
    );
    say!(
        "What changed between releases without a feature: 6.12 protects the running task to its deadline, \
         later releases to the smallest slice queued, asking for a reschedule once it ends (6.17); base asks at the tick only; \
         NEXT_BUDDY is the reworked code from 6.18 on, and 6.18's stable series alone preempts a waker no longer eligible."
    );
    say!(
        "Linux's features.h also has {}: placement, balancing and accounting, not switches of the fair class here.",
        NOT_MODELLED.join(", ")
    );
    Ok(())
}

fn json() -> Value {
    let features: Vec<Value> = ALL_FEATURES
        .iter()
        .map(|f| {
            let on: serde_json::Map<String, Value> = KERNELS
                .iter()
                .map(|&k: &Kernel| (k.name().to_string(), json!(FeatureSet::of(k).has(f.set()))))
                .collect();
            json!({"name": f.name, "about": f.about, "default": on})
        })
        .collect();
    json!({"features": features, "kernels": KERNELS.iter().map(|k| k.name()).collect::<Vec<_>>(),
           "linux_default": FeatureSet::LINUX.to_string(),
           "default": FeatureSet::default().to_string(),
           "not_modelled": NOT_MODELLED})
}
