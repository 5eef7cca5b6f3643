//! # pg-idempotency
//!
//! Idempotency keys for Axum services, kept inside PostgreSQL by the
//! `idempotency` extension: the key is a row claimed with `idem_claim` in
//! the same transaction as the payment, so the key and the payment commit
//! or roll back together.
//!
//! - [`client`]: the key functions (`idem_claim`, `idem_complete`,
//!   `idem_fail`, `idem_heartbeat`, `idem_checkpoint`, `idem_release`) over
//!   tokio-postgres, the extension's SQLSTATEs as [`Error`], and a small
//!   connection [`Pool`];
//! - [`IdempotencyLayer`]: a tower middleware implementing the HTTP
//!   contract of the project's examples (`Idempotency-Key`, problem+json
//!   errors, `Idempotent-Replayed: true`, the first answer and every replay
//!   the same bytes), with committed claims, heartbeats and recovery points
//!   for work outside the database, and a hook per outcome.
//!
//! ```no_run
//! use axum::{http::StatusCode, response::Response, routing::post, Router};
//! use pg_idempotency::{config_from_env, Claimed, IdempotencyLayer, Pool};
//!
//! async fn pay(claim: Claimed) -> Result<Response, pg_idempotency::Error> {
//!     let tx = claim.tx().await?;
//!     let row = tx
//!         .query_one("INSERT INTO payments (amount) VALUES (3000) RETURNING jsonb_build_object('id', id)::text", &[])
//!         .await?;
//!     Ok(claim.respond(StatusCode::CREATED, row.get::<_, String>(0)))
//! }
//!
//! # async fn run() {
//! let pool = Pool::new(config_from_env().unwrap(), 20);
//! let app: Router = Router::new().route("/payments", post(pay).layer(IdempotencyLayer::new(pool)));
//! # }
//! ```

pub mod client;
mod error;
mod middleware;
mod problem;

pub use client::{config_from_env, Claim, ClaimOptions, Conn, Outcome, Pool};
pub use error::{DbFailure, Error};
pub use middleware::{
    Claimed, Event, IdempotencyLayer, IdempotencyService, Observed, Scope, TxGuard, IDEMPOTENCY_KEY,
    IDEMPOTENT_REPLAYED,
};
pub use problem::Problem;
