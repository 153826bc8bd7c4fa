//! The HTTP server's limits against clients that hold connections: a request whose
//! headers never finish is dropped at the header timeout, a body that stalls gets 408,
//! connections past the limit are closed at accept (and counted), and honest requests go
//! on being served throughout. Real TCP on loopback.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use venn_manager::settings::ServerLimits;
use venn_manager::{Clock, Manager, Settings};

async fn serve(name: &str, limits: ServerLimits) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let db = common::temp_db(name);
    let settings = Settings {
        server: limits,
        ..Settings::default()
    };
    let m = Arc::new(Manager::open(settings, &db, Clock::System).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(venn_manager::server::serve(listener, m, async {
        let _ = rx.await;
    }));
    (addr, tx)
}

/// Sends `bytes` and reads until the server closes or `limit` passes: (what was read,
/// whether the server closed the connection, when). A blocking client on its own thread,
/// so the server's runtime is not the one waiting.
async fn send(addr: SocketAddr, bytes: &[u8], limit: Duration) -> (String, bool, Duration) {
    let bytes = bytes.to_vec();
    tokio::task::spawn_blocking(move || {
        let t0 = Instant::now();
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&bytes).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        let closed = loop {
            let left = limit.saturating_sub(t0.elapsed());
            if left.is_zero() {
                break false;
            }
            s.set_read_timeout(Some(left)).unwrap();
            match s.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break false;
                }
                Err(_) => break true,
            }
        };
        (
            String::from_utf8_lossy(&out).into_owned(),
            closed,
            t0.elapsed(),
        )
    })
    .await
    .unwrap()
}

async fn healthz(addr: SocketAddr) -> String {
    let req = b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    send(addr, req, Duration::from_secs(5)).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_headers_are_dropped_and_a_stalled_body_gets_408() {
    let limits = ServerLimits {
        header_read_timeout_s: 0.5,
        body_timeout_s: 0.5,
        ..ServerLimits::default()
    };
    let (addr, _stop) = serve("limits-timeouts", limits).await;
    // Headers that never end: the connection is closed at the header timeout.
    let (out, closed, took) = send(
        addr,
        b"POST /v1/check-in HTTP/1.1\r\nhost: x\r\n",
        Duration::from_secs(5),
    )
    .await;
    assert!(closed, "still open after {took:?}: {out}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    // A body announced at 100 bytes, 10 sent: 408 at the body timeout.
    let (out, _, took) = send(
        addr,
        b"POST /v1/check-in HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"device_i",
        Duration::from_secs(5),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 408"), "{out}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    // An honest request is served as before.
    assert!(healthz(addr).await.ends_with("ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_are_closed_at_accept_and_counted() {
    let limits = ServerLimits {
        max_connections: 3,
        header_read_timeout_s: 30.0,
        ..ServerLimits::default()
    };
    let (addr, _stop) = serve("limits-connections", limits).await;
    // Three idle clients hold every connection the server serves.
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(addr).unwrap());
    }
    // Give the server time to accept them.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (out, closed, took) = send(
        addr,
        b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n",
        Duration::from_secs(5),
    )
    .await;
    assert!(closed && out.is_empty(), "{out}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    // One idle client leaves: its slot serves the next honest request.
    drop(idle.pop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let req = b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    let (out, _, _) = send(addr, req, Duration::from_secs(5)).await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let refused = out
        .lines()
        .find(|l| l.starts_with("venn_connections_refused_total "))
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|v| v.parse::<u64>().ok());
    assert_eq!(refused, Some(1), "{out}");
}

/// A client whose connections come from `ip` (any of 127.0.0.0/8 on loopback).
fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(Some(ip.parse().unwrap()))
        .build()
        .unwrap()
}

fn check_in_json(device: u64) -> serde_json::Value {
    serde_json::json!({"device_id": device, "profile": {"cpu_score": 1, "mem_score": 1,
        "os_version": 10, "ms_per_sample": 78, "bandwidth_kbps": 13736}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_over_its_share_or_rate_leaves_the_others_served() {
    let limits = ServerLimits {
        max_connections_per_source: 2,
        check_ins_per_source_s: Some(5.0),
        registrations_per_source_min: Some(3.0),
        header_read_timeout_s: 30.0,
        ..ServerLimits::default()
    };
    let (addr, _stop) = serve("limits-sources", limits).await;
    let base = format!("http://{addr}");
    let attacker = client_from("127.0.0.2");
    let honest = client_from("127.0.0.1");
    let mut codes = Vec::new();
    for d in 0..20 {
        let r = attacker
            .post(format!("{base}/v1/check-in"))
            .json(&check_in_json(d))
            .send()
            .await
            .unwrap();
        if r.status() == 429 {
            assert!(r.headers().get("retry-after").is_some());
            let body: serde_json::Value = r.json().await.unwrap();
            assert_eq!(body["error"]["code"], "rate_limited", "{body}");
            codes.push(429);
        } else {
            codes.push(r.status().as_u16());
        }
    }
    let ok = codes.iter().filter(|c| **c == 200).count();
    assert!(
        (5..=7).contains(&ok),
        "a second's worth then 429: {codes:?}"
    );
    let r = honest
        .post(format!("{base}/v1/check-in"))
        .json(&check_in_json(99))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "another address is not limited");
    let job = |n: u32| {
        serde_json::json!({"name": format!("j{n}"), "rounds": 1, "model_size_bytes": 10,
            "plan_url": "http://127.0.0.1:9/plan"})
    };
    let mut regs = Vec::new();
    for n in 0..5 {
        let r = attacker
            .post(format!("{base}/v1/jobs"))
            .json(&job(n))
            .send()
            .await
            .unwrap();
        regs.push(r.status().as_u16());
    }
    assert_eq!(regs, vec![201, 201, 201, 429, 429]);
    // Two connections are the attacker's share; a third is closed at once.
    let socket = |ip: &str| {
        let s = tokio::net::TcpSocket::new_v4().unwrap();
        s.bind(format!("{ip}:0").parse().unwrap()).unwrap();
        s
    };
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(socket("127.0.0.2").connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let third = socket("127.0.0.2").connect(addr).await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(2), async {
        let mut buf = [0u8; 16];
        loop {
            third.readable().await.unwrap();
            match third.try_read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => break false,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => break true,
            }
        }
    })
    .await;
    assert_eq!(closed.ok(), Some(true), "closed at accept");
    let r = honest.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_source_holds_at_most_its_quota_of_live_jobs_across_a_restart() {
    use venn_manager::settings::Registration;
    let db = common::temp_db("limits-quota");
    let settings = Settings {
        registration: Registration {
            max_jobs_per_credential: Some(3),
            ..Registration::default()
        },
        ..Settings::default()
    };
    let start = |settings: Settings, db: std::path::PathBuf| async move {
        let m = Arc::new(Manager::open(settings, &db, Clock::System).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let h = tokio::spawn(venn_manager::server::serve(listener, m, async {
            let _ = rx.await;
        }));
        (format!("http://{addr}"), tx, h)
    };
    let (base, stop, server) = start(settings.clone(), db.clone()).await;
    let squatter = client_from("127.0.0.2");
    let honest = client_from("127.0.0.1");
    let register = |c: &reqwest::Client, base: &str, n: u32| {
        c.post(format!("{base}/v1/jobs")).json(&serde_json::json!({
            "name": format!("j{n}"), "rounds": 1, "model_size_bytes": 10,
            "plan_url": "http://127.0.0.1:9/plan"}))
    };
    let mut tokens = Vec::new();
    for n in 0..3 {
        let v: serde_json::Value = register(&squatter, &base, n)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        tokens.push((
            v["job_id"].as_u64().unwrap(),
            v["token"].as_str().unwrap().to_string(),
        ));
    }
    let r = register(&squatter, &base, 9).send().await.unwrap();
    assert_eq!(r.status(), 403);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "quota_exceeded", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("127.0.0.2")
    );
    let r = register(&honest, &base, 10).send().await.unwrap();
    assert_eq!(r.status(), 201, "another source has its own quota");
    // A job that ends gives its place back.
    let (job, token) = &tokens[0];
    let r = squatter
        .delete(format!("{base}/v1/jobs/{job}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    assert_eq!(
        register(&squatter, &base, 11)
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    // The quota is counted from SQLite after a restart.
    let _ = stop.send(());
    server.await.unwrap().unwrap();
    let (base, _stop, _server) = start(settings, db).await;
    assert_eq!(
        register(&squatter, &base, 12)
            .send()
            .await
            .unwrap()
            .status(),
        403
    );
}
