//! The device's job client against a real HTTP server: weight downloads stop at the
//! caller's limit, whether the server announces the size or streams without one.
#![cfg(feature = "client")]

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use venn_api::client::{ClientError, JobClient};
use venn_api::job::WEIGHTS_PATH;

/// Serves `len` bytes of weights, with a Content-Length or (when `stream`) chunked.
async fn serve(len: usize, stream: bool) -> String {
    let app = Router::new().route(
        WEIGHTS_PATH,
        get(move || async move {
            if stream {
                let chunks = (0..len.div_ceil(4096))
                    .map(move |i| Ok::<_, std::io::Error>(vec![7u8; 4096.min(len - i * 4096)]));
                Body::from_stream(futures_util::stream::iter(chunks))
            } else {
                Body::from(vec![7u8; len])
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test]
async fn weights_beyond_the_limit_are_refused_with_or_without_a_length() {
    let http = reqwest::Client::new();
    let timeout = std::time::Duration::from_secs(10);
    for stream in [false, true] {
        let url = serve(100_000, stream).await;
        let job = JobClient::new(&http, &url, "token", timeout);
        assert_eq!(job.weights(100_000).await.unwrap().len(), 100_000);
        match job.weights(99_999).await {
            Err(ClientError::TooLarge { limit: 99_999, .. }) => {}
            other => panic!("stream={stream}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_transport_error_does_not_carry_the_token_in_its_url() {
    // Nothing listens on port 9: the report fails before any answer.
    let m = venn_api::client::ManagerClient::new("http://127.0.0.1:9");
    let token = "0123456789abcdef0123456789abcdef";
    let e = m
        .report_task(token, venn_api::manager::TaskReport::Finished)
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Http { .. }), "{e}");
    let shown = format!("{e} {e:?}");
    assert!(!shown.contains(token), "{shown}");
}
