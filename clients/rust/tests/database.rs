//! Against a real server: IDEM_TEST_DATABASE_URL names a database with the
//! extension, and a role granted idempotency_app (examples/db/schema.sql
//! sets one up).  Without it they pass without running, and say so once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use pg_idempotency::client::{self, ClaimOptions};
use pg_idempotency::{Claimed, Error, IdempotencyLayer, Observed, Outcome, Pool, Problem, Scope};
use tokio::sync::Notify;
use tower::ServiceExt;

fn pool() -> Option<Pool> {
    match std::env::var("IDEM_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(Pool::new(url.parse().expect("IDEM_TEST_DATABASE_URL"), 8)),
        _ => {
            // past the test harness's capture: shown even for passing tests, once
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "skipped: the database tests (IDEM_TEST_DATABASE_URL is not set)"
                );
            });
            None
        }
    }
}

/// A key unique to this run and test.
fn key(name: &str) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("rust-test-{}-{t}-{name}", std::process::id())
}

fn committed(lease_s: u64) -> ClaimOptions {
    ClaimOptions {
        lease: Some(Duration::from_secs(lease_s)),
        wait: true,
        await_result: Some(Duration::ZERO),
    }
}

#[tokio::test]
async fn claim_complete_replay_mismatch_in_one_transaction() {
    let Some(pool) = pool() else { return };
    let k = key("tx");
    let mut conn = pool.get().await.unwrap();
    let tx = conn.transaction().await.unwrap();
    let c = client::claim(
        &tx,
        &k,
        Some(r#"{"order": "A1", "amount": 3000}"#),
        "m1",
        &ClaimOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(c.outcome, Outcome::New);
    assert!(c.token.is_some());
    // stored as jsonb: the text a replay sends
    let stored = client::complete(&tx, &k, 201, Some(r#"{"payment_id":1,"a" :[1.0]}"#), "m1", None)
        .await
        .unwrap();
    assert_eq!(stored.as_deref(), Some(r#"{"a": [1.0], "payment_id": 1}"#));
    tx.commit().await.unwrap();

    let again = client::claim(
        &*conn,
        &k,
        Some(r#"{"amount": 3000, "order": "A1"}"#),
        "m1",
        &ClaimOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(again.outcome, Outcome::Replay);
    assert_eq!(again.response_code, Some(201));
    assert_eq!(again.response, stored);
    assert_eq!(again.token, None);

    let e = client::claim(
        &*conn,
        &k,
        Some(r#"{"order": "A1", "amount": 1}"#),
        "m1",
        &ClaimOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::RequestMismatch(_)), "{e}");
    assert_eq!((e.sqlstate(), e.http_status()), (Some("IK001"), 422));
    // another scope: another key
    let other = client::claim(&*conn, &k, Some("{}"), "m2", &ClaimOptions::default())
        .await
        .unwrap();
    assert_eq!(other.outcome, Outcome::New);
}

#[tokio::test]
async fn rollback_frees_the_key() {
    let Some(pool) = pool() else { return };
    let k = key("rollback");
    let mut conn = pool.get().await.unwrap();
    let tx = conn.transaction().await.unwrap();
    assert_eq!(
        client::claim(&tx, &k, Some("{}"), "", &ClaimOptions::default())
            .await
            .unwrap()
            .outcome,
        Outcome::New
    );
    tx.rollback().await.unwrap();
    assert_eq!(
        client::claim(&*conn, &k, Some("{}"), "", &committed(30))
            .await
            .unwrap()
            .outcome,
        Outcome::New
    );
}

#[tokio::test]
async fn committed_claim_fencing_and_sqlstates() {
    let Some(pool) = pool() else { return };
    let k = key("fence");
    let conn = pool.get().await.unwrap();
    let c = client::claim(&*conn, &k, Some(r#"{"x": 1}"#), "m", &committed(30))
        .await
        .unwrap();
    assert_eq!(c.outcome, Outcome::New);
    let token = c.token.unwrap();
    client::heartbeat(&*conn, &k, "m", token, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    client::checkpoint(&*conn, &k, Some("step-1"), "m", Some(token))
        .await
        .unwrap();

    let busy = client::claim(
        &*conn,
        &k,
        Some(r#"{"x": 1}"#),
        "m",
        &ClaimOptions {
            wait: false,
            ..committed(30)
        },
    )
    .await
    .unwrap();
    assert_eq!(busy.outcome, Outcome::InProgress);
    assert!(
        busy.retry_after_secs >= 1 && busy.retry_after_secs <= 60,
        "{}",
        busy.retry_after_secs
    );
    assert_eq!(busy.token, None);

    let e = client::complete(&*conn, &k, 201, Some("{}"), "m", None)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::TokenRequired(_)), "{e}");
    assert_eq!(e.sqlstate(), Some("IK005"));
    let e = client::complete(&*conn, &k, 201, Some("{}"), "m", Some(token + 1_000_000))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::StaleToken(_)), "{e}");
    assert_eq!(e.http_status(), 409);
    let e = client::complete(&*conn, &key("nothing"), 201, Some("{}"), "m", Some(token))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::KeyNotFound(_)), "{e}");

    let stored = client::complete(&*conn, &k, 201, Some(r#"{"done":true}"#), "m", Some(token))
        .await
        .unwrap();
    assert_eq!(stored.as_deref(), Some(r#"{"done": true}"#));
    let e = client::complete(&*conn, &k, 201, Some("{}"), "m", Some(token))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotProcessing(_)), "{e}");
    assert_eq!(e.sqlstate(), Some("IK003"));
    let e = client::heartbeat(&*conn, &k, "m", token, None).await.unwrap_err();
    assert!(matches!(e, Error::NotProcessing(_)), "{e}");
}

#[tokio::test]
async fn fail_then_reclaimed_with_the_recovery_point() {
    let Some(pool) = pool() else { return };
    let k = key("reclaim");
    let conn = pool.get().await.unwrap();
    let first = client::claim(&*conn, &k, Some("{}"), "", &committed(30)).await.unwrap();
    let t1 = first.token.unwrap();
    client::checkpoint(&*conn, &k, Some("authorizing"), "", Some(t1))
        .await
        .unwrap();
    client::fail(&*conn, &k, "", Some(t1), None, None, true).await.unwrap();

    let second = client::claim(&*conn, &k, Some("{}"), "", &committed(30)).await.unwrap();
    assert_eq!(second.outcome, Outcome::Reclaimed);
    assert_eq!(second.recovery_point.as_deref(), Some("authorizing"));
    let t2 = second.token.unwrap();
    assert_ne!(t1, t2);
    // the first holder is fenced off
    let e = client::heartbeat(&*conn, &k, "", t1, None).await.unwrap_err();
    assert!(matches!(e, Error::StaleToken(_)), "{e}");
    let e = client::checkpoint(&*conn, &k, Some("authorized:x"), "", Some(t1))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::StaleToken(_)), "{e}");

    // not retryable: the stored error is replayed
    client::fail(
        &*conn,
        &k,
        "",
        Some(t2),
        Some(402),
        Some(r#"{"error":"declined"}"#),
        false,
    )
    .await
    .unwrap();
    let third = client::claim(&*conn, &k, Some("{}"), "", &committed(30)).await.unwrap();
    assert_eq!(third.outcome, Outcome::Replay);
    assert_eq!(
        (third.response_code, third.response.as_deref()),
        (Some(402), Some(r#"{"error": "declined"}"#))
    );
}

#[tokio::test]
async fn release_and_bad_input() {
    let Some(pool) = pool() else { return };
    let k = key("release");
    let conn = pool.get().await.unwrap();
    let c = client::claim(&*conn, &k, None, "", &committed(30)).await.unwrap();
    client::release(&*conn, &k, "", c.token).await.unwrap();
    assert_eq!(
        client::claim(&*conn, &k, None, "", &committed(30))
            .await
            .unwrap()
            .outcome,
        Outcome::New
    );

    for bad in [String::new(), "k".repeat(300), "tab\there".into()] {
        let e = client::claim(&*conn, &bad, None, "", &committed(30)).await.unwrap_err();
        assert!(matches!(e, Error::InvalidKey(_)), "{bad:?}: {e}");
        assert_eq!(e.http_status(), 400);
    }
    let e = client::claim(&*conn, &key("scope"), None, &"s".repeat(300), &committed(30))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidKey(_)), "{e}");
    for body in [r#"{"a": "x\u0000"}"#, r#"{"n": 1e1000000}"#] {
        let e = client::claim(&*conn, &key("jsonb"), Some(body), "", &committed(30))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidRequest(_)), "{body}: {e}");
        assert_eq!(e.http_status(), 400);
    }
}

#[tokio::test]
async fn await_result_waits_for_the_request_in_flight() {
    let Some(pool) = pool() else { return };
    let k = key("await");
    let conn = pool.get().await.unwrap();
    let first = client::claim(&*conn, &k, Some("{}"), "", &committed(30)).await.unwrap();
    let pool2 = pool.clone();
    let k2 = k.clone();
    let (pid_tx, pid_rx) = tokio::sync::oneshot::channel::<i32>();
    let waiting = tokio::spawn(async move {
        let conn = pool2.get().await.unwrap();
        let pid: i32 = conn.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
        pid_tx.send(pid).unwrap();
        let opts = ClaimOptions {
            await_result: Some(Duration::from_secs(20)),
            ..committed(30)
        };
        client::claim(&*conn, &k2, Some("{}"), "", &opts).await.unwrap()
    });
    // complete only once that claim waits (its backend's idem_claim, in a
    // wait), however slow the machine: else it would replay without waiting
    let pid = pid_rx.await.unwrap();
    let mut polls = 0;
    loop {
        let n: i64 = conn
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active' \
                 AND wait_event IS NOT NULL AND query LIKE '%idem_claim%'",
                &[&pid],
            )
            .await
            .unwrap()
            .get(0);
        if n > 0 {
            break;
        }
        polls += 1;
        assert!(polls < 1500, "the claim never began to wait");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client::complete(&*conn, &k, 201, Some(r#"{"first": true}"#), "", first.token)
        .await
        .unwrap();
    let second = waiting.await.unwrap();
    assert_eq!(second.outcome, Outcome::Replay);
    assert_eq!(second.response.as_deref(), Some(r#"{"first": true}"#));
}

// ---- the middleware ------------------------------------------------------

type Seen = Arc<Mutex<Vec<(Observed, u16)>>>;

/// The claims handlers kept ("keep": true), as one that hands its claim to
/// work of its own might.
static KEPT: Mutex<Vec<Claimed>> = Mutex::new(Vec::new());

/// The claim a handler kept for key `k`.
fn kept(k: &str) -> Claimed {
    let kept = KEPT.lock().unwrap();
    kept.iter().find(|c| c.key() == k).expect("a kept claim").clone()
}

/// Echoes the body's "n" through PostgreSQL in the claim's transaction;
/// "fail": true answers 502 instead (the work failed); "hold": true waits
/// for the test's Notify first; "keep": true keeps a clone of the claim
/// ([`kept`]); "nul": true answers a body idem_complete refuses (22P05);
/// "task_holds_tx": true hands a clone to a task that takes `tx()` and holds
/// its guard until the test's Notify; "die_at_commit": true leaves a deferred
/// trigger in the transaction that ends its session at the COMMIT.
async fn echo(Extension(gate): Extension<Arc<Notify>>, claim: Claimed) -> Response {
    let v: serde_json::Value = serde_json::from_slice(claim.body()).unwrap();
    if v["hold"] == true {
        gate.notified().await;
    }
    if v["keep"] == true {
        KEPT.lock().unwrap().push(claim.clone());
    }
    if v["task_holds_tx"] == true {
        let (took, taken) = tokio::sync::oneshot::channel();
        let (task, gate) = (claim.clone(), gate.clone());
        tokio::spawn(async move {
            let tx = task.tx().await.unwrap();
            took.send(()).unwrap();
            gate.notified().await;
            drop(tx);
        });
        // the handler goes on (to its panic) once the task holds the guard
        taken.await.unwrap();
    }
    if v["panic"] == true {
        panic!("the handler panicked (on purpose)");
    }
    if v["twice"] == true {
        let held = claim.tx().await.unwrap();
        let again = claim.tx().await.is_err();
        let checkpoint = claim.checkpoint("x").await.is_err();
        drop(held);
        return claim.respond(
            StatusCode::CREATED,
            format!(r#"{{"refused": [{again}, {checkpoint}]}}"#),
        );
    }
    if claim.is_committed() {
        if let Some(p) = claim.recovery_point() {
            let tx = claim.tx().await.unwrap();
            let row = tx
                .query_one("SELECT jsonb_build_object('resumed', $1::text)::text", &[&p])
                .await
                .unwrap();
            return claim.respond(StatusCode::CREATED, row.get::<_, String>(0));
        }
        claim.checkpoint("half-way").await.unwrap();
    }
    if v["die_at_commit"] == true {
        let tx = claim.tx().await.unwrap();
        tx.batch_execute(DIE_AT_COMMIT).await.unwrap();
        drop(tx);
        return claim.respond(StatusCode::CREATED, r#"{"n": 1}"#);
    }
    if v["nul"] == true {
        // an answer jsonb refuses: \u0000 in a string (22P05)
        return claim.respond(StatusCode::CREATED, r#"{"note": "a\u0000b"}"#.to_owned());
    }
    if v["fail"] == true {
        return Problem::new(StatusCode::BAD_GATEWAY, "Upstream failed", "Retry.")
            .retry_after(1)
            .into_response();
    }
    let tx = match claim.tx().await {
        Ok(tx) => tx,
        Err(e) => return e.into_response(),
    };
    let row = tx
        .query_one(
            "SELECT jsonb_build_object('z', 1, 'n', ($1::text::jsonb)->'n', 'scope', $2::text)::text",
            &[&std::str::from_utf8(claim.body()).unwrap(), &claim.scope()],
        )
        .await
        .unwrap();
    claim.respond(StatusCode::CREATED, row.get::<_, String>(0))
}

/// The COMMIT loses its connection: a deferred trigger terminates its own
/// session (57P01) before the commit is written.
const DIE_AT_COMMIT: &str = "\
CREATE TEMP TABLE die_at_commit (x int) ON COMMIT DROP;
CREATE FUNCTION pg_temp.die_at_commit() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER die_at_commit AFTER INSERT ON die_at_commit
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.die_at_commit();
INSERT INTO die_at_commit VALUES (1)";

fn app(
    pool: Pool,
    gate: Arc<Notify>,
    seen: Seen,
    configure: impl FnOnce(IdempotencyLayer) -> IdempotencyLayer,
) -> Router {
    let layer = configure(
        IdempotencyLayer::new(pool)
            .lease(Duration::from_secs(30))
            .await_result(Duration::ZERO)
            .committed_when(|p| p.uri.path() == "/card")
            .on_outcome(move |e| seen.lock().unwrap().push((e.outcome, e.status.as_u16()))),
    );
    Router::new()
        .route("/pay", post(echo))
        .route("/card", post(echo))
        .route_layer(layer)
        .layer(Extension(gate))
}

struct Answer {
    status: u16,
    replayed: bool,
    retry_after: Option<String>,
    text: String,
}

async fn send(
    app: &Router,
    path: &str,
    key: &str,
    headers: &[(&str, &str)],
    body: &str,
    scope: Option<&str>,
) -> Answer {
    let mut req = Request::post(path)
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json");
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    let mut req = req.body(Body::from(body.to_owned())).unwrap();
    if let Some(s) = scope {
        req.extensions_mut().insert(Scope(s.to_owned()));
    }
    let r = app.clone().oneshot(req).await.unwrap();
    Answer {
        status: r.status().as_u16(),
        replayed: r.headers().get("idempotent-replayed").is_some_and(|v| v == "true"),
        retry_after: r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned()),
        text: String::from_utf8(to_bytes(r.into_body(), 1 << 20).await.unwrap().to_vec()).unwrap(),
    }
}

#[tokio::test]
async fn middleware_first_answer_and_replays_are_the_same_bytes() {
    let Some(pool) = pool() else { return };
    let seen: Seen = Arc::default();
    let app = app(pool, Arc::new(Notify::new()), seen.clone(), |l| l);
    let k = key("mw");
    let first = send(&app, "/pay", &k, &[], r#"{"n": 7, "o": "x"}"#, None).await;
    assert_eq!(first.status, 201, "{}", first.text);
    assert!(!first.replayed);
    assert_eq!(
        first.text, r#"{"n": 7, "z": 1, "scope": ""}"#,
        "PostgreSQL's jsonb text"
    );
    // the header is not the scope unless the layer is told so
    let again = send(
        &app,
        "/pay",
        &k,
        &[("Merchant-Id", "other")],
        "{\"o\":\"x\", \"n\": 7.0}",
        None,
    )
    .await;
    assert_eq!(
        (again.status, again.replayed, again.text.as_str()),
        (201, true, first.text.as_str())
    );
    let other = send(&app, "/pay", &k, &[], r#"{"n": 8, "o": "x"}"#, None).await;
    assert_eq!(other.status, 422, "{}", other.text);
    // a Scope from the authentication layer: another scope, its own key
    let scoped = send(&app, "/pay", &k, &[], r#"{"n": 8}"#, Some("merchant-9")).await;
    assert_eq!((scoped.status, scoped.replayed), (201, false));
    assert!(scoped.text.contains(r#""scope": "merchant-9""#), "{}", scoped.text);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            (Observed::New, 201),
            (Observed::Replay, 201),
            (Observed::Mismatch, 422),
            (Observed::New, 201)
        ]
    );
}

#[tokio::test]
async fn middleware_scope_from_a_header_when_told() {
    let Some(pool) = pool() else { return };
    let app = app(pool, Arc::new(Notify::new()), Seen::default(), |l| {
        l.scope_from_header("Merchant-Id")
    });
    let k = key("hdr");
    let a = send(&app, "/pay", &k, &[("Merchant-Id", "m-a")], r#"{"n": 1}"#, None).await;
    let b = send(&app, "/pay", &k, &[("Merchant-Id", "m-b")], r#"{"n": 2}"#, None).await;
    assert_eq!((a.status, b.status, b.replayed), (201, 201, false));
    assert!(b.text.contains("m-b"));
    let long = "m".repeat(300);
    let bad = send(
        &app,
        "/pay",
        &key("hdr-long"),
        &[("Merchant-Id", &long)],
        r#"{"n": 1}"#,
        None,
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.text);
}

#[tokio::test]
async fn middleware_failed_handler_frees_the_key() {
    let Some(pool) = pool() else { return };
    let seen: Seen = Arc::default();
    let app = app(pool, Arc::new(Notify::new()), seen.clone(), |l| l);
    let k = key("mw-fail");
    let failed = send(&app, "/pay", &k, &[], r#"{"n": 1, "fail": true}"#, None).await;
    assert_eq!((failed.status, failed.retry_after.as_deref()), (502, Some("1")));
    let other_body = send(&app, "/pay", &k, &[], r#"{"n": 2}"#, None).await;
    assert_eq!(
        (other_body.status, other_body.replayed),
        (201, false),
        "rolled back: the key is new again"
    );
    assert_eq!(*seen.lock().unwrap(), vec![(Observed::New, 502), (Observed::New, 201)]);
}

#[tokio::test]
async fn middleware_committed_claims_in_flight_failed_and_reclaimed() {
    let Some(pool) = pool() else { return };
    let seen: Seen = Arc::default();
    let gate = Arc::new(Notify::new());
    let app = app(pool.clone(), gate.clone(), seen.clone(), |l| {
        l.heartbeat_pool(pool.clone())
    });
    let k = key("mw-card");
    let body = r#"{"n": 3, "hold": true}"#;
    let held = {
        let (app, k) = (app.clone(), k.clone());
        tokio::spawn(async move { send(&app, "/card", &k, &[], body, None).await })
    };
    // the first request holds the committed claim: a duplicate gets 409 at once
    let conn = pool.get().await.unwrap();
    for _ in 0..500 {
        let rows = conn
            .query("SELECT status::text FROM idem_lookup($1, '')", &[&k])
            .await
            .unwrap();
        if rows.first().is_some_and(|r| r.get::<_, String>(0) == "processing") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(conn);
    let busy = send(&app, "/card", &k, &[], body, None).await;
    assert_eq!(busy.status, 409, "{}", busy.text);
    assert!(busy.retry_after.is_some_and(|s| s.parse::<u32>().unwrap() >= 1));
    gate.notify_one();
    let first = held.await.unwrap();
    assert_eq!(first.status, 201, "{}", first.text);
    let replay = send(&app, "/card", &k, &[], body, None).await;
    assert_eq!((replay.status, replay.replayed, replay.text), (201, true, first.text));

    // a failed attempt is recorded retryable; the retry resumes from its recovery point
    let k = key("mw-card-fail");
    let failed = send(&app, "/card", &k, &[], r#"{"n": 4, "fail": true}"#, None).await;
    assert_eq!(failed.status, 502);
    let resumed = send(&app, "/card", &k, &[], r#"{"n": 4, "fail": true}"#, None).await;
    assert_eq!(
        (resumed.status, resumed.text.as_str()),
        (201, r#"{"resumed": "half-way"}"#)
    );
    let seen = seen.lock().unwrap().clone();
    assert!(seen.contains(&(Observed::InProgress, 409)), "{seen:?}");
    assert!(
        seen.ends_with(&[
            (Observed::Replay, 201),
            (Observed::New, 502),
            (Observed::Reclaimed, 201)
        ]),
        "{seen:?}"
    );
}

#[tokio::test]
async fn middleware_one_transaction_guard_at_a_time() {
    let Some(pool) = pool() else { return };
    let app = app(pool, Arc::new(Notify::new()), Seen::default(), |l| l);
    let r = send(&app, "/pay", &key("twice"), &[], r#"{"twice": true}"#, None).await;
    assert_eq!((r.status, r.text.as_str()), (201, r#"{"refused": [true, true]}"#));
}

#[tokio::test]
async fn middleware_panic_stops_the_heartbeats() {
    let Some(pool) = pool() else { return };
    let seen: Seen = Arc::default();
    let app = app(pool.clone(), Arc::new(Notify::new()), seen.clone(), |l| {
        l.lease(Duration::from_secs(2))
            .heartbeat_every(Duration::from_millis(200))
    });
    let k = key("panic");
    let r = send(&app, "/card", &k, &[], r#"{"panic": true}"#, None).await;
    assert_eq!(r.status, 500, "{}", r.text);
    assert!(!r.text.contains("on purpose"), "no details: {}", r.text);
    assert_eq!(*seen.lock().unwrap(), vec![(Observed::Error, 500)]);
    // the lease runs out: nobody renews it any more
    let conn = pool.get().await.unwrap();
    let opts = ClaimOptions {
        await_result: Some(Duration::from_secs(15)),
        ..committed(30)
    };
    let c = client::claim(&*conn, &k, Some(r#"{"panic": true}"#), "", &opts)
        .await
        .unwrap();
    assert_eq!(c.outcome, Outcome::Reclaimed);
}

/// The refusals of a claim kept past its handler: the settled claim's.
fn settled(e: &Error) -> bool {
    matches!(e, Error::Unexpected(m) if m.contains("settled"))
}

#[tokio::test]
async fn middleware_a_claim_kept_past_its_handler_is_refused() {
    let Some(pool) = pool() else { return };
    let app = app(pool.clone(), Arc::new(Notify::new()), Seen::default(), |l| l);
    for path in ["/pay", "/card"] {
        let k = key("keep");
        let body = r#"{"n": 5, "keep": true}"#;
        let first = send(&app, path, &k, &[], body, None).await;
        assert_eq!(first.status, 201, "{path}: {}", first.text);
        let claim = kept(&k);
        // the transaction was committed: no connection outside it, no late write
        match claim.tx().await {
            Ok(_) => panic!("{path}: tx() of a settled claim"),
            Err(e) => assert!(settled(&e), "{path}: {e}"),
        }
        let e = claim.checkpoint("late").await.unwrap_err();
        assert!(settled(&e), "{path}: {e}");
        // ignored (logged): nobody reads it
        let _ = claim.respond(StatusCode::ACCEPTED, r#"{"late": true}"#);
        let replay = send(&app, path, &k, &[], body, None).await;
        assert_eq!(
            (replay.status, replay.replayed, replay.text),
            (201, true, first.text),
            "{path}"
        );
    }
}

#[tokio::test]
async fn middleware_a_claim_kept_by_a_handler_that_panicked_is_refused() {
    let Some(pool) = pool() else { return };
    let app = app(pool.clone(), Arc::new(Notify::new()), Seen::default(), |l| l);
    let k = key("keep-panic");
    let r = send(&app, "/pay", &k, &[], r#"{"keep": true, "panic": true}"#, None).await;
    assert_eq!(r.status, 500, "{}", r.text);
    settled_and_free(&app, &k).await;
}

/// The kept claim of a handler that panicked is refused, and its
/// transaction was ended: the key is free again (a retry waits for that
/// transaction otherwise, as long as the claim lives).
async fn settled_and_free(app: &Router, k: &str) {
    match kept(k).tx().await {
        Ok(_) => panic!("tx() of the claim of a handler that panicked"),
        Err(e) => assert!(settled(&e), "{e}"),
    }
    let retry = tokio::time::timeout(
        Duration::from_secs(20),
        send(app, "/pay", k, &[], r#"{"n": 6}"#, None),
    )
    .await
    .expect("the retry waited for the kept claim's transaction");
    assert_eq!((retry.status, retry.replayed), (201, false), "{}", retry.text);
}

#[tokio::test]
async fn middleware_a_guard_a_task_held_when_its_handler_panicked_ends_the_transaction() {
    let Some(pool) = pool() else { return };
    let gate = Arc::new(Notify::new());
    let app = app(pool.clone(), gate.clone(), Seen::default(), |l| l);
    let k = key("task-guard-panic");
    let body = r#"{"keep": true, "task_holds_tx": true, "panic": true}"#;
    let r = send(&app, "/pay", &k, &[], body, None).await;
    assert_eq!(r.status, 500, "{}", r.text);
    // the task drops its TxGuard; the claim itself lives on (kept)
    gate.notify_one();
    settled_and_free(&app, &k).await;
}

#[tokio::test]
async fn middleware_replay_of_a_key_stored_without_a_status() {
    // failed without one (idem_fail with a NULL code; attempts_exhausted
    // after it): 500, not 200; completed without one (by SQL): 200
    let Some(pool) = pool() else { return };
    let seen: Seen = Arc::default();
    let app = app(pool.clone(), Arc::new(Notify::new()), seen.clone(), |l| l);
    let (failed, done) = (key("nullcode-failed"), key("nullcode-done"));
    let body = r#"{"n": 5}"#;
    let conn = pool.get().await.unwrap();
    let c = client::claim(&*conn, &failed, Some(body), "", &committed(30))
        .await
        .unwrap();
    client::fail(&*conn, &failed, "", c.token, None, None, false)
        .await
        .unwrap();
    conn.execute(
        "SELECT idem_claim($1, $2::text::jsonb), idem_complete($1, NULL, NULL)",
        &[&done, &body],
    )
    .await
    .unwrap();
    let a = send(&app, "/pay", &failed, &[], body, None).await;
    assert_eq!((a.status, a.replayed), (500, true), "{}", a.text);
    let b = send(&app, "/pay", &done, &[], body, None).await;
    assert_eq!((b.status, b.replayed), (200, true), "{}", b.text);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(Observed::Replay, 500), (Observed::Replay, 200)]
    );
}

#[tokio::test]
async fn middleware_an_answer_idem_complete_refuses_is_500() {
    // the server's fault, not the request's (400); the claim is undone: in
    // a transaction rolled back (the key free), a committed one recorded
    // failed, not retryable (below)
    let Some(pool) = pool() else { return };
    let seen: Seen = Arc::default();
    let app = app(pool.clone(), Arc::new(Notify::new()), seen.clone(), |l| l);
    let conn = pool.get().await.unwrap();
    for (path, left) in [("/pay", None), ("/card", Some("failed"))] {
        let k = key("nul");
        let r = send(&app, path, &k, &[], r#"{"n": 6, "nul": true}"#, None).await;
        assert_eq!(r.status, 500, "{path}: {}", r.text);
        let rows = conn
            .query("SELECT status::text FROM idem_lookup($1, '')", &[&k])
            .await
            .unwrap();
        assert_eq!(rows.first().map(|r| r.get::<_, String>(0)).as_deref(), left, "{path}");
    }
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(Observed::Error, 500), (Observed::Error, 500)]
    );
}

#[tokio::test]
async fn middleware_a_commit_that_lost_its_connection_is_503_outcome_unknown() {
    // the answer may have been committed: not "not processed" (a client
    // would retry with a new key), but retry with the same key
    let Some(pool) = pool() else { return };
    let seen: Seen = Arc::default();
    let app = app(pool.clone(), Arc::new(Notify::new()), seen.clone(), |l| l);
    for path in ["/pay", "/card"] {
        let r = send(&app, path, &key("commit-lost"), &[], r#"{"die_at_commit": true}"#, None).await;
        assert_eq!(
            (r.status, r.retry_after.as_deref()),
            (503, Some("1")),
            "{path}: {}",
            r.text
        );
        let v: serde_json::Value = serde_json::from_str(&r.text).unwrap();
        assert_eq!(v["title"], "Outcome unknown", "{path}");
        assert_eq!(
            v["detail"],
            "The request may have been processed. Retry it with the same Idempotency-Key to get its result.",
            "{path}"
        );
    }
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(Observed::Error, 503), (Observed::Error, 503)]
    );
}

/// A charge outside the database: counts its runs; the first with "hold":
/// true tells `ran` and waits for `gate`; "nul": true answers a body
/// idem_complete refuses (22P05).
#[derive(Default)]
struct Charges {
    runs: AtomicUsize,
    ran: Notify,
    gate: Notify,
}

async fn charge(Extension(c): Extension<Arc<Charges>>, claim: Claimed) -> Response {
    let v: serde_json::Value = serde_json::from_slice(claim.body()).unwrap();
    if c.runs.fetch_add(1, Ordering::SeqCst) == 0 && v["hold"] == true {
        c.ran.notify_one();
        c.gate.notified().await;
    }
    if v["nul"] == true {
        return claim.respond(StatusCode::CREATED, r#"{"charged": "a\u0000b"}"#);
    }
    claim.respond(StatusCode::CREATED, r#"{"charged": true}"#)
}

/// Every claim committed, a lease of 3 s renewed every 0.5 s on `heartbeats`.
fn charging(pool: Pool, heartbeats: Pool, charges: Arc<Charges>) -> Router {
    let layer = IdempotencyLayer::new(pool)
        .heartbeat_pool(heartbeats)
        .lease(Duration::from_secs(3))
        .heartbeat_every(Duration::from_millis(500))
        .await_result(Duration::ZERO)
        .committed_when(|_| true);
    Router::new()
        .route("/charge", post(charge))
        .route_layer(layer)
        .layer(Extension(charges))
}

#[tokio::test]
async fn middleware_heartbeats_go_on_while_the_answer_waits_for_a_connection() {
    let Some(heartbeats) = pool() else { return };
    let url = std::env::var("IDEM_TEST_DATABASE_URL").unwrap();
    let one = Pool::new(url.parse().unwrap(), 1);
    let charges = Arc::new(Charges::default());
    let app = charging(one.clone(), heartbeats.clone(), charges.clone());
    let k = key("beat-on");
    let body = r#"{"hold": true}"#;
    let first = {
        let (app, k) = (app.clone(), k.clone());
        tokio::spawn(async move { send(&app, "/charge", &k, &[], body, None).await })
    };
    charges.ran.notified().await;
    // the request pool's one connection busy: the answer waits for it, twice
    // the lease
    let busy = one.get().await.unwrap();
    charges.gate.notify_one();
    tokio::time::sleep(Duration::from_secs(6)).await;
    // a retry (another instance, its own pool) finds the claim held
    let other = charging(heartbeats.clone(), heartbeats.clone(), charges.clone());
    let retry = send(&other, "/charge", &k, &[], body, None).await;
    assert_eq!(
        (retry.status, charges.runs.load(Ordering::SeqCst)),
        (409, 1),
        "the retry took the key over: {}",
        retry.text
    );
    drop(busy);
    let first = first.await.unwrap();
    assert_eq!(first.status, 201, "{}", first.text);
    let replay = send(&other, "/charge", &k, &[], body, None).await;
    assert_eq!((replay.status, replay.replayed, replay.text), (201, true, first.text));
    assert_eq!(charges.runs.load(Ordering::SeqCst), 1, "charged once");
}

#[tokio::test]
async fn middleware_an_answer_refused_for_a_committed_claim_is_replayed_not_redone() {
    // the work outside the database is done, and a retry that took the key
    // over would do it again and be refused again: recorded failed, not
    // retryable, with a 500 the retries replay.  A request pool of one
    // connection: the answer's transaction gives it back before idem_fail
    // asks for one (it waited for itself, the heartbeats renewing on)
    let Some(pool) = pool() else { return };
    let url = std::env::var("IDEM_TEST_DATABASE_URL").unwrap();
    let one = Pool::new(url.parse().unwrap(), 1);
    let charges = Arc::new(Charges::default());
    let app = charging(one, pool.clone(), charges.clone());
    let k = key("nul-charge");
    let body = r#"{"nul": true}"#;
    let first = tokio::time::timeout(
        Duration::from_secs(30),
        send(&app, "/charge", &k, &[], body, None),
    )
    .await
    .expect("the answer waited for its own connection");
    assert_eq!(first.status, 500, "{}", first.text);
    let v: serde_json::Value = serde_json::from_str(&first.text).unwrap();
    assert_eq!(v["title"], "Internal error");
    assert_eq!(
        v["detail"],
        "The request was processed but its answer could not be stored."
    );
    let retry = send(&app, "/charge", &k, &[], body, None).await;
    assert_eq!(
        (retry.status, retry.replayed, retry.text.as_str()),
        (500, true, r#"{"error": "answer_not_storable"}"#)
    );
    assert_eq!(charges.runs.load(Ordering::SeqCst), 1, "charged once");
}
