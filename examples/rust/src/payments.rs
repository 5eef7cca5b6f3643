//! The payments handler behind the middleware (validation, the INSERT, card
//! mode's recovery points) and the card network client.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use pg_idempotency::{Claimed, Error, Problem};
use serde_json::value::RawValue;

use crate::App;

/// A valid request body.
pub struct Payment {
    pub order: String,
    /// Minor units.
    pub amount: i64,
    pub currency: Option<String>,
}

fn invalid(detail: &str) -> Problem {
    Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid payment", detail)
}

/// Checks a (well-formed JSON) body: the payment, or a problem.  Members are
/// read as raw JSON, so a member the payment does not use is never
/// converted (a number beyond f64 in "note" is PostgreSQL's to refuse).
pub fn parse_payment(body: &[u8]) -> Result<Payment, Problem> {
    let object = "The body must be a JSON object.";
    let doc: HashMap<String, Box<RawValue>> = serde_json::from_slice(body).map_err(|_| invalid(object))?;
    let order = doc
        .get("order")
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
        .filter(|o| (1..=64).contains(&o.chars().count()))
        .ok_or_else(|| invalid("\"order\" must be a string of 1 to 64 characters."))?;
    // an integer literal, as JSON wrote it: 1.5, 1e3, "12" and null are not
    let amount = doc
        .get("amount")
        .and_then(|v| v.get().parse::<i64>().ok())
        .filter(|a| (1..=1_000_000_000_000).contains(a))
        .ok_or_else(|| invalid("\"amount\" must be an integer from 1 to 1000000000000 (minor units)."))?;
    let currency = match doc.get("currency") {
        None => None,
        Some(v) => Some(
            serde_json::from_str::<String>(v.get())
                .ok()
                .filter(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()))
                .ok_or_else(|| invalid("\"currency\", when given, must be three capital letters."))?,
        ),
    };
    Ok(Payment {
        order,
        amount,
        currency,
    })
}

/// The middleware's validator.
pub fn validate_payment(body: &[u8]) -> Result<(), Problem> {
    parse_payment(body).map(|_| ())
}

/// Inserts the payment and builds the response in SQL: the text sent is
/// PostgreSQL's.
const INSERT_PAYMENT: &str = "
WITH p AS (INSERT INTO payments (scope, order_id, amount, currency, authorization_id)
           VALUES ($1, $2, $3, $4, $5) RETURNING *)
SELECT jsonb_strip_nulls(jsonb_build_object('payment_id', id, 'order', order_id, 'amount', amount,
                         'currency', currency, 'authorization_id', authorization_id))::text
FROM p";

/// POST /payments (and ?mode=card), behind the idempotency middleware.
pub async fn pay(State(app): State<App>, claim: Claimed) -> Response {
    // validated by the middleware already
    let payment = match parse_payment(claim.body()) {
        Ok(p) => p,
        Err(p) => return p.into_response(),
    };
    let mut authorization = None;
    if claim.is_committed() {
        match authorize(&app.card, &claim, &payment).await {
            Ok(id) => authorization = Some(id),
            Err(PayError::Card(e)) => {
                log::error!("{e}");
                return Problem::new(
                    StatusCode::BAD_GATEWAY,
                    "Card network unavailable",
                    "Retry with the same Idempotency-Key.",
                )
                .retry_after(1)
                .into_response();
            }
            Err(PayError::Db(e)) => return e.into_response(),
        }
    }
    let inserted = async {
        let tx = claim.tx().await?;
        let row = tx
            .query_one(
                INSERT_PAYMENT,
                &[
                    &claim.scope(),
                    &payment.order,
                    &payment.amount,
                    &payment.currency,
                    &authorization,
                ],
            )
            .await?;
        Ok::<String, Error>(row.get(0))
    }
    .await;
    match inserted {
        Ok(response) => claim.respond(StatusCode::CREATED, response),
        Err(e) => e.into_response(),
    }
}

enum PayError {
    Card(CardError),
    Db(Error),
}

impl From<CardError> for PayError {
    fn from(e: CardError) -> Self {
        PayError::Card(e)
    }
}

impl From<Error> for PayError {
    fn from(e: Error) -> Self {
        PayError::Db(e)
    }
}

/// Gets the card authorized once per key, across attempts.  Recovery points:
/// "authorizing" before the card call (a later attempt that finds it asks
/// the card network whether the call went through) and "authorized:<id>"
/// after it (a later attempt uses the id and calls nothing).
async fn authorize(card: &CardNetwork, claim: &Claimed, p: &Payment) -> Result<String, PayError> {
    let point = claim.recovery_point().unwrap_or_default();
    if let Some(id) = point.strip_prefix("authorized:") {
        return Ok(id.to_owned());
    }
    let found = if point == "authorizing" {
        card.lookup(claim.scope(), claim.key()).await?
    } else {
        None
    };
    let id = match found {
        Some(id) => id,
        None => {
            // also a fence: IK002 here if another attempt took the key over
            claim.checkpoint("authorizing").await?;
            card.authorize(claim.scope(), claim.key(), p.amount).await?
        }
    };
    claim.checkpoint(&format!("authorized:{id}")).await?;
    Ok(id)
}

// ---- the card network ---------------------------------------------------

/// The card network failed: unreachable, an error status, or no id.
#[derive(Debug)]
pub struct CardError(String);

impl std::fmt::Display for CardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The client of the (fake) card network: `POST /authorizations {merchant,
/// idempotency_key, amount}` -> `201 {authorization_id}`; `GET
/// /authorizations?merchant=M&idempotency_key=K` -> `200 {authorization_id}`
/// or 404 (a lookup authorizes nothing).
pub struct CardNetwork {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

const CARD_TIMEOUT: Duration = Duration::from_secs(60);

impl CardNetwork {
    pub fn new(base: &str) -> CardNetwork {
        CardNetwork {
            base: base.trim_end_matches('/').to_owned(),
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    async fn call(&self, req: Request<Full<Bytes>>, not_found_ok: bool) -> Result<Option<String>, CardError> {
        let answer = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| CardError(format!("card network unreachable: {e}")))?;
            let status = resp.status();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| CardError(format!("card network unreachable: {e}")))?
                .to_bytes();
            Ok::<_, CardError>((status, body))
        };
        let (status, body) = tokio::time::timeout(CARD_TIMEOUT, answer)
            .await
            .map_err(|_| CardError("card network timed out".into()))??;
        if not_found_ok && status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(CardError(format!("card network answered {}", status.as_u16())));
        }
        serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("authorization_id")?.as_str().map(str::to_owned))
            .filter(|id| !id.is_empty())
            .map(Some)
            .ok_or_else(|| CardError("card network answered without an authorization_id".into()))
    }

    /// Asks for an authorization (the card network counts it).
    pub async fn authorize(&self, scope: &str, key: &str, amount: i64) -> Result<String, CardError> {
        let body = serde_json::json!({"merchant": scope, "idempotency_key": key, "amount": amount}).to_string();
        let req = Request::builder()
            .method(Method::POST)
            .uri(format!("{}/authorizations", self.base))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| CardError(format!("card network request: {e}")))?;
        self.call(req, false)
            .await?
            .ok_or_else(|| CardError("no authorization".into()))
    }

    /// The authorization made for this key, if any (authorizes nothing).
    pub async fn lookup(&self, scope: &str, key: &str) -> Result<Option<String>, CardError> {
        let uri = format!(
            "{}/authorizations?merchant={}&idempotency_key={}",
            self.base,
            percent_encode(scope),
            percent_encode(key)
        );
        let req = Request::builder()
            .method(Method::GET)
            .uri(uri)
            .body(Full::new(Bytes::new()))
            .map_err(|e| CardError(format!("card network request: {e}")))?;
        self.call(req, true).await
    }
}

/// A query component: every byte but RFC 3986's unreserved ones as %XX.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(body: &str) -> Option<u16> {
        parse_payment(body.as_bytes()).err().map(|p| p.status.as_u16())
    }

    #[test]
    fn payments_checked_as_the_contract_says() {
        let p = parse_payment(br#"{"order": "A1", "amount": 3000, "currency": "EUR", "note": 1e1000000}"#).unwrap();
        assert_eq!(
            (p.order.as_str(), p.amount, p.currency.as_deref()),
            ("A1", 3000, Some("EUR"))
        );
        assert!(parse_payment(br#"{"amount": 1, "order": "x"}"#)
            .unwrap()
            .currency
            .is_none());
        assert!(
            parse_payment(format!(r#"{{"order": "{}", "amount": 1000000000000}}"#, "é".repeat(64)).as_bytes()).is_ok()
        );
        for bad in [
            r#"[{"order": "x", "amount": 1}]"#,
            r#""pay me""#,
            "null",
            r#"{"order": "x"}"#,
            r#"{"amount": 5}"#,
            r#"{"order": "x", "amount": 1.5}"#,
            r#"{"order": "x", "amount": 1e20}"#,
            r#"{"order": "x", "amount": "12"}"#,
            r#"{"order": "x", "amount": -5}"#,
            r#"{"order": "x", "amount": 0}"#,
            r#"{"order": "x", "amount": null}"#,
            r#"{"order": "x", "amount": 1000000000001}"#,
            r#"{"order": 17, "amount": 5}"#,
            r#"{"order": "", "amount": 5}"#,
            r#"{"order": "x", "amount": 5, "currency": "eur"}"#,
            r#"{"order": "x", "amount": 5, "currency": null}"#,
        ] {
            assert_eq!(status(bad), Some(422), "{bad}");
        }
        assert_eq!(
            status(&format!(r#"{{"order": "{}", "amount": 5}}"#, "o".repeat(65))),
            Some(422)
        );
    }

    #[test]
    fn query_components_encoded() {
        assert_eq!(percent_encode("merchant 42/é&x=y"), "merchant%2042%2F%C3%A9%26x%3Dy");
        assert_eq!(percent_encode("a-b_c.d~e"), "a-b_c.d~e");
    }
}
