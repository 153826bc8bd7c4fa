//! Bounded device classes and interned tags: profiles from anonymous clients can neither
//! grow the supply estimator without bound nor make classification cost scale with
//! their tags — and neither bound changes what the scheduler sees.

use venn_core::*;

/// A small seeded generator (splitmix64): the core has no rand dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

fn manager(cap: Option<usize>) -> ResourceManager {
    let mut rm =
        ResourceManager::with_policy(ManagerConfig::default(), &PolicyConfig::named("venn"))
            .unwrap();
    rm.set_class_cap(cap);
    rm
}

fn requirements() -> Vec<Requirement> {
    vec![
        Requirement::any(),
        Requirement {
            min_mem_score: 2.0,
            ..Requirement::any()
        },
        Requirement {
            min_cpu_score: 3.0,
            tags: vec!["gpu".into(), "wifi".into()],
            ..Requirement::any()
        },
        Requirement {
            tags: vec!["wifi".into()],
            ..Requirement::any()
        },
    ]
}

/// A random profile over a few cells but with a unique speed, so every one is a new
/// class without the cap.
fn profile(rng: &mut Rng, i: u64) -> DeviceProfile {
    let mut p = DeviceProfile::new(rng.range(0.0, 5.0), rng.range(0.0, 4.0), 10.0)
        .with_speed(50.0 + i as f64 * 1e-3, 10_000.0);
    for t in ["gpu", "wifi", "lte"] {
        if rng.coin() {
            p = p.with_tag(t);
        }
    }
    p
}

#[test]
fn past_the_cap_profiles_fold_into_their_cell_and_every_supply_is_unchanged() {
    let mut capped = manager(Some(64));
    let mut free = manager(None);
    let mut groups = Vec::new();
    for (i, r) in requirements().into_iter().enumerate() {
        let spec = JobSpec::new(format!("j{i}"), r);
        capped.register_job(spec.clone(), Time(0.0)).unwrap();
        free.register_job(spec, Time(0.0)).unwrap();
    }
    for (g, _) in free.groups().iter() {
        groups.push(g);
    }
    let mut rng = Rng(7);
    for i in 0..5_000u64 {
        let p = profile(&mut rng, i);
        let t = Time(i as f64 * 0.1);
        capped.check_in(DeviceId(i), &p, t);
        free.check_in(DeviceId(i), &p, t);
        let class = capped.last_check_in_class().unwrap();
        assert_eq!(
            class.groups,
            free.last_check_in_class().unwrap().groups,
            "a folded device keeps its cell"
        );
    }
    assert_eq!(free.supply().classes().len(), 5_000);
    let n = capped.supply().classes().len();
    assert!(n <= 2 * 64 + 1, "{n} classes");
    assert!(capped.supply().folded() >= 5_000 - 2 * 64);
    for g in groups {
        assert_eq!(
            capped.supply().group_supply(g),
            free.supply().group_supply(g)
        );
    }
    let (a, b) = (capped.supply().cells(), free.supply().cells());
    assert_eq!(a.len(), b.len());
    for cell in &a {
        assert!(
            b.contains(cell),
            "the same Venn diagram and counts: {cell:?}"
        );
    }
}

#[test]
fn past_twice_the_cap_new_cells_fold_into_a_part_and_never_over_count() {
    let mut rm = manager(Some(2));
    let reqs: Vec<Requirement> = (0..6)
        .map(|k| Requirement {
            min_cpu_score: k as f64,
            ..Requirement::any()
        })
        .collect();
    for (i, r) in reqs.iter().enumerate() {
        rm.register_job(JobSpec::new(format!("j{i}"), r.clone()), Time(0.0))
            .unwrap();
    }
    // cpu k admits groups 0..=k: six nested cells, more than 2 × cap.
    for k in 0..6 {
        rm.check_in(
            DeviceId(k),
            &DeviceProfile::new(k as f64, 1.0, 1.0),
            Time(k as f64),
        );
        let class = rm.last_check_in_class().unwrap();
        assert!(class.groups.len() <= k as usize + 1);
    }
    assert!(rm.supply().classes().len() <= 5);
    let total: u64 = rm.supply().cells().iter().map(|c| c.1).sum();
    assert!(total <= 6);
}

#[test]
fn interned_tags_classify_as_the_requirements_say() {
    let mut rng = Rng(11);
    let words: Vec<String> = (0..12).map(|i| format!("tag-{i}")).collect();
    let mut rm = manager(None);
    let mut reqs = Vec::new();
    for i in 0..40 {
        let k = rng.below(4);
        let mut tags: Vec<String> = (0..k)
            .map(|_| words[rng.below(words.len())].clone())
            .collect();
        tags.sort();
        tags.dedup();
        let r = Requirement {
            min_mem_score: rng.range(0.0, 2.0),
            tags,
            ..Requirement::any()
        };
        if rm
            .register_job(JobSpec::new(format!("j{i}"), r.clone()), Time(0.0))
            .is_ok()
        {
            reqs.push(r);
        }
    }
    for i in 0..2_000u64 {
        let mut p =
            DeviceProfile::new(1.0, rng.range(0.0, 3.0), 1.0).with_speed(10.0 + i as f64, 1_000.0);
        for _ in 0..rng.below(6) {
            p = p.with_tag(words[rng.below(words.len())].clone());
        }
        rm.check_in(DeviceId(i), &p, Time(i as f64));
        let got = rm.last_check_in_class().unwrap().groups;
        for (g, grp) in rm.groups().iter() {
            assert_eq!(
                got.contains(g),
                grp.requirement.admits(&p),
                "{:?} vs {p:?}",
                grp.requirement
            );
        }
    }
}
