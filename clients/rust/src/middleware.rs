//! The Idempotency-Key middleware: a tower [`Layer`] for Axum routes.
//!
//! For each request it
//!  1. requires the `Idempotency-Key` header (400), an `application/json`
//!     body (415) of at most `max_body` bytes (413) that is JSON (400), and
//!     whatever the validator says (its problem, 422 usually), before
//!     anything is claimed: a rejected request leaves no key behind;
//!  2. takes the scope from the configured extractor (by default the
//!     [`Scope`] an authentication layer put into the request's extensions,
//!     else `''`: never a header, unless told to), and claims the key:
//!     `idem_claim(key, body, scope)`, in a transaction that the handler
//!     then works in (default), or committed at once with a lease and a
//!     fencing token (`committed_when`: work outside the database);
//!  3. answers a replay with the stored status and bytes and
//!     `Idempotent-Replayed: true`, a request in flight with 409 +
//!     `Retry-After`, a key used with another body with 422;
//!  4. otherwise runs the handler, which works in [`Claimed::tx`] and answers
//!     [`Claimed::respond`]; the middleware then completes the key in that
//!     transaction, commits, and sends the response as PostgreSQL stored it
//!     (`jsonb` text), so the first answer and every replay are the same
//!     bytes.  A handler that answers anything else has failed: the
//!     transaction is rolled back (default: the key is free again) or the
//!     attempt is recorded failed and retryable (committed claim), and the
//!     handler's answer is sent.  A committed claim's heartbeats go on until
//!     its answer or its failure is recorded.
//!
//! The whole of it runs in a task of its own: a client that disconnects
//! midway never leaves a claim, a transaction or a payment half done.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Request};
use axum::response::{IntoResponse, Response};
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::request::Parts;
use http::StatusCode;
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};
use tokio_postgres::Client;
use tower_layer::Layer;
use tower_service::Service;

use crate::client::{self, ClaimOptions, Conn, Outcome, Pool};
use crate::{Error, Problem};

/// The request header of the key.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// The response header of a replay.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The scope of a request's keys (tenant, merchant, account), put into the
/// request's extensions by whatever authenticated the caller; the default
/// scope extractor reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope(pub String);

/// What happened to a request, for metrics and tracing ([`IdempotencyLayer::on_outcome`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Observed {
    /// Claimed now; the handler ran (`status` is its answer's).
    New,
    /// The stored answer was sent.
    Replay,
    /// Another request holds the key (or an operator must settle it): 409.
    InProgress,
    /// The key was used before with another body: 422.
    Mismatch,
    /// Taken over from an earlier attempt that died or failed; the handler ran.
    Reclaimed,
    /// The claim or the completion failed (the database's error: `sqlstate`),
    /// or the handler panicked (500; `scope` is not known then).
    Error,
    /// Refused before any claim: no or bad key, scope, content type or body.
    Rejected,
}

impl Observed {
    pub fn as_str(self) -> &'static str {
        match self {
            Observed::New => "new",
            Observed::Replay => "replay",
            Observed::InProgress => "in_progress",
            Observed::Mismatch => "mismatch",
            Observed::Reclaimed => "reclaimed",
            Observed::Error => "error",
            Observed::Rejected => "rejected",
        }
    }
}

/// One request's outcome, given to the hook once the answer is ready.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    pub outcome: Observed,
    /// The HTTP status sent.
    pub status: StatusCode,
    /// From the request's arrival to its answer.
    pub elapsed: Duration,
    /// The key ('' when there was none).
    pub key: &'a str,
    pub scope: &'a str,
    /// A committed claim (work outside the database).
    pub committed: bool,
    /// The SQLSTATE of a database error.
    pub sqlstate: Option<&'a str>,
}

type ScopeFn = dyn Fn(&Parts) -> Result<String, Problem> + Send + Sync;
type ValidateFn = dyn Fn(&[u8]) -> Result<(), Problem> + Send + Sync;
type CommittedFn = dyn Fn(&Parts) -> bool + Send + Sync;
type HookFn = dyn Fn(&Event<'_>) + Send + Sync;

#[derive(Clone)]
struct Config {
    pool: Pool,
    heartbeat_pool: Option<Pool>,
    lease: Duration,
    heartbeat: Option<Duration>,
    wait: bool,
    await_result: Duration,
    max_body: usize,
    scope: Arc<ScopeFn>,
    validate: Option<Arc<ValidateFn>>,
    committed: Option<Arc<CommittedFn>>,
    hook: Option<Arc<HookFn>>,
}

/// The middleware, configured: put it on the routes that take an
/// Idempotency-Key (`Router::route_layer`, or `MethodRouter::layer`).
///
/// ```no_run
/// # use pg_idempotency::{IdempotencyLayer, Pool, config_from_env};
/// let pool = Pool::new(config_from_env().unwrap(), 20);
/// let layer = IdempotencyLayer::new(pool)
///     .heartbeat_pool(Pool::new(config_from_env().unwrap(), 2))
///     .scope_from_header("Merchant-Id");   // only where the header is trusted
/// ```
#[derive(Clone)]
pub struct IdempotencyLayer {
    cfg: Arc<Config>,
}

impl std::fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyLayer")
            .field("pool", &self.cfg.pool)
            .field("lease", &self.cfg.lease)
            .field("wait", &self.cfg.wait)
            .field("await_result", &self.cfg.await_result)
            .field("max_body", &self.cfg.max_body)
            .finish_non_exhaustive()
    }
}

impl IdempotencyLayer {
    /// Requests' claims and work on `pool`.  Defaults: lease 30 s, heartbeat
    /// every lease / 3, duplicates wait (`wait => true`), `await_result` 3 s
    /// for committed claims, bodies up to 64 KiB, scope from the [`Scope`]
    /// extension (else `''`), every claim in the handler's transaction, no
    /// validator, no hook.
    pub fn new(pool: Pool) -> IdempotencyLayer {
        IdempotencyLayer {
            cfg: Arc::new(Config {
                pool,
                heartbeat_pool: None,
                lease: Duration::from_secs(30),
                heartbeat: None,
                wait: true,
                await_result: Duration::from_secs(3),
                max_body: 64 << 10,
                scope: Arc::new(|parts: &Parts| {
                    Ok(parts.extensions.get::<Scope>().map(|s| s.0.clone()).unwrap_or_default())
                }),
                validate: None,
                committed: None,
                hook: None,
            }),
        }
    }

    fn with(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(Arc::make_mut(&mut self.cfg));
        self
    }

    /// Connections of their own for heartbeats, so that a busy request pool
    /// never delays them (or the leases lapse and another instance takes
    /// the keys over).  Without one, heartbeats use the request pool.
    pub fn heartbeat_pool(self, pool: Pool) -> Self {
        self.with(|c| c.heartbeat_pool = Some(pool))
    }

    /// The lease of a committed claim.
    pub fn lease(self, lease: Duration) -> Self {
        self.with(|c| c.lease = lease)
    }

    /// How often a committed claim's lease is renewed (default: lease / 3).
    pub fn heartbeat_every(self, every: Duration) -> Self {
        self.with(|c| c.heartbeat = Some(every))
    }

    /// Default mode: a duplicate of a request whose transaction is still open
    /// waits for it, holding a connection, and replays (`true`), or gets 409
    /// at once (`false`).
    pub fn wait_for_duplicates(self, wait: bool) -> Self {
        self.with(|c| c.wait = wait)
    }

    /// Committed claims: how long a duplicate of a request in flight waits
    /// for its result before 409 (`Duration::ZERO`: 409 at once).
    pub fn await_result(self, wait: Duration) -> Self {
        self.with(|c| c.await_result = wait)
    }

    /// The largest body accepted (413 above it).
    pub fn max_body(self, bytes: usize) -> Self {
        self.with(|c| c.max_body = bytes)
    }

    /// The scope from a function of the request (the authenticated caller);
    /// a problem refuses the request before any claim.
    pub fn scope_with(self, f: impl Fn(&Parts) -> Result<String, Problem> + Send + Sync + 'static) -> Self {
        self.with(|c| c.scope = Arc::new(f))
    }

    /// The scope from a request header (absent: `''`).  Only where the header
    /// is trusted: a caller who picks it can probe another scope's keys.
    ///
    /// Panics when `name` is not a header name.
    pub fn scope_from_header(self, name: &str) -> Self {
        let name = HeaderName::from_bytes(name.as_bytes()).expect("a header name");
        self.scope_with(move |parts: &Parts| match parts.headers.get(&name) {
            None => Ok(String::new()),
            Some(v) => String::from_utf8(v.as_bytes().to_vec()).map_err(|_| {
                Problem::new(
                    StatusCode::BAD_REQUEST,
                    "Invalid Idempotency-Key or scope",
                    format!("{name} is not UTF-8."),
                )
            }),
        })
    }

    /// Checks a body (valid JSON already) before the claim.
    pub fn validate(self, f: impl Fn(&[u8]) -> Result<(), Problem> + Send + Sync + 'static) -> Self {
        self.with(|c| c.validate = Some(Arc::new(f)))
    }

    /// Which requests claim committed, with a lease (work outside the
    /// database: a card network); the others claim in the handler's transaction.
    pub fn committed_when(self, f: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Self {
        self.with(|c| c.committed = Some(Arc::new(f)))
    }

    /// Called once per request with its outcome, status and time taken.
    pub fn on_outcome(self, f: impl Fn(&Event<'_>) + Send + Sync + 'static) -> Self {
        self.with(|c| c.hook = Some(Arc::new(f)))
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = IdempotencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyService {
            inner,
            cfg: self.cfg.clone(),
        }
    }
}

/// The service [`IdempotencyLayer`] wraps a route in.
#[derive(Clone)]
pub struct IdempotencyService<S> {
    inner: S,
    cfg: Arc<Config>,
}

impl<S> Service<Request> for IdempotencyService<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        // the clone that was made ready goes with this request
        let fresh = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, fresh);
        let cfg = self.cfg.clone();
        Box::pin(async move {
            let start = Instant::now();
            let key = req
                .headers()
                .get(IDEMPOTENCY_KEY)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            // A task of its own: finished even when the client goes away.
            match tokio::spawn(handle(cfg.clone(), inner, req)).await {
                Ok(r) => Ok(r),
                Err(e) => {
                    // a panic (the handler's): its transaction was closed with
                    // its connection, its heartbeats stopped
                    log::error!("idempotency middleware: the request's task failed: {e}");
                    let report = Report {
                        cfg: &cfg,
                        start,
                        key: &key,
                        scope: "",
                        committed: false,
                    };
                    Ok(report.send(Observed::Error, internal_error(), None))
                }
            }
        })
    }
}

fn internal_error() -> Response {
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Internal error",
        "The request was not processed.",
    )
    .into_response()
}

// ---- a transaction on a pooled connection -----------------------------

/// A pooled connection with an open transaction (or none yet).  Dropped
/// while the transaction is open (a panic), the connection is closed, not
/// pooled: the server rolls the transaction back.
#[derive(Default)]
struct TxConn {
    conn: Option<Conn>,
    open: bool,
}

impl TxConn {
    async fn begin(pool: &Pool) -> Result<TxConn, Error> {
        let conn = pool.get().await?;
        conn.batch_execute("BEGIN").await?;
        Ok(TxConn {
            conn: Some(conn),
            open: true,
        })
    }

    fn client(&self) -> &Client {
        self.conn.as_ref().expect("a transaction was begun")
    }

    async fn commit(&mut self) -> Result<(), Error> {
        self.client().batch_execute("COMMIT").await?;
        self.open = false;
        Ok(())
    }

    async fn rollback(&mut self) {
        if self.open && self.conn.is_some() {
            match self.client().batch_execute("ROLLBACK").await {
                Ok(()) => self.open = false,
                Err(e) => log::warn!("rollback failed: {e}"),
            }
        }
    }
}

impl Drop for TxConn {
    fn drop(&mut self) {
        if self.open {
            if let Some(conn) = self.conn.take() {
                drop(managed_take(conn));
            }
        }
    }
}

fn managed_take(conn: Conn) -> Client {
    deadpool::managed::Object::take(conn)
}

// ---- what the handler sees ----------------------------------------------

struct Shared {
    cfg: Arc<Config>,
    key: String,
    scope: String,
    committed: bool,
    outcome: Outcome,
    token: Option<i64>,
    body: Bytes,
    recovery_point: StdMutex<Option<String>>,
    tx: Mutex<TxConn>,
    result: StdMutex<Option<(StatusCode, String)>>,
    lost: AtomicBool,
    /// Set by the middleware once the handler has returned (or panicked):
    /// the claim's transaction is the middleware's, and a [`Claimed`] kept
    /// past its handler is refused.
    settled: AtomicBool,
}

impl Shared {
    /// Records a committed claim failed: retryable (`None`: the next request
    /// with this key takes it over and finds the recovery point), or not,
    /// with the status and JSON that retries replay.
    async fn record_failed(&self, answer: Option<(i32, &str)>) {
        let (code, response) = answer.unzip();
        match self.cfg.pool.get().await {
            Ok(conn) => {
                let failed = client::fail(
                    &*conn,
                    &self.key,
                    &self.scope,
                    self.token,
                    code,
                    response,
                    answer.is_none(),
                );
                if let Err(e) = failed.await {
                    log::warn!("idem_fail of {:?}: {e}", self.key);
                }
            }
            Err(e) => log::warn!("idem_fail of {:?}: {e}", self.key),
        }
    }

    /// The refusal of a claim used once its handler has returned.
    fn check_open(&self) -> Result<(), Error> {
        if self.settled.load(Ordering::SeqCst) {
            return Err(Error::Unexpected(format!(
                "the claim of {:?} was settled: its handler has returned",
                self.key
            )));
        }
        Ok(())
    }
}

/// Settles the claim when the request's task ends, however it ends (a
/// panic too), and ends what is left of its transaction: an open one is
/// closed with its connection (rolled back), a finished one's connection
/// goes back to the pool, rather than living on in a [`Claimed`] the
/// handler kept.  Declared before the middleware's own guard of the
/// transaction, so dropped after it: the lock is free then, unless a task
/// of the handler's holds it.
struct Settle(Arc<Shared>);

impl Drop for Settle {
    fn drop(&mut self) {
        self.0.settled.store(true, Ordering::SeqCst);
        match self.0.tx.try_lock() {
            Ok(mut tx) => drop(std::mem::take(&mut *tx)),
            // A TxGuard of the handler's is alive: a task of its own held it
            // when the handler panicked.  Ended once that guard is dropped,
            // not when the last clone of the claim is (which could keep the
            // key locked for good); Drop cannot wait, a task does.
            Err(_) => match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    let shared = self.0.clone();
                    runtime.spawn(async move {
                        let mut tx = shared.tx.lock().await;
                        drop(std::mem::take(&mut *tx));
                    });
                }
                Err(_) => log::warn!(
                    "the claim of {:?} was settled outside a Tokio runtime while its transaction \
                     was in use: ended when the last Claimed is dropped",
                    self.0.key
                ),
            },
        }
    }
}

/// The claim a handler behind [`IdempotencyLayer`] holds: an extractor.
#[derive(Clone)]
pub struct Claimed {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Claimed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claimed")
            .field("key", &self.shared.key)
            .field("scope", &self.shared.scope)
            .field("outcome", &self.shared.outcome)
            .field("token", &self.shared.token)
            .field("committed", &self.shared.committed)
            .finish_non_exhaustive()
    }
}

/// A borrowed connection inside the claim's transaction.
pub type TxGuard<'a> = MappedMutexGuard<'a, Client>;

impl Claimed {
    pub fn key(&self) -> &str {
        &self.shared.key
    }
    pub fn scope(&self) -> &str {
        &self.shared.scope
    }
    /// `new` or `reclaimed`.
    pub fn outcome(&self) -> Outcome {
        self.shared.outcome
    }
    /// The fencing token.
    pub fn token(&self) -> Option<i64> {
        self.shared.token
    }
    /// A committed claim (work outside the database).
    pub fn is_committed(&self) -> bool {
        self.shared.committed
    }
    /// The request body (JSON, checked).
    pub fn body(&self) -> &Bytes {
        &self.shared.body
    }
    /// True once a heartbeat found the claim taken over (IK002 / IK003).
    pub fn is_lost(&self) -> bool {
        self.shared.lost.load(Ordering::Relaxed)
    }

    /// What an earlier attempt recorded with [`Claimed::checkpoint`]
    /// (`reclaimed` claims), or the last checkpoint of this one.
    pub fn recovery_point(&self) -> Option<String> {
        self.shared.recovery_point.lock().unwrap().clone()
    }

    /// Records progress, fenced by the token: [`Error::StaleToken`] if
    /// another attempt took the key over.  A committed claim's checkpoint
    /// commits at once; otherwise it is part of the transaction.
    /// [`Error::Unexpected`] once the handler has returned.
    pub async fn checkpoint(&self, point: &str) -> Result<(), Error> {
        let s = &self.shared;
        s.check_open()?;
        if s.committed {
            let conn = s.cfg.pool.get().await?;
            client::checkpoint(&*conn, &s.key, Some(point), &s.scope, s.token).await?;
        } else {
            let tx = self.tx().await?;
            client::checkpoint(&*tx, &s.key, Some(point), &s.scope, None).await?;
        }
        *s.recovery_point.lock().unwrap() = Some(point.to_owned());
        Ok(())
    }

    /// The transaction the handler works in: the claim's own, or (committed
    /// claim) one begun now, in which the key is then completed.  One guard
    /// at a time: while one is alive, `tx()` and a default-mode
    /// [`Claimed::checkpoint`] fail (rather than wait for themselves).
    /// Not past the handler: once it has returned, the middleware ends the
    /// transaction and gives its connection back, and this fails
    /// ([`Error::Unexpected`]).
    pub async fn tx(&self) -> Result<TxGuard<'_>, Error> {
        self.shared.check_open()?;
        let mut g = self
            .shared
            .tx
            .try_lock()
            .map_err(|_| Error::Unexpected("the claim's transaction is in use: drop its TxGuard first".into()))?;
        // settled between the check above and the try_lock (which does not
        // wait): the middleware's now
        self.shared.check_open()?;
        if g.conn.is_none() {
            *g = TxConn::begin(&self.shared.cfg.pool).await?;
        }
        Ok(MutexGuard::map(g, |t| &mut **t.conn.as_mut().expect("begun")))
    }

    /// The handler's successful answer, a JSON document: the middleware
    /// completes the key with it, commits, and sends it as PostgreSQL stored
    /// it.  Return what this returns from the handler.  Once the handler
    /// has returned it is too late: the answer is ignored, and an error
    /// logged.
    pub fn respond(&self, status: StatusCode, json: impl Into<String>) -> Response {
        let mut result = self.shared.result.lock().unwrap();
        if self.shared.settled.load(Ordering::SeqCst) {
            log::error!(
                "Claimed::respond of {:?} after its handler returned: ignored",
                self.shared.key
            );
        } else {
            *result = Some((status, json.into()));
        }
        // a placeholder: the middleware sends the stored answer instead
        StatusCode::NO_CONTENT.into_response()
    }
}

#[axum::async_trait]
impl<S: Send + Sync> FromRequestParts<S> for Claimed {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Claimed, Problem> {
        parts.extensions.get::<Claimed>().cloned().ok_or_else(|| {
            log::error!("Claimed used on a route without IdempotencyLayer");
            Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal error",
                "The request was not processed.",
            )
        })
    }
}

// ---- the request ----------------------------------------------------------

struct Report<'a> {
    cfg: &'a Config,
    start: Instant,
    key: &'a str,
    scope: &'a str,
    committed: bool,
}

impl Report<'_> {
    fn send(&self, outcome: Observed, response: Response, error: Option<&Error>) -> Response {
        if let Some(hook) = &self.cfg.hook {
            hook(&Event {
                outcome,
                status: response.status(),
                elapsed: self.start.elapsed(),
                key: self.key,
                scope: self.scope,
                committed: self.committed,
                sqlstate: error.and_then(Error::sqlstate),
            });
        }
        response
    }

    fn error(&self, e: &Error) -> Response {
        let outcome = match e {
            Error::RequestMismatch(_) => Observed::Mismatch,
            _ => Observed::Error,
        };
        self.send(outcome, Problem::from_error(e).into_response(), Some(e))
    }
}

fn reject(cfg: &Config, start: Instant, key: &str, p: Problem) -> Response {
    let r = Report {
        cfg,
        start,
        key,
        scope: "",
        committed: false,
    };
    r.send(Observed::Rejected, p.into_response(), None)
}

/// The checks before any claim: the key, the scope, the body.
struct Checked {
    key: String,
    scope: String,
    body: Bytes,
}

async fn check(cfg: &Config, parts: &Parts, body: Body) -> Result<Checked, (String, Problem)> {
    let bad = |status, title: &str, detail: &str| Problem::new(status, title, detail);
    let key = match parts.headers.get(IDEMPOTENCY_KEY) {
        Some(v) if !v.is_empty() => String::from_utf8(v.as_bytes().to_vec()).map_err(|_| {
            (
                String::new(),
                bad(
                    StatusCode::BAD_REQUEST,
                    "Invalid Idempotency-Key",
                    "The key is not UTF-8.",
                ),
            )
        })?,
        _ => {
            return Err((
                String::new(),
                bad(
                    StatusCode::BAD_REQUEST,
                    "Idempotency-Key header missing",
                    "This request needs an Idempotency-Key header.",
                ),
            ))
        }
    };
    let fail = |p: Problem| (key.clone(), p);
    let scope = (cfg.scope)(parts).map_err(fail)?;
    if !is_json(parts.headers.get(CONTENT_TYPE)) {
        return Err(fail(bad(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Content-Type",
            "Send the request as application/json.",
        )));
    }
    let too_large = || {
        bad(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Body too large",
            &format!("At most {} bytes.", cfg.max_body),
        )
    };
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > cfg.max_body as u64) {
        return Err(fail(too_large()));
    }
    let body = axum::body::to_bytes(body, cfg.max_body).await.map_err(|e| {
        let limit = e
            .into_inner()
            .downcast_ref::<http_body_util::LengthLimitError>()
            .is_some();
        fail(if limit {
            too_large()
        } else {
            bad(
                StatusCode::BAD_REQUEST,
                "Body unreadable",
                "The body could not be read.",
            )
        })
    })?;
    // Syntax only (numbers are not converted): a number PostgreSQL refuses
    // is the database's to refuse (400 as well).
    let text = std::str::from_utf8(&body).ok();
    if text
        .and_then(|t| serde_json::from_str::<&serde_json::value::RawValue>(t).ok())
        .is_none()
    {
        return Err(fail(bad(
            StatusCode::BAD_REQUEST,
            "Malformed JSON",
            "The body is not valid JSON.",
        )));
    }
    if let Some(validate) = &cfg.validate {
        validate(&body).map_err(fail)?;
    }
    Ok(Checked { key, scope, body })
}

/// `application/json`, with or without parameters (`; charset=utf-8`).
pub(crate) fn is_json(v: Option<&HeaderValue>) -> bool {
    let Some(m) = v
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<mime::Mime>().ok())
    else {
        return false;
    };
    m.type_() == mime::APPLICATION && m.subtype() == mime::JSON && m.suffix().is_none()
}

/// The stored answer: status and PostgreSQL's `jsonb` text (or no body).
fn stored(code: i32, body: Option<String>, replayed: bool) -> Response {
    let status = u16::try_from(code)
        .ok()
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = match body {
        Some(text) => {
            let mut r = Response::new(Body::from(text));
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        }
        None => Response::new(Body::empty()),
    };
    *r.status_mut() = status;
    if replayed {
        r.headers_mut()
            .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    r
}

async fn handle<S>(cfg: Arc<Config>, mut inner: S, req: Request) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let start = Instant::now();
    let (mut parts, body) = req.into_parts();
    let Checked { key, scope, body } = match check(&cfg, &parts, body).await {
        Ok(c) => c,
        Err((key, p)) => return reject(&cfg, start, &key, p),
    };
    let committed = cfg.committed.as_ref().is_some_and(|f| f(&parts));
    let report = Report {
        cfg: &cfg,
        start,
        key: &key,
        scope: &scope,
        committed,
    };
    let request = std::str::from_utf8(&body).expect("checked");

    // the claim: committed at once, or in the transaction the handler works in
    let mut tx = TxConn::default();
    let claimed = if committed {
        let options = ClaimOptions {
            lease: Some(cfg.lease),
            wait: true,
            await_result: Some(cfg.await_result),
        };
        match cfg.pool.get().await {
            Ok(conn) => client::claim(&*conn, &key, Some(request), &scope, &options).await,
            Err(e) => Err(e),
        }
    } else {
        let options = ClaimOptions {
            lease: Some(cfg.lease),
            wait: cfg.wait,
            await_result: Some(Duration::ZERO),
        };
        match TxConn::begin(&cfg.pool).await {
            Ok(t) => {
                tx = t;
                client::claim(tx.client(), &key, Some(request), &scope, &options).await
            }
            Err(e) => Err(e),
        }
    };
    let claim = match claimed {
        Ok(c) => c,
        Err(e) => {
            tx.rollback().await;
            return report.error(&e);
        }
    };
    match claim.outcome {
        Outcome::Replay => {
            tx.rollback().await;
            // no stored status: a key completed by SQL is a success; a failed
            // one (idem_fail without a code, attempts_exhausted) is not
            let code = claim.response_code.unwrap_or(match claim.status.as_deref() {
                Some("failed") => 500,
                _ => 200,
            });
            return report.send(Observed::Replay, stored(code, claim.response, true), None);
        }
        Outcome::InProgress | Outcome::Stale => {
            tx.rollback().await;
            let detail = if claim.outcome == Outcome::Stale {
                "An earlier attempt stopped midway; an operator must settle it."
            } else {
                "Retry after the time in Retry-After."
            };
            let p = Problem::new(
                StatusCode::CONFLICT,
                "A request with this Idempotency-Key is being processed",
                detail,
            )
            .retry_after(claim.retry_after_secs);
            return report.send(Observed::InProgress, p.into_response(), None);
        }
        Outcome::New | Outcome::Reclaimed => {}
    }
    let observed = if claim.outcome == Outcome::New {
        Observed::New
    } else {
        Observed::Reclaimed
    };

    let shared = Arc::new(Shared {
        cfg: cfg.clone(),
        key: key.clone(),
        scope: scope.clone(),
        committed,
        outcome: claim.outcome,
        token: claim.token,
        body: body.clone(),
        recovery_point: StdMutex::new(claim.recovery_point),
        tx: Mutex::new(tx),
        result: StdMutex::new(None),
        lost: AtomicBool::new(false),
        settled: AtomicBool::new(false),
    });
    // settled when this ends, a panic of the handler's too
    let _settle = Settle(shared.clone());
    parts.extensions.insert(Claimed { shared: shared.clone() });
    // stopped once the answer or the failure is recorded (not when the
    // handler returns: the connection for that may come after the lease, and
    // a retry would take the key over), and when the handler panics
    let beat = committed.then(|| AbortOnDrop(tokio::spawn(heartbeats(shared.clone()))));
    let answer = match inner.call(Request::from_parts(parts, Body::from(body))).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    // The handler has returned: the claim is the middleware's, which uses
    // the transaction itself (a Claimed kept past the handler is refused).
    let result = {
        let mut result = shared.result.lock().unwrap();
        shared.settled.store(true, Ordering::SeqCst);
        result.take()
    };
    let mut tx = shared.tx.lock().await;
    let Some((status, json)) = result else {
        // The handler failed and answered itself.
        tx.rollback().await;
        // its connection back to the pool before idem_fail asks for one (a
        // pool of one would wait for itself, the heartbeats renewing on)
        *tx = TxConn::default();
        drop(tx);
        if committed {
            shared.record_failed(None).await;
        }
        drop(beat);
        if answer.status().as_u16() < 400 {
            log::error!(
                "the handler answered {} without Claimed::respond: not recorded",
                answer.status()
            );
            return report.send(observed, internal_error(), None);
        }
        return report.send(observed, answer, None);
    };
    let mut committing = false;
    let completed = async {
        if tx.conn.is_none() {
            *tx = TxConn::begin(&cfg.pool).await?;
        }
        let token = if committed { claim.token } else { None };
        let text = client::complete(
            tx.client(),
            &key,
            i32::from(status.as_u16()),
            Some(&json),
            &scope,
            token,
        )
        .await?;
        committing = true;
        tx.commit().await?;
        Ok::<_, Error>(text)
    }
    .await;
    let e = match completed {
        Ok(text) => {
            drop(beat);
            return report.send(observed, stored(i32::from(status.as_u16()), text, false), None);
        }
        Err(e) => e,
    };
    // a class 22 (or 54000) from idem_complete is the handler's answer
    // refused (a \u0000 in a string: 22P05; too large): the server's fault,
    // 500, not the request's, 400
    let refused =
        !committing && (matches!(e, Error::InvalidRequest(_) | Error::InvalidKey(_)) || e.sqlstate() == Some("54000"));
    let e = match e {
        Error::InvalidRequest(f) | Error::InvalidKey(f) => Error::Database(f.error),
        e => e,
    };
    // as a handler that failed: rolled back, a committed claim recorded
    // failed and retryable; but a committed claim whose answer was refused
    // did its work outside the database, and a retry taking the key over
    // would do it again and be refused again: recorded failed, not
    // retryable, with a 500 that retries replay
    tx.rollback().await;
    *tx = TxConn::default(); // its connection back before idem_fail asks for one
    drop(tx);
    let unstorable = refused && committed;
    if unstorable {
        shared
            .record_failed(Some((500, r#"{"error": "answer_not_storable"}"#)))
            .await;
    } else if committed {
        shared.record_failed(None).await;
    }
    drop(beat);
    if committing && connection_lost(e.sqlstate()) {
        // The COMMIT was sent: the answer and the work may have committed.
        // Not "not processed" (a client would retry with a new key and pay
        // twice): a retry with the same key tells.
        log::error!("the COMMIT of {key:?} failed, it may have committed: {e}");
        let p = Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "Outcome unknown",
            "The request may have been processed. Retry it with the same Idempotency-Key to get its result.",
        )
        .retry_after(1);
        return report.send(Observed::Error, p.into_response(), Some(&e));
    }
    if unstorable {
        log::error!("idem_complete refused the answer of {key:?}: {e}");
        let p = Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error",
            "The request was processed but its answer could not be stored.",
        );
        return report.send(Observed::Error, p.into_response(), Some(&e));
    }
    report.error(&e)
}

/// A lost connection (no SQLSTATE, class 08, or the server shutting the
/// session down: 57P01, 57P02, 57P03): a COMMIT that failed so may have
/// committed.
fn connection_lost(sqlstate: Option<&str>) -> bool {
    match sqlstate {
        None => true,
        Some(c) => c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03"),
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Renews a committed claim's lease on the heartbeat pool until aborted, or
/// until the claim turns out lost.
async fn heartbeats(s: Arc<Shared>) {
    let every = s
        .cfg
        .heartbeat
        .unwrap_or(s.cfg.lease / 3)
        .max(Duration::from_millis(100));
    let pool = s.cfg.heartbeat_pool.as_ref().unwrap_or(&s.cfg.pool);
    let Some(token) = s.token else { return };
    loop {
        tokio::time::sleep(every).await;
        let beat = match pool.get().await {
            Ok(conn) => client::heartbeat(&*conn, &s.key, &s.scope, token, Some(s.cfg.lease)).await,
            Err(e) => Err(e),
        };
        match beat {
            Ok(()) => {}
            Err(e @ (Error::StaleToken(_) | Error::NotProcessing(_))) => {
                log::warn!("heartbeat of {:?}: the claim was lost: {e}", s.key);
                s.lost.store(true, Ordering::Relaxed);
                return;
            }
            Err(e) => log::warn!("heartbeat of {:?}: {e}", s.key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        let ok = |s: &'static str| is_json(Some(&HeaderValue::from_static(s)));
        assert!(ok("application/json"));
        assert!(ok("application/json; charset=utf-8"));
        assert!(ok("Application/JSON;charset=UTF-8"));
        assert!(!ok("text/plain"));
        assert!(!ok("application/x-www-form-urlencoded"));
        assert!(!ok("application/problem+json"));
        assert!(!ok("application/jsonx"));
        assert!(!is_json(None));
    }

    #[test]
    fn stored_answers() {
        let r = stored(201, Some("{\"a\": 1}".into()), true);
        assert_eq!(r.status(), StatusCode::CREATED);
        assert_eq!(r.headers()[CONTENT_TYPE], "application/json");
        assert_eq!(r.headers()[IDEMPOTENT_REPLAYED], "true");
        let r = stored(204, None, false);
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        assert!(r.headers().get(CONTENT_TYPE).is_none());
        assert!(r.headers().get(IDEMPOTENT_REPLAYED).is_none());
        assert_eq!(stored(7, None, false).status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn connection_lost_sqlstates() {
        for lost in [
            None,
            Some("08006"),
            Some("08003"),
            Some("57P01"),
            Some("57P02"),
            Some("57P03"),
        ] {
            assert!(connection_lost(lost), "{lost:?}");
        }
        for not in ["40001", "23505", "57014", "22P05", "54000", "IK002"] {
            assert!(!connection_lost(Some(not)), "{not}");
        }
    }
}
