//! The key functions of the extension over tokio-postgres, and a small
//! connection pool (deadpool's managed pool with a manager of its own:
//! Debian packages deadpool, not deadpool-postgres).
//!
//! Every function takes any [`GenericClient`]: a pooled connection (each
//! statement commits by itself) or a [`tokio_postgres::Transaction`] (the
//! claim, the work and the completion commit together).

use std::time::Duration;

use deadpool::managed;
use tokio_postgres::{Client, Config, GenericClient, NoTls};

use crate::Error;

/// What `idem_claim` found (docs/reference.md, "Outcomes of idem_claim").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The key is now this caller's: do the work.
    New,
    /// The key was completed before (or failed, not retryable): answer the stored response.
    Replay,
    /// Another request holds the key (lease alive, or its transaction is open): 409 + Retry-After.
    InProgress,
    /// An earlier attempt died or failed retryably; the key is now this caller's, with the
    /// earlier attempt's recovery point.
    Reclaimed,
    /// `idempotency.stale_policy = 'hold'`: an operator must settle the key.  409.
    Stale,
}

impl Outcome {
    /// The extension's name of the outcome.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::New => "new",
            Outcome::Replay => "replay",
            Outcome::InProgress => "in_progress",
            Outcome::Reclaimed => "reclaimed",
            Outcome::Stale => "stale",
        }
    }

    fn parse(s: &str) -> Option<Outcome> {
        Some(match s {
            "new" => Outcome::New,
            "replay" => Outcome::Replay,
            "in_progress" => Outcome::InProgress,
            "reclaimed" => Outcome::Reclaimed,
            "stale" => Outcome::Stale,
            _ => return None,
        })
    }

    /// True for `new` and `reclaimed`: the caller holds the key and does the work.
    pub fn is_mine(self) -> bool {
        matches!(self, Outcome::New | Outcome::Reclaimed)
    }
}

/// The row `idem_claim` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub outcome: Outcome,
    /// The fencing token (`new` and `reclaimed` only).
    pub token: Option<i64>,
    /// The stored status code (`replay`).
    pub response_code: Option<i32>,
    /// The row's status (`completed` or `failed` for a replay).
    pub status: Option<String>,
    /// The stored response as PostgreSQL's `jsonb` text (`replay`): send these bytes.
    pub response: Option<String>,
    /// Seconds until a retry may succeed, rounded up, at least 1 (`in_progress`).
    pub retry_after_secs: u32,
    /// How far an earlier attempt got (`reclaimed`), as `idem_checkpoint` recorded it.
    pub recovery_point: Option<String>,
}

/// The arguments of `idem_claim` besides key, request and scope.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimOptions {
    /// The lease of a committed claim (`lease`); `None`: `idempotency.lease`.
    pub lease: Option<Duration>,
    /// Wait for a duplicate whose transaction is still open (`wait`).
    pub wait: bool,
    /// Wait this long for a committed claim in flight to finish (`await_result`);
    /// `None`: `idempotency.await_result`.
    pub await_result: Option<Duration>,
}

impl Default for ClaimOptions {
    fn default() -> Self {
        ClaimOptions {
            lease: None,
            wait: true,
            await_result: None,
        }
    }
}

fn secs(d: Option<Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64())
}

const CLAIM_SQL: &str = "\
SELECT outcome::text, token, response_code, response::text, recovery_point,
       coalesce(ceil(extract(epoch FROM retry_after))::int, 1), status::text
FROM idem_claim($1, $2::text::jsonb, $3,
                lease => make_interval(secs => $4::float8),
                wait => $5,
                await_result => make_interval(secs => $6::float8))";

/// `idem_claim(key, request, scope, lease, wait => ..., await_result => ...)`.
///
/// `request` is the request's JSON text (`None`: no request hash).  A key
/// used before with another request is [`Error::RequestMismatch`].
pub async fn claim<C: GenericClient + Sync>(
    client: &C,
    key: &str,
    request: Option<&str>,
    scope: &str,
    options: &ClaimOptions,
) -> Result<Claim, Error> {
    let lease = secs(options.lease);
    let await_result = secs(options.await_result);
    // make_interval(secs => NULL) is NULL, which idem_claim reads as "the setting"
    let row = client
        .query_one(
            CLAIM_SQL,
            &[&key, &request, &scope, &lease, &options.wait, &await_result],
        )
        .await?;
    let outcome: String = row.get(0);
    let outcome = Outcome::parse(&outcome)
        .ok_or_else(|| Error::Unexpected(format!("idem_claim answered an unknown outcome {outcome:?}")))?;
    let retry: i32 = row.get(5);
    Ok(Claim {
        outcome,
        token: row.get(1),
        response_code: row.get(2),
        status: row.get(6),
        response: row.get(3),
        retry_after_secs: retry.max(1) as u32,
        recovery_point: row.get(4),
    })
}

/// `idem_complete(key, response_code, response, scope, token)`; returns the
/// response as PostgreSQL stores it (`jsonb` text), the bytes a replay sends.
/// `token`: `None` only in the transaction that made the claim.
pub async fn complete<C: GenericClient + Sync>(
    client: &C,
    key: &str,
    response_code: i32,
    response: Option<&str>,
    scope: &str,
    token: Option<i64>,
) -> Result<Option<String>, Error> {
    let row = client
        .query_one(
            "SELECT $3::text::jsonb::text FROM idem_complete($1, $2, $3::text::jsonb, $4, $5)",
            &[&key, &response_code, &response, &scope, &token],
        )
        .await?;
    Ok(row.get(0))
}

/// `idem_fail(key, scope, token, response_code, response, retryable)`.
/// Retryable: the next claim takes the key over (`reclaimed`); otherwise the
/// stored error is replayed.
pub async fn fail<C: GenericClient + Sync>(
    client: &C,
    key: &str,
    scope: &str,
    token: Option<i64>,
    response_code: Option<i32>,
    response: Option<&str>,
    retryable: bool,
) -> Result<(), Error> {
    client
        .execute(
            "SELECT FROM idem_fail($1, $2, $3, $4, $5::text::jsonb, $6)",
            &[&key, &scope, &token, &response_code, &response, &retryable],
        )
        .await?;
    Ok(())
}

/// `idem_heartbeat(key, scope, token, lease)`: extends the lease of a claim
/// the caller still holds ([`Error::StaleToken`] or [`Error::NotProcessing`]
/// when it does not).
pub async fn heartbeat<C: GenericClient + Sync>(
    client: &C,
    key: &str,
    scope: &str,
    token: i64,
    lease: Option<Duration>,
) -> Result<(), Error> {
    let lease = secs(lease);
    client
        .execute(
            "SELECT FROM idem_heartbeat($1, $2, $3, make_interval(secs => $4::float8))",
            &[&key, &scope, &token, &lease],
        )
        .await?;
    Ok(())
}

/// `idem_checkpoint(key, recovery_point, scope, token)`: records progress,
/// fenced by the token (`None` clears the recovery point).
pub async fn checkpoint<C: GenericClient + Sync>(
    client: &C,
    key: &str,
    recovery_point: Option<&str>,
    scope: &str,
    token: Option<i64>,
) -> Result<(), Error> {
    client
        .execute(
            "SELECT FROM idem_checkpoint($1, $2, $3, $4)",
            &[&key, &recovery_point, &scope, &token],
        )
        .await?;
    Ok(())
}

/// `idem_release(key, scope, token)`: gives the claim up; the next claim is `new`.
pub async fn release<C: GenericClient + Sync>(
    client: &C,
    key: &str,
    scope: &str,
    token: Option<i64>,
) -> Result<(), Error> {
    client
        .execute("SELECT FROM idem_release($1, $2, $3)", &[&key, &scope, &token])
        .await?;
    Ok(())
}

// ---- connections -------------------------------------------------------

/// The pool's manager: plain TCP or Unix-socket connections (Debian ships no
/// TLS connector for tokio-postgres; see README.md).
#[derive(Debug)]
pub struct Manager {
    config: Config,
}

impl managed::Manager for Manager {
    type Type = Client;
    type Error = tokio_postgres::Error;

    async fn create(&self) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = self.config.connect(NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                log::warn!("database connection ended: {e}");
            }
        });
        Ok(client)
    }

    async fn recycle(
        &self,
        client: &mut Client,
        _: &managed::Metrics,
    ) -> managed::RecycleResult<tokio_postgres::Error> {
        if client.is_closed() {
            return Err(managed::RecycleError::message("connection closed"));
        }
        Ok(())
    }
}

/// A pooled connection; derefs to [`tokio_postgres::Client`].
pub type Conn = managed::Object<Manager>;

/// A pool of connections, cheap to clone.
#[derive(Clone)]
pub struct Pool {
    inner: managed::Pool<Manager>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.inner.status();
        write!(
            f,
            "Pool {{ size: {}, available: {}, max: {} }}",
            s.size, s.available, s.max_size
        )
    }
}

impl Pool {
    /// At most `max_size` connections, opened when first needed.
    pub fn new(config: Config, max_size: usize) -> Pool {
        let inner = managed::Pool::builder(Manager { config })
            .max_size(max_size.max(1))
            .build()
            .expect("a pool without timeouts needs no runtime");
        Pool { inner }
    }

    /// A connection, waiting while all are in use.
    pub async fn get(&self) -> Result<Conn, Error> {
        self.inner.get().await.map_err(|e| match e {
            managed::PoolError::Backend(e) => Error::from_postgres(e),
            other => Error::Pool(other.to_string()),
        })
    }
}

/// A connection configuration from the environment: `DATABASE_URL` (a
/// `postgresql://` URL or a `key=value` string) when set, otherwise libpq's
/// variables `PGHOST` (a host name, or a socket directory), `PGPORT`,
/// `PGUSER`, `PGPASSWORD`, `PGDATABASE`, `PGAPPNAME`, `PGCONNECT_TIMEOUT` and
/// `PGSSLMODE` (`disable`, `allow` or `prefer`: there is no TLS), with
/// libpq's defaults.
pub fn config_from_env() -> Result<Config, String> {
    config_from(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
}

pub(crate) fn config_from(get: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
    if let Some(url) = get("DATABASE_URL") {
        let config: Config = url.parse().map_err(|e| format!("DATABASE_URL: {e}"))?;
        check_ssl(config.get_ssl_mode())?;
        return Ok(config);
    }
    let mut config = Config::new();
    match get("PGHOST") {
        Some(hosts) => {
            for h in hosts.split(',') {
                config.host(h);
            }
        }
        None => {
            // libpq's default: the Unix socket directory (Debian's), else TCP to localhost
            let dir = ["/var/run/postgresql", "/tmp"]
                .into_iter()
                .find(|d| std::path::Path::new(d).is_dir());
            config.host(dir.unwrap_or("localhost"));
        }
    }
    if let Some(port) = get("PGPORT") {
        let port: u16 = port.parse().map_err(|_| format!("PGPORT: not a port: {port}"))?;
        config.port(port);
    }
    let user = get("PGUSER").or_else(|| get("USER")).or_else(|| get("LOGNAME"));
    let user = user.ok_or("PGUSER is not set and the OS user is unknown")?;
    config.user(&user);
    config.dbname(get("PGDATABASE").unwrap_or_else(|| user.clone()));
    if let Some(p) = get("PGPASSWORD") {
        config.password(p);
    }
    if let Some(a) = get("PGAPPNAME") {
        config.application_name(&a);
    }
    if let Some(t) = get("PGCONNECT_TIMEOUT") {
        let t: u64 = t.parse().map_err(|_| format!("PGCONNECT_TIMEOUT: not a number: {t}"))?;
        if t > 0 {
            config.connect_timeout(Duration::from_secs(t.max(2)));
        }
    }
    config.ssl_mode(match get("PGSSLMODE").as_deref() {
        None | Some("prefer") | Some("allow") => tokio_postgres::config::SslMode::Prefer,
        Some("disable") => tokio_postgres::config::SslMode::Disable,
        Some(other) => {
            return Err(format!(
                "PGSSLMODE={other}: this build has no TLS (disable, allow or prefer)"
            ))
        }
    });
    Ok(config)
}

fn check_ssl(mode: tokio_postgres::config::SslMode) -> Result<(), String> {
    match mode {
        tokio_postgres::config::SslMode::Require => {
            Err("sslmode=require: this build has no TLS (disable or prefer)".into())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn config_from_libpq_variables() {
        let c = config_from(env(&[
            ("PGHOST", "127.0.0.1"),
            ("PGPORT", "5433"),
            ("PGUSER", "payments_service"),
            ("PGDATABASE", "payments"),
            ("PGPASSWORD", "secret"),
            ("PGSSLMODE", "disable"),
        ]))
        .unwrap();
        assert_eq!(c.get_hosts(), &[tokio_postgres::config::Host::Tcp("127.0.0.1".into())]);
        assert_eq!(c.get_ports(), &[5433]);
        assert_eq!(c.get_user(), Some("payments_service"));
        assert_eq!(c.get_dbname(), Some("payments"));
        assert_eq!(c.get_password(), Some(&b"secret"[..]));
        assert_eq!(c.get_ssl_mode(), tokio_postgres::config::SslMode::Disable);
    }

    #[test]
    fn config_defaults_like_libpq() {
        let c = config_from(env(&[("USER", "alice"), ("PGHOST", "/tmp")])).unwrap();
        assert_eq!(c.get_user(), Some("alice"));
        assert_eq!(c.get_dbname(), Some("alice"));
        assert!(matches!(c.get_hosts()[0], tokio_postgres::config::Host::Unix(_)));
    }

    #[test]
    fn config_from_database_url_wins() {
        let c = config_from(env(&[
            ("DATABASE_URL", "postgresql://svc@db.example:6543/pay"),
            ("PGHOST", "ignored"),
        ]))
        .unwrap();
        assert_eq!(c.get_user(), Some("svc"));
        assert_eq!(c.get_dbname(), Some("pay"));
        assert_eq!(c.get_ports(), &[6543]);
    }

    #[test]
    fn config_refuses_tls_it_cannot_do() {
        assert!(config_from(env(&[("PGUSER", "u"), ("PGSSLMODE", "require")])).is_err());
        assert!(config_from(env(&[("PGUSER", "u"), ("PGSSLMODE", "verify-full")])).is_err());
        assert!(config_from(env(&[("DATABASE_URL", "postgresql://u@h/d?sslmode=require")])).is_err());
        assert!(config_from(env(&[("PGUSER", "u"), ("PGPORT", "x")])).is_err());
    }

    #[test]
    fn outcomes_round_trip() {
        for o in [
            Outcome::New,
            Outcome::Replay,
            Outcome::InProgress,
            Outcome::Reclaimed,
            Outcome::Stale,
        ] {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
        }
        assert_eq!(Outcome::parse("mismatch"), None);
        assert!(Outcome::New.is_mine() && Outcome::Reclaimed.is_mine() && !Outcome::Replay.is_mine());
    }
}
