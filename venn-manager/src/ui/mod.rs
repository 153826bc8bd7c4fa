//! The status page: `GET /` (the whole page), `GET /ui/live` (its live part, which the
//! page's script swaps in every two seconds), and the embedded stylesheet, script and icon.
//!
//! Server-rendered HTML (maud) with charts as inline SVG, so nothing is built in
//! JavaScript and the page works, static, with JavaScript off. What it shows comes from
//! the core (queues, groups, Venn cells, open rounds) and from the manager's bounded
//! [`History`](crate::history::History) (ended jobs, accuracy curves, recent rounds,
//! supply per minute), both restored from SQLite after a restart. No token is ever part
//! of what it renders.

pub mod chart;
pub mod page;
pub mod view;

use crate::service::AppState;
use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use view::PageData;

const STYLE: &str = include_str!("assets/style.css");
const SCRIPT: &str = include_str!("assets/live.js");
const ICON: &str = include_str!("assets/icon.svg");

/// The page's routes (merged into the API's router).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/ui", get(index))
        .route("/ui/live", get(live))
        .route("/ui/style.css", get(style))
        .route("/ui/live.js", get(script))
        .route("/ui/icon.svg", get(icon))
        .route("/favicon.ico", get(icon))
}

async fn index(State(m): State<AppState>) -> impl IntoResponse {
    let d = PageData::collect(&m);
    no_store(Html(page::document(&d).into_string()))
}

async fn live(State(m): State<AppState>) -> impl IntoResponse {
    let d = PageData::collect(&m);
    no_store(Html(page::live(&d).into_string()))
}

async fn style() -> impl IntoResponse {
    asset("text/css; charset=utf-8", STYLE)
}

async fn script() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

async fn icon() -> impl IntoResponse {
    asset("image/svg+xml", ICON)
}

/// An embedded file, cached for a while (it changes only with the binary).
fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
}

/// A view is stale as soon as it is rendered.
fn no_store(r: impl IntoResponse) -> impl IntoResponse {
    ([(header::CACHE_CONTROL, "no-store")], r)
}
