//! `venn-lab load` against an in-process manager: idle check-ins get no task; with
//! `--busy`'s jobs registered (open demand at the manager's limit) check-ins become
//! assignments that the generator reports finished, without a failed request.

use std::time::Duration;
use venn_core::DeviceProfile;
use venn_lab::LocalManager;
use venn_lab::load::{LoadConfig, register_busy_jobs, run};
use venn_manager::Settings;

fn profile() -> DeviceProfile {
    DeviceProfile {
        cpu_score: 5.0,
        mem_score: 5.0,
        os_version: 10.0,
        ms_per_sample: 78.0,
        bandwidth_kbps: 13736.0,
        tags: vec![],
    }
}

async fn load(busy: bool) -> venn_lab::load::LoadReport {
    let dir = std::env::temp_dir().join(format!("venn-load-{}-{busy}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let m = LocalManager::start(Settings::default(), &dir.join("m.db"))
        .await
        .unwrap();
    if busy {
        register_busy_jobs(&m.url).await.unwrap();
    }
    let r = run(LoadConfig {
        base: m.url.clone(),
        profiles: vec![profile()],
        devices: 500,
        connections: 8,
        duration: Duration::from_millis(800),
    })
    .await;
    m.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_check_ins_get_no_task_and_busy_ones_become_assignments() {
    let idle = load(false).await;
    assert!(idle.check_ins > 0 && idle.errors == 0, "{idle:?}");
    assert_eq!(idle.assigned, 0, "{idle:?}");
    let busy = load(true).await;
    assert!(busy.check_ins > 0 && busy.errors == 0, "{busy:?}");
    assert!(busy.assigned > 0, "{busy:?}");
}
