//! A payments service on Axum whose POST /payments honours the
//! Idempotency-Key header with the idempotency PostgreSQL extension, through
//! the pg-idempotency crate (clients/rust): seed 001's Axum service, with
//! the key in PostgreSQL instead of Redis.  README.md beside this file
//! explains it; ../conformance checks it over HTTP.
//!
//! Environment: HOST (127.0.0.1), PORT (3000; 0 picks a free one), the
//! database as libpq's PG* variables (PGHOST, PGPORT, PGUSER, PGPASSWORD,
//! PGDATABASE, PGSSLMODE) or DATABASE_URL, POOL_SIZE (20), LEASE_SECONDS
//! (30), HEARTBEAT_SECONDS (LEASE_SECONDS / 3), CARD_NETWORK_URL
//! (http://127.0.0.1:4000), WAIT_FOR_DUPLICATES (true), AWAIT_RESULT_SECONDS (3).

mod payments;

use std::collections::HashMap;
use std::process::exit;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use pg_idempotency::{config_from_env, IdempotencyLayer, Pool, Problem};

use crate::payments::{validate_payment, CardNetwork};

/// What the handlers share.
#[derive(Clone)]
pub struct App {
    pub pool: Pool,
    pub card: Arc<CardNetwork>,
}

fn env_number(name: &str, fallback: f64, min: f64) -> f64 {
    match std::env::var(name) {
        Ok(raw) if !raw.is_empty() => match raw.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= min => v,
            _ => {
                eprintln!("{name} must be a number >= {min}, not {raw:?}");
                exit(2);
            }
        },
        _ => fallback,
    }
}

fn env_string(name: &str, fallback: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| fallback.to_owned())
}

/// Log records to stderr (no logging crate beyond `log`'s facade).
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Info
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("{} {}: {}", r.level(), r.target(), r.args());
        }
    }
    fn flush(&self) {}
}

#[tokio::main]
async fn main() {
    let _ = log::set_logger(&StderrLog).map(|()| log::set_max_level(log::LevelFilter::Info));
    let host = env_string("HOST", "127.0.0.1");
    let port = env_number("PORT", 3000.0, 0.0) as u16;
    let pool_size = env_number("POOL_SIZE", 20.0, 1.0) as usize;
    let lease = env_number("LEASE_SECONDS", 30.0, 1.0);
    let beat = env_number("HEARTBEAT_SECONDS", lease / 3.0, 0.1);
    let await_result = env_number("AWAIT_RESULT_SECONDS", 3.0, 0.0);
    let wait = match env_string("WAIT_FOR_DUPLICATES", "true").as_str() {
        "true" => true,
        "false" => false,
        _ => {
            eprintln!("WAIT_FOR_DUPLICATES must be true or false");
            exit(2);
        }
    };
    let config = config_from_env().unwrap_or_else(|e| {
        eprintln!("{e}");
        exit(2);
    });

    let pool = Pool::new(config.clone(), pool_size);
    // Heartbeats have their own connections: with every request connection
    // busy, the leases of the card payments in flight must still be renewed,
    // or another instance takes the keys over and authorizes again.
    let heartbeat_pool = Pool::new(config, 2);
    let app = App {
        pool: pool.clone(),
        card: Arc::new(CardNetwork::new(&env_string(
            "CARD_NETWORK_URL",
            "http://127.0.0.1:4000",
        ))),
    };

    let idempotency = IdempotencyLayer::new(pool)
        .heartbeat_pool(heartbeat_pool)
        .lease(Duration::from_secs_f64(lease))
        .heartbeat_every(Duration::from_secs_f64(beat))
        .wait_for_duplicates(wait)
        .await_result(Duration::from_secs_f64(await_result))
        // The example's scope is the Merchant-Id header, as the contract of
        // examples/README.md says; in production take it from the
        // authenticated caller (the default: a pg_idempotency::Scope that
        // your authentication layer puts into the request's extensions).
        .scope_from_header("Merchant-Id")
        .validate(validate_payment)
        .committed_when(|parts| parts.uri.query().and_then(mode).as_deref() == Some("card"));

    let router = Router::new()
        .route("/healthz", get(healthz))
        .route(
            "/payments",
            post(payments::pay)
                .fallback(method_not_allowed)
                .route_layer(idempotency)
                .route_layer(middleware::from_fn(check_mode)),
        )
        .fallback(not_found)
        .with_state(app);

    let listener = match tokio::net::TcpListener::bind((host.as_str(), port)).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot listen on {host}:{port}: {e}");
            exit(1);
        }
    };
    println!(
        "listening on http://{}",
        listener.local_addr().expect("a bound address")
    );
    if let Err(e) = axum::serve(listener, router).with_graceful_shutdown(shutdown()).await {
        eprintln!("server failed: {e}");
        exit(1);
    }
}

async fn shutdown() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// The `mode` query parameter (the last one given), decoded.
fn mode(query: &str) -> Option<String> {
    let pairs: HashMap<String, String> = Query::try_from_uri(&format!("/?{query}").parse().ok()?).ok()?.0;
    pairs.get("mode").cloned()
}

/// Refuses an unknown ?mode before anything is claimed.
async fn check_mode(req: Request, next: Next) -> Response {
    match req.uri().query().and_then(mode).as_deref() {
        None | Some("card") => next.run(req).await,
        Some(_) => Problem::new(
            StatusCode::BAD_REQUEST,
            "Unknown mode",
            "mode is either absent or card.",
        )
        .into_response(),
    }
}

async fn healthz(State(app): State<App>) -> Response {
    let up = match app.pool.get().await {
        Ok(conn) => conn.simple_query("SELECT 1").await.is_ok(),
        Err(_) => false,
    };
    if up {
        ([(axum::http::header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok").into_response()
    } else {
        Problem::new(StatusCode::SERVICE_UNAVAILABLE, "Database unavailable", "Retry later.").into_response()
    }
}

async fn not_found() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "Not found", "No such route.")
}

async fn method_not_allowed() -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "Method not allowed",
        "POST /payments only.",
    )
}
