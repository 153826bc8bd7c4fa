//! The attack suite (`venn-lab attack`, the same code) at a tenth of its full size against
//! this crate's `venn-manager` binary, with the bounds asserted: under every attack the
//! honest device's check-in p99 stays under 50 ms and none of its check-ins fails, the
//! manager's RSS grows less than 50 MiB and its database less than 50 MB, no request gets
//! a 5xx; and after a SIGKILL the restarted manager still has what it acknowledged.

#[path = "../../venn-lab/src/attack.rs"]
#[allow(dead_code)]
mod attack;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_neither_stall_nor_bloat_the_manager() {
    let dir = std::env::temp_dir().join(format!("venn-attack-test-{}", std::process::id()));
    let summary = attack::run_attacks(&attack::AttackOptions {
        manager_bin: env!("CARGO_BIN_EXE_venn-manager").into(),
        dir: dir.clone(),
        scale: 0.1,
        workers: 16,
    })
    .await
    .unwrap();
    println!("{}", summary.table());
    assert_eq!(summary.attacks.len(), 6);
    for a in &summary.attacks {
        assert_eq!(a.server_errors, 0, "{}: 5xx", a.name);
        assert!(a.honest > 10, "{}: the honest device barely ran", a.name);
        assert_eq!(a.honest_failed, 0, "{}: honest check-ins failed", a.name);
        assert!(
            a.honest_p99_ms < 50.0,
            "{}: honest p99 {:.1} ms",
            a.name,
            a.honest_p99_ms
        );
        assert!(
            a.rss_growth_mib < 50.0,
            "{}: RSS +{:.1} MiB",
            a.name,
            a.rss_growth_mib
        );
        assert!(
            a.db_growth_mb < 50.0,
            "{}: DB +{:.1} MB",
            a.name,
            a.db_growth_mb
        );
    }
    let by_name = |n: &str| summary.attacks.iter().find(|a| a.name == n).unwrap();
    assert_eq!(
        by_name("oversized-fields").ok,
        0,
        "every oversized field refused"
    );
    assert!(
        by_name("registrations").client_errors > 0,
        "registrations past the source's rate are refused"
    );
    for (what, held) in &summary.restart {
        assert!(held, "after SIGKILL and restart: {what}");
    }
    assert_eq!(summary.restart.len(), 3);
    let _ = std::fs::remove_dir_all(&dir);
}
