//! The paper's Fig. 3 story: a Keyboard job eligible on every device and two Emoji jobs
//! eligible only on a scarce subset (a third of the devices), devices checking in at a
//! constant rate. SRSF serves the smaller Keyboard job first on *every* device, FIFO serves
//! it first because it came first; both make the Emoji jobs wait for scarce devices they
//! could have had. Venn keeps the scarce devices for the Emoji group and lets Keyboard run
//! on the rest, so its average JCT is strictly lower than both.

use crate::common;

use common::{mem_device, needs_mem};
use venn_core::PolicyConfig;
use venn_core::optimal::{Instance, InstanceJob, run_policy, solve};

fn fig3() -> Instance {
    let mut jobs = vec![InstanceJob {
        arrival: 0.0,
        demand: 6,
        requirement: needs_mem(1.0),
    }];
    for _ in 0..2 {
        jobs.push(InstanceJob {
            arrival: 0.0,
            demand: 8,
            requirement: needs_mem(2.0),
        });
    }
    let devices = (0..90)
        .map(|i| mem_device(1.0 + i as f64, if i % 3 == 2 { 2.0 } else { 1.0 }))
        .collect();
    Instance { jobs, devices }
}

#[test]
fn venn_beats_srsf_and_fifo_on_the_keyboard_emoji_story() {
    let inst = fig3();
    let avg = |p: &str| {
        run_policy(&inst, &PolicyConfig::named(p), 5, true)
            .unwrap()
            .avg_jct(&inst)
            .unwrap()
    };
    let (venn, srsf, fifo) = (avg("venn"), avg("srsf"), avg("fifo"));
    let opt = solve(&inst).unwrap().avg_jct(&inst).unwrap();
    println!("fig3 avg JCT: venn {venn:.2} srsf {srsf:.2} fifo {fifo:.2} optimum {opt:.2}");
    assert!(venn < srsf, "venn {venn} vs srsf {srsf}");
    assert!(venn < fifo, "venn {venn} vs fifo {fifo}");
    assert!(venn >= opt - 1e-9);
}
