//! A job's initial weights depend on its seed alone, even while other jobs initialise and
//! devices train in the same process (as in `venn-lab`). Its own test binary: Burn's CPU
//! backend has one random state per process, which other tests would draw from.

mod common;

use common::{device, samples};
use fl_task::task::{FlTask, Registry};
use fl_task::{read_tensors, weights};
use std::sync::Arc;

fn task() -> Arc<dyn FlTask> {
    let params = serde_json::json!({"width": 2, "train": {"max_steps": 2, "batch_size": 4}});
    Registry::with_builtins()
        .build("resnet18-femnist", &params)
        .unwrap()
}

/// Parameter values of a blob (the blob also carries per-process parameter ids).
fn values(blob: &[u8]) -> Vec<Vec<f32>> {
    let (_, m) = weights::from_bytes(blob, &device()).unwrap();
    read_tensors(&m)
        .unwrap()
        .into_iter()
        .map(|t| t.values)
        .collect()
}

#[test]
fn seeded_init_is_reproducible_while_other_jobs_initialise_and_devices_train() {
    let task = task();
    let reference = values(&task.init(7).unwrap());
    assert!(
        values(&task.init(7).unwrap()) == reference,
        "same seed, same weights"
    );
    let other = values(&task.init(8).unwrap());
    assert!(other != reference, "the seed matters");

    let global = task.init(1).unwrap();
    let data = samples(8, 4);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let blobs: Vec<Vec<u8>> = std::thread::scope(|s| {
        // Two devices training from the global weights the whole time.
        let trainers: Vec<_> = (0..2)
            .map(|d| {
                let (task, global, data, stop) = (task.clone(), &global, &data, &stop);
                s.spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        task.train(global, data.view(), d).unwrap();
                    }
                })
            })
            .collect();
        let inits: Vec<_> = (0..6u32)
            .map(|i| {
                let task = task.clone();
                s.spawn(move || task.init(if i.is_multiple_of(2) { 7 } else { 8 }).unwrap())
            })
            .collect();
        let out = inits.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in trainers {
            t.join().unwrap();
        }
        out
    });
    for (i, blob) in blobs.iter().enumerate() {
        let want = if i.is_multiple_of(2) {
            &reference
        } else {
            &other
        };
        assert!(values(blob) == *want, "job {i} lost its seed's weights");
    }
}
