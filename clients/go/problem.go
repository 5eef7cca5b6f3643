package idempotency

import (
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"strconv"
)

// Problem is an application/problem+json answer (RFC 9457):
// {"type": "about:blank", "title", "status", "detail"}.
type Problem struct {
	Status int
	Title  string
	Detail string
	// RetryAfter, when above 0, is sent as the Retry-After header (seconds).
	RetryAfter int
}

func (p *Problem) Error() string { return strconv.Itoa(p.Status) + " " + p.Title + ": " + p.Detail }

// Body is the JSON document.
func (p *Problem) Body() []byte {
	b, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{"about:blank", p.Title, p.Status, p.Detail})
	return b
}

// Write sends the problem.
func (p *Problem) Write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(p.Body())
}

func internalError() *Problem {
	return &Problem{Status: 500, Title: "Internal error", Detail: "The request was not processed."}
}

// ProblemFor is what an error of the key functions answers (the IETF
// draft's statuses).  Errors that are not the client's business (a lost
// connection, a missing grant) are logged and answered 500 without details:
// no SQL, no stack trace.  A *Problem is answered as it is.
func ProblemFor(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	var e *Error
	errors.As(err, &e)
	switch {
	case errors.Is(err, ErrRequestMismatch):
		detail := e.PQ.Detail
		if detail == "" {
			detail = e.PQ.Message
		}
		return &Problem{Status: 422, Title: "Idempotency-Key reused with a different request body", Detail: detail}
	case errors.Is(err, ErrInvalidKey):
		return &Problem{Status: 400, Title: "Invalid Idempotency-Key or scope", Detail: e.PQ.Message}
	case errors.Is(err, ErrInvalidRequest):
		return &Problem{Status: 400, Title: "Invalid request", Detail: "PostgreSQL did not accept the body."}
	case errors.Is(err, ErrStaleToken), errors.Is(err, ErrNotProcessing):
		return &Problem{Status: 409, Title: "This attempt lost its claim on the Idempotency-Key",
			Detail: "Another attempt took the key over; retry to get its result.", RetryAfter: 1}
	case errors.Is(err, ErrReadOnly):
		return &Problem{Status: 503, Title: "Database is read-only", Detail: "Retry later.", RetryAfter: 1}
	case errors.Is(err, ErrRowSecurityOff):
		log.Printf("idempotency: %v", err)
		return &Problem{Status: 503, Title: "Service unavailable", Detail: "Retry later.", RetryAfter: 1}
	}
	log.Printf("idempotency: request failed: %v", err)
	return internalError()
}

// WriteError sends ProblemFor(err).
func WriteError(w http.ResponseWriter, err error) { ProblemFor(err).Write(w) }
