//! Throughput of the default-volume synthetic trace: generate, write, load,
//! replay. Ignored by default (a few seconds); run with
//! `cargo test --release -p venn-sim --test integration -- throughput:: --ignored --nocapture`.

use std::time::Instant;

use venn_traces::{AvailabilityTrace, ReplayOptions, SyntheticOptions};

#[test]
#[ignore = "measures throughput at full default volume"]
fn default_volume_round_trip() {
    let path = std::env::temp_dir().join(format!("venn-sim-throughput-{}.csv", std::process::id()));
    let t0 = Instant::now();
    let file = std::fs::File::create(&path).unwrap();
    let n = SyntheticOptions::default()
        .rows()
        .unwrap()
        .write_venn_csv(file, |_| {})
        .unwrap();
    let gen_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let trace = AvailabilityTrace::load(&path).unwrap();
    let load_s = t1.elapsed().as_secs_f64();
    assert_eq!(trace.len() as u64, n);
    let t2 = Instant::now();
    let opts = ReplayOptions {
        replicas: 30,
        ..Default::default()
    };
    let mut last = 0.0;
    let mut count = 0u64;
    for c in trace.replay(opts) {
        assert!(c.start_s >= last);
        last = c.start_s;
        count += 1;
    }
    let replay_s = t2.elapsed().as_secs_f64();
    let block = trace.block(opts.window_s).len();
    assert_eq!(count, block as u64 * 30);
    println!(
        "rows {n}: generate+write {gen_s:.2} s ({:.0} rows/s); load {load_s:.2} s ({:.0} rows/s); \
         block {block}; replay x30 = {count} check-ins in {replay_s:.2} s",
        n as f64 / gen_s,
        n as f64 / load_s
    );
    std::fs::remove_file(&path).unwrap();
}
