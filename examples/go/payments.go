package main

// The payments handler behind the library's middleware, and the card network client.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	idempotency "github.com/idempotency/idempotency/clients/go"
	"github.com/idempotency/idempotency/clients/go/ginidem"
)

// Payment is a valid request body.
type Payment struct {
	Order    string
	Amount   int64 // minor units
	Currency *string
}

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// parsePayment checks a (well-formed JSON) body: a problem, or the payment.
func parsePayment(body []byte) (*Payment, *idempotency.Problem) {
	bad := func(detail string) (*Payment, *idempotency.Problem) {
		return nil, &idempotency.Problem{Status: 422, Title: "Invalid payment", Detail: detail}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return bad("The body must be a JSON object.")
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return bad("The body must be a JSON object.")
	}
	p := &Payment{}
	order, ok := obj["order"].(string)
	if !ok || len([]rune(order)) < 1 || len([]rune(order)) > 64 {
		return bad(`"order" must be a string of 1 to 64 characters.`)
	}
	p.Order = order
	num, ok := obj["amount"].(json.Number)
	amount, err := num.Int64()
	if !ok || err != nil || amount < 1 || amount > 1_000_000_000_000 {
		return bad(`"amount" must be an integer from 1 to 1000000000000 (minor units).`)
	}
	p.Amount = amount
	if v, present := obj["currency"]; present {
		cur, ok := v.(string)
		if !ok || !currencyRE.MatchString(cur) {
			return bad(`"currency", when given, must be three capital letters.`)
		}
		p.Currency = &cur
	}
	return p, nil
}

func validatePayment(body []byte) *idempotency.Problem {
	_, p := parsePayment(body)
	return p
}

// insertPaymentSQL inserts the payment and builds the response in SQL.
const insertPaymentSQL = `
WITH p AS (INSERT INTO payments (scope, order_id, amount, currency, authorization_id)
           VALUES ($1, $2, $3, $4, $5) RETURNING *)
SELECT jsonb_strip_nulls(jsonb_build_object('payment_id', id, 'order', order_id, 'amount', amount,
                         'currency', currency, 'authorization_id', authorization_id))::text
FROM p`

// PaymentsHandler serves POST /payments (and ?mode=card).
type PaymentsHandler struct {
	Card *CardNetwork
}

func (h *PaymentsHandler) Pay(c *gin.Context) {
	claim := ginidem.Claimed(c)
	payment, _ := parsePayment(claim.Body()) // validated by the middleware already
	var authorization *string
	if claim.Committed() {
		id, err := h.authorize(claim, payment)
		if err != nil {
			var netErr *CardNetworkError
			if errors.As(err, &netErr) {
				log.Printf("%v", err)
				ginidem.WriteProblem(c, &idempotency.Problem{Status: 502, Title: "Card network unavailable",
					Detail: "Retry with the same Idempotency-Key.", RetryAfter: 1})
			} else {
				ginidem.WriteError(c, err)
			}
			return
		}
		authorization = &id
	}
	tx, err := claim.Tx()
	if err != nil {
		ginidem.WriteError(c, err)
		return
	}
	var response string
	err = tx.QueryRowContext(c.Request.Context(), insertPaymentSQL, claim.Scope(),
		payment.Order, payment.Amount, payment.Currency, authorization).Scan(&response)
	if err != nil {
		ginidem.WriteError(c, err)
		return
	}
	claim.Respond(http.StatusCreated, []byte(response))
}

// authorize gets the card authorized once per key, across attempts.
// Recovery points: "authorizing" before the card call (a later attempt that
// finds it asks the card network whether the call went through) and
// "authorized:<id>" after it (a later attempt uses the id, calls nothing).
func (h *PaymentsHandler) authorize(claim *idempotency.Claimed, p *Payment) (string, error) {
	scope, key := claim.Scope(), claim.Key()
	point := claim.RecoveryPoint()
	if strings.HasPrefix(point, "authorized:") {
		return strings.TrimPrefix(point, "authorized:"), nil
	}
	id := ""
	if point == "authorizing" {
		found, err := h.Card.Lookup(scope, key)
		if err != nil {
			return "", err
		}
		id = found
	}
	if id == "" {
		// also a fence: IK002 here if another attempt took the key over
		if err := claim.Checkpoint("authorizing"); err != nil {
			return "", err
		}
		var err error
		if id, err = h.Card.Authorize(scope, key, p.Amount); err != nil {
			return "", err
		}
	}
	return id, claim.Checkpoint("authorized:" + id)
}

// CardNetwork is the client of the (fake) card network.
type CardNetwork struct {
	URL    string
	Client *http.Client
}

type CardNetworkError struct{ msg string }

func (e *CardNetworkError) Error() string { return e.msg }

func NewCardNetwork(base string) *CardNetwork {
	return &CardNetwork{URL: strings.TrimRight(base, "/"), Client: &http.Client{Timeout: 60 * time.Second}}
}

func (n *CardNetwork) call(req *http.Request, notFoundOK bool) (string, error) {
	resp, err := n.Client.Do(req)
	if err != nil {
		return "", &CardNetworkError{fmt.Sprintf("card network unreachable: %v", err)}
	}
	defer resp.Body.Close()
	if notFoundOK && resp.StatusCode == http.StatusNotFound {
		return "", nil
	}
	if resp.StatusCode/100 != 2 {
		return "", &CardNetworkError{fmt.Sprintf("card network answered %d", resp.StatusCode)}
	}
	var answer struct {
		AuthorizationID string `json:"authorization_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.AuthorizationID == "" {
		return "", &CardNetworkError{"card network answered without an authorization_id"}
	}
	return answer.AuthorizationID, nil
}

// Authorize asks for an authorization (the card network counts it).
func (n *CardNetwork) Authorize(scope, key string, amount int64) (string, error) {
	body, _ := json.Marshal(map[string]any{"merchant": scope, "idempotency_key": key, "amount": amount})
	req, err := http.NewRequest("POST", n.URL+"/authorizations", bytes.NewReader(body))
	if err != nil {
		return "", &CardNetworkError{err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	return n.call(req, false)
}

// Lookup returns the authorization made for this key, or "" (authorizes nothing).
func (n *CardNetwork) Lookup(scope, key string) (string, error) {
	q := url.Values{"merchant": {scope}, "idempotency_key": {key}}
	req, err := http.NewRequest("GET", n.URL+"/authorizations?"+q.Encode(), nil)
	if err != nil {
		return "", &CardNetworkError{err.Error()}
	}
	return n.call(req, true)
}
