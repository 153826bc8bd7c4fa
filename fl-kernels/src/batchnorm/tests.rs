//! Both loop orders against BatchNorm's definition in `f64`, against each other, and
//! independent of the thread count.

use super::*;
use crate::test_support::values;

/// The definition in `f64`: statistics, output, and the three gradients.
struct Reference {
    mean: Vec<f64>,
    var: Vec<f64>,
    y: Vec<f64>,
    dx: Vec<f64>,
    dgamma: Vec<f64>,
    dbeta: Vec<f64>,
}

fn reference(
    s: &BnShape,
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    dy: &[f32],
    act: Act,
) -> Reference {
    let eps = 1e-5f64;
    let at = |i: usize, ch: usize, p: usize| {
        if s.channels_last {
            (i * s.hw + p) * s.c + ch
        } else {
            (i * s.c + ch) * s.hw + p
        }
    };
    let count = s.count();
    let (mut mean, mut var) = (vec![0.0; s.c], vec![0.0; s.c]);
    let mut y = vec![0.0; x.len()];
    let (mut dx, mut dgamma, mut dbeta) = (vec![0.0; x.len()], vec![0.0; s.c], vec![0.0; s.c]);
    for ch in 0..s.c {
        let idx: Vec<usize> = (0..s.n)
            .flat_map(|i| (0..s.hw).map(move |p| at(i, ch, p)))
            .collect();
        let m = idx.iter().map(|&j| x[j] as f64).sum::<f64>() / count;
        let v = idx.iter().map(|&j| (x[j] as f64 - m).powi(2)).sum::<f64>() / count;
        let inv = 1.0 / (v + eps).sqrt();
        let (g, b) = (gamma[ch] as f64, beta[ch] as f64);
        let mut dz = vec![0.0; idx.len()];
        for (k, &j) in idx.iter().enumerate() {
            let z = (x[j] as f64 - m) * inv * g + b;
            let (out, pass) = match act {
                Act::None => (z, true),
                Act::Relu => (z.max(0.0), z > 0.0),
                Act::Relu6 => (z.clamp(0.0, 6.0), z > 0.0 && z < 6.0),
            };
            y[j] = out;
            dz[k] = if pass { dy[j] as f64 } else { 0.0 };
        }
        let xhat = |j: usize| (x[j] as f64 - m) * inv;
        dbeta[ch] = dz.iter().sum();
        dgamma[ch] = idx.iter().zip(&dz).map(|(&j, d)| d * xhat(j)).sum();
        for (k, &j) in idx.iter().enumerate() {
            dx[j] = g * inv * (dz[k] - dbeta[ch] / count - xhat(j) * dgamma[ch] / count);
        }
        (mean[ch], var[ch]) = (m, v);
    }
    Reference {
        mean,
        var,
        y,
        dx,
        dgamma,
        dbeta,
    }
}

fn close(a: &[f32], b: &[f64], what: &str, s: &BnShape) {
    assert_eq!(a.len(), b.len(), "{what} length for {s:?}");
    let scale = b.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x as f64 - y).abs() <= 2e-5 * scale,
            "{what}[{i}]: {x} vs {y} for {s:?}"
        );
    }
}

/// Inputs for a shape: an offset, scaled input (so ReLU6's upper bound is crossed), γ, β
/// and the upstream gradient.
fn inputs(s: &BnShape, seed: u64) -> [Vec<f32>; 4] {
    let x = values(s.len(), seed)
        .iter()
        .map(|v| v * 6.0 + 0.7)
        .collect();
    let gamma = values(s.c, seed + 1).iter().map(|v| v + 1.5).collect();
    let beta = values(s.c, seed + 2)
        .iter()
        .map(|v| v * 2.0 + 1.0)
        .collect();
    [x, gamma, beta, values(s.len(), seed + 3)]
}

/// Everything the kernels return for one shape and activation.
fn run(s: &BnShape, x: &[f32], gamma: &[f32], beta: &[f32], dy: &[f32], act: Act) -> Vec<Vec<f32>> {
    let (mean, var) = statistics(s, x);
    let inv: Vec<f32> = var.iter().map(|v| 1.0 / (v + 1e-5).sqrt()).collect();
    let y = forward(s, x, &mean, &inv, gamma, beta, act);
    let g = backward(s, x, &y, dy, &mean, &inv, gamma, act, true);
    vec![mean, var, y, g.dx.expect("asked for"), g.dgamma, g.dbeta]
}

/// Map sizes on both sides of [`ROWS_BELOW`], odd channel counts, long rows (more than one
/// parallel piece), channels-last activations small and large, every activation: the
/// definition's values.
#[test]
fn both_orders_match_the_definition() {
    let shapes = [
        (4, 5, 4, false),
        (3, 7, 49, false),
        (2, 300, 16, false),
        (2, 3, 64, false),
        (5, 2, 100, false),
        (3, 4, 784, false),
        (4, 5, 4, true),
        (3, 8, 784, true),
        (2, 48, 196, true),
        (3, 130, 4, true),
    ];
    for (seed, &(n, c, hw, channels_last)) in shapes.iter().enumerate() {
        let s = BnShape {
            n,
            c,
            hw,
            channels_last,
        };
        let [x, gamma, beta, dy] = inputs(&s, seed as u64 * 10);
        for act in [Act::None, Act::Relu, Act::Relu6] {
            let got = run(&s, &x, &gamma, &beta, &dy, act);
            let r = reference(&s, &x, &gamma, &beta, &dy, act);
            let want = [&r.mean, &r.var, &r.y, &r.dx, &r.dgamma, &r.dbeta];
            for ((what, got), want) in ["mean", "var", "y", "dx", "dgamma", "dbeta"]
                .iter()
                .zip(&got)
                .zip(want)
            {
                close(got, want, &format!("{what} {act:?}"), &s);
            }
        }
    }
}

/// An input whose mean is large against its spread (mean/σ ≈ 10³) still gets its input
/// gradient to float rounding, in both orders: the gradient is formed from `x − mean`, not
/// from `x` with the mean folded into a constant, which would cancel two large terms (6e-5
/// relative error here).
#[test]
fn input_gradient_survives_a_large_mean() {
    for (n, c, hw, channels_last) in [(3, 5, 49, false), (3, 24, 49, true), (2, 4, 196, false)] {
        let s = BnShape {
            n,
            c,
            hw,
            channels_last,
        };
        let [x, gamma, beta, dy] = inputs(&s, 5);
        let x: Vec<f32> = x.iter().map(|v| v / 6.0 + 1000.0).collect();
        let got = run(&s, &x, &gamma, &beta, &dy, Act::None);
        let r = reference(&s, &x, &gamma, &beta, &dy, Act::None);
        close(&got[3], &r.dx, "dx with a large mean", &s);
    }
}

/// The row order on a shape the plane order would take gives the same values (to float
/// rounding): they are one computation in two loop orders.
#[test]
fn rows_and_planes_agree() {
    let s = BnShape {
        n: 6,
        c: 9,
        hw: 80,
        channels_last: false,
    };
    let [x, gamma, beta, dy] = inputs(&s, 7);
    let (mean, var) = planes::statistics(&s, &x);
    let (mean_r, var_r) = rows::statistics(&s, &x);
    let to64 = |v: &[f32]| v.iter().map(|&v| v as f64).collect::<Vec<_>>();
    close(&mean_r, &to64(&mean), "mean", &s);
    close(&var_r, &to64(&var), "var", &s);
    let inv: Vec<f32> = var.iter().map(|v| 1.0 / (v + 1e-5).sqrt()).collect();
    let scale: Vec<f32> = (0..s.c).map(|c| gamma[c] * inv[c]).collect();
    let shift: Vec<f32> = (0..s.c).map(|c| beta[c] - mean[c] * scale[c]).collect();
    let c = Coefficients {
        scale: &scale,
        shift: &shift,
        act: Act::Relu6,
    };
    let y = planes::forward(&s, &x, None, &c);
    let y_r = rows::forward(&s, &x, None, &c);
    assert_eq!(y, y_r, "the forward is the same arithmetic in both orders");
    let a = saved(&s, &x, &y, &mean, &inv, &gamma);
    let (p_dbeta, p_dgamma) = planes::sums(&a, &dy, Act::Relu6);
    let (r_dbeta, r_dgamma) = rows::sums(&a, &dy, Act::Relu6);
    close(&r_dgamma, &to64(&p_dgamma), "dgamma", &s);
    close(&r_dbeta, &to64(&p_dbeta), "dbeta", &s);
    let (mut p_dx, mut r_dx) = (dy.clone(), dy.clone());
    planes::input_gradient_in_place(&a, &mut p_dx, (&p_dbeta, &p_dgamma), Act::Relu6);
    rows::input_gradient_in_place(&a, &mut r_dx, (&p_dbeta, &p_dgamma), Act::Relu6);
    close(&r_dx, &to64(&p_dx), "dx", &s);
}

/// The input gradient written over the upstream gradient is [`backward`]'s, bit for bit,
/// with the same parameter gradients, in both orders.
#[test]
fn in_place_is_the_same_backward() {
    for (n, c, hw, channels_last) in [(3, 7, 49, false), (3, 4, 784, false), (2, 48, 196, true)] {
        let s = BnShape {
            n,
            c,
            hw,
            channels_last,
        };
        let [x, gamma, beta, dy] = inputs(&s, 11);
        let (mean, var) = statistics(&s, &x);
        let inv: Vec<f32> = var.iter().map(|v| 1.0 / (v + 1e-5).sqrt()).collect();
        let y = forward(&s, &x, &mean, &inv, &gamma, &beta, Act::Relu6);
        let g = backward(&s, &x, &y, &dy, &mean, &inv, &gamma, Act::Relu6, true);
        let mut d = dy.clone();
        let (dgamma, dbeta) =
            backward_in_place(&s, &x, &y, &mut d, &mean, &inv, &gamma, Act::Relu6);
        assert_eq!(Some(d), g.dx, "{s:?}");
        assert_eq!((dgamma, dbeta), (g.dgamma, g.dbeta), "{s:?}");
    }
}

/// A residual added before the activation gives the bits of the separate ops it replaces
/// (BatchNorm without activation, `+ r`, the activation), in both orders and channels-last;
/// the activation's gradient is `dy` where the output passed it (on lengths over one of
/// its parallel pieces too).
#[test]
fn residual_sum_is_the_separate_ops() {
    for (seed, (n, c, hw, channels_last)) in [
        (3, 7, 49, false),
        (3, 4, 784, false),
        (3, 8, 784, true),
        (2, 48, 196, true),
    ]
    .into_iter()
    .enumerate()
    {
        let s = BnShape {
            n,
            c,
            hw,
            channels_last,
        };
        let [x, gamma, beta, dy] = inputs(&s, 20 + seed as u64);
        let r: Vec<f32> = values(s.len(), 40 + seed as u64)
            .iter()
            .map(|v| v * 3.0)
            .collect();
        let (mean, var) = statistics(&s, &x);
        let inv: Vec<f32> = var.iter().map(|v| 1.0 / (v + 1e-5).sqrt()).collect();
        let plain = forward(&s, &x, &mean, &inv, &gamma, &beta, Act::None);
        for act in [Act::None, Act::Relu, Act::Relu6] {
            let y = forward_add(&s, &x, Some(&r), &mean, &inv, &gamma, &beta, act);
            let want: Vec<f32> = plain
                .iter()
                .zip(&r)
                .map(|(&v, &r)| match act {
                    Act::None => v + r,
                    Act::Relu => (v + r).max(0.0),
                    Act::Relu6 => (v + r).clamp(0.0, 6.0),
                })
                .collect();
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&y), bits(&want), "{act:?} {s:?}");
            let dz = activation_gradient(&y, &dy, act);
            for ((&d, &y), &g) in dz.iter().zip(&y).zip(&dy) {
                let pass = match act {
                    Act::None => true,
                    Act::Relu => y > 0.0,
                    Act::Relu6 => y > 0.0 && y < 6.0,
                };
                assert_eq!(d.to_bits(), if pass { g } else { 0.0 }.to_bits(), "{act:?}");
            }
        }
    }
}

/// One thread or two, the same bits (each order sums in a fixed order); and no input
/// gradient when none is asked for.
#[test]
fn same_bits_on_any_thread_count() {
    let pool = |t| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .unwrap()
    };
    for (n, c, hw, channels_last) in [(3, 1200, 4, false), (4, 6, 196, false), (4, 24, 196, true)] {
        let s = BnShape {
            n,
            c,
            hw,
            channels_last,
        };
        let [x, gamma, beta, dy] = inputs(&s, 3);
        let one = pool(1).install(|| run(&s, &x, &gamma, &beta, &dy, Act::Relu));
        let two = pool(2).install(|| run(&s, &x, &gamma, &beta, &dy, Act::Relu));
        assert_eq!(one, two, "{s:?}");
        let (mean, _) = statistics(&s, &x);
        let g = backward(&s, &x, &x, &dy, &mean, &mean, &gamma, Act::None, false);
        assert!(g.dx.is_none());
    }
}

/// Times statistics, forward and backward of MobileNet-V2 ×0.25's BatchNorms (channels-last,
/// batch 20) on the current pool; a benchmark, not a check. Run with
/// `RAYON_NUM_THREADS=1 cargo test --release -p fl-kernels bn_times -- --ignored --nocapture`.
#[test]
#[ignore]
fn bn_times() {
    crate::heap::keep_freed_memory();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    pool.install(bn_times_on_one_thread);
}

fn bn_times_on_one_thread() {
    // (count in the network, channels, pixels, activation)
    let layers = [
        (2, 8, 784, Act::Relu6),
        (1, 8, 784, Act::None),
        (1, 48, 784, Act::Relu6),
        (4, 48, 196, Act::Relu6),
        (2, 8, 196, Act::None),
        (4, 48, 49, Act::Relu6),
        (3, 8, 49, Act::None),
        (1, 48, 16, Act::Relu6),
        (7, 96, 16, Act::Relu6),
        (4, 16, 16, Act::None),
        (5, 144, 16, Act::Relu6),
        (3, 24, 16, Act::None),
        (1, 144, 4, Act::Relu6),
        (5, 240, 4, Act::Relu6),
        (3, 40, 4, Act::None),
        (1, 80, 4, Act::None),
        (1, 1280, 4, Act::Relu6),
    ];
    // `BN_MODEL=resnet18x4`: ResNet-18 ×4's (planar) BatchNorms instead.
    let resnet = [
        (5, 4, 784, Act::Relu),
        (5, 8, 196, Act::Relu),
        (5, 16, 49, Act::Relu),
        (5, 32, 16, Act::Relu),
    ];
    let channels_last = std::env::var("BN_MODEL").map_or(true, |m| m != "resnet18x4");
    let layers: &[(usize, usize, usize, Act)] = if channels_last { &layers } else { &resnet };
    let reps = 50;
    let mut total = [0.0f64; 3];
    for &(count, c, hw, act) in layers {
        let s = BnShape {
            n: 20,
            c,
            hw,
            channels_last,
        };
        let [x, gamma, beta, dy] = inputs(&s, 3);
        let (mean, var) = statistics(&s, &x);
        let inv: Vec<f32> = var.iter().map(|v| 1.0 / (v + 1e-5).sqrt()).collect();
        let y = forward(&s, &x, &mean, &inv, &gamma, &beta, act);
        let mut t = [0.0f64; 3];
        for _ in 0..reps {
            let a = std::time::Instant::now();
            std::hint::black_box(statistics(&s, &x));
            let b = std::time::Instant::now();
            std::hint::black_box(forward(&s, &x, &mean, &inv, &gamma, &beta, act));
            let mut g = dy.clone();
            let c2 = std::time::Instant::now();
            std::hint::black_box(backward_in_place(
                &s, &x, &y, &mut g, &mean, &inv, &gamma, act,
            ));
            let d = std::time::Instant::now();
            t[0] += (b - a).as_secs_f64();
            t[1] += (c2 - b).as_secs_f64();
            t[2] += (d - c2).as_secs_f64();
        }
        let ms = t.map(|v| v * 1e3 / reps as f64);
        println!(
            "{count} × {c:4} @ {hw:3}: stats {:.3} forward {:.3} backward {:.3} ms",
            ms[0], ms[1], ms[2]
        );
        for i in 0..3 {
            total[i] += ms[i] * count as f64;
        }
    }
    println!(
        "per step: stats {:.2} forward {:.2} backward {:.2} ms",
        total[0], total[1], total[2]
    );
}
