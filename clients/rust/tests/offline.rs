//! The middleware's checks before any claim, without a database: the pool
//! points at a port nobody listens on, so a request that got as far as the
//! claim would answer 500.

use std::sync::{Arc, Mutex};

use axum::body::{to_bytes, Body};
use axum::http::{Request, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use pg_idempotency::{Claimed, IdempotencyLayer, Observed, Pool, Problem};
use tower::ServiceExt;

fn unreachable_pool() -> Pool {
    let mut c = tokio_postgres::Config::new();
    c.host("127.0.0.1").port(1).user("nobody").dbname("nothing");
    Pool::new(c, 2)
}

async fn handler(claim: Claimed) -> Response {
    claim.respond(StatusCode::CREATED, "{}")
}

fn app(layer: IdempotencyLayer) -> Router {
    Router::new().route("/pay", post(handler).layer(layer))
}

async fn send(
    app: &Router,
    key: Option<&str>,
    content_type: Option<&str>,
    body: impl Into<Body>,
) -> (StatusCode, String, Option<String>) {
    let mut req = Request::post("/pay");
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    if let Some(t) = content_type {
        req = req.header("Content-Type", t);
    }
    let r = app.clone().oneshot(req.body(body.into()).unwrap()).await.unwrap();
    let status = r.status();
    let ct = r.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned());
    let text = String::from_utf8(to_bytes(r.into_body(), 1 << 20).await.unwrap().to_vec()).unwrap();
    (status, text, ct)
}

fn assert_problem(r: &(StatusCode, String, Option<String>), status: u16) {
    assert_eq!(r.0.as_u16(), status, "{}", r.1);
    assert_eq!(r.2.as_deref(), Some("application/problem+json"));
    let v: serde_json::Value = serde_json::from_str(&r.1).unwrap();
    assert_eq!(v["status"], status);
    assert!(v["title"].is_string());
}

#[tokio::test]
async fn refused_before_any_claim() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let layer = IdempotencyLayer::new(unreachable_pool())
        .max_body(1024)
        .validate(|body| {
            if body.starts_with(b"{") {
                Ok(())
            } else {
                Err(Problem::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    "An object, please.",
                ))
            }
        })
        .on_outcome(move |e| log.lock().unwrap().push((e.outcome, e.status.as_u16())));
    let app = app(layer);
    let json = Some("application/json");

    assert_problem(&send(&app, None, json, "{}").await, 400);
    assert_problem(&send(&app, Some(""), json, "{}").await, 400);
    assert_problem(&send(&app, Some("k"), Some("text/plain"), "{}").await, 415);
    assert_problem(&send(&app, Some("k"), None, "{}").await, 415);
    assert_problem(&send(&app, Some("k"), json, "x".repeat(2000)).await, 413);
    // no Content-Length: a streamed body over the limit
    let chunks = futures_chunks(vec![vec![b' '; 800], vec![b' '; 800]]);
    assert_problem(&send(&app, Some("k"), json, chunks).await, 413);
    assert_problem(&send(&app, Some("k"), json, "{\"a\": ").await, 400);
    assert_problem(&send(&app, Some("k"), json, "").await, 400);
    assert_problem(&send(&app, Some("k"), json, vec![b'"', 0xff, b'"']).await, 400);
    assert_problem(&send(&app, Some("k"), json, "[1]").await, 422);
    // jsonb's limits are PostgreSQL's to check: syntax alone passes here
    // (and reaches the claim: 500, the database is unreachable)
    assert_problem(
        &send(
            &app,
            Some("k"),
            Some("application/json; charset=utf-8"),
            "{\"n\": 1e1000000}",
        )
        .await,
        500,
    );

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 11);
    assert!(seen[..10].iter().all(|(o, _)| *o == Observed::Rejected), "{seen:?}");
    assert_eq!(seen[10], (Observed::Error, 500));
}

#[tokio::test]
async fn scope_extractor_refuses() {
    let layer = IdempotencyLayer::new(unreachable_pool()).scope_with(|parts| {
        parts
            .headers
            .get("x-tenant")
            .map(|v| v.to_str().unwrap_or_default().to_owned())
            .ok_or_else(|| Problem::new(StatusCode::UNAUTHORIZED, "Who are you?", "No tenant."))
    });
    let r = send(&app(layer), Some("k"), Some("application/json"), "{}").await;
    assert_problem(&r, 401);
}

#[tokio::test]
async fn claimed_outside_the_layer_is_500() {
    let app = Router::new().route("/pay", post(handler));
    let r = send(&app, Some("k"), Some("application/json"), "{}").await;
    assert_problem(&r, 500);
}

/// A body streamed in chunks, without a length.
fn futures_chunks(chunks: Vec<Vec<u8>>) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(4);
    tokio::spawn(async move {
        for c in chunks {
            if tx.send(Ok(c)).await.is_err() {
                return;
            }
        }
    });
    Body::from_stream(ReceiverStream(rx))
}

struct ReceiverStream(tokio::sync::mpsc::Receiver<Result<Vec<u8>, std::io::Error>>);

impl futures_core::Stream for ReceiverStream {
    type Item = Result<Vec<u8>, std::io::Error>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}
