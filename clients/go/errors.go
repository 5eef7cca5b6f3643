package idempotency

import (
	"errors"
	"fmt"

	"github.com/lib/pq"
)

// The extension's errors by SQLSTATE (docs/reference.md, "Errors"), for
// errors.Is.  A key function's database error is an *Error that matches one
// of these (or none: another database error), and unwraps to lib/pq's
// *pq.Error.
var (
	// IK001: the key was used before with a different request.  HTTP 422.
	ErrRequestMismatch = errors.New("idempotency: key reused with a different request (IK001)")
	// IK002: stale fencing token; another attempt claimed the key since.  HTTP 409.
	ErrStaleToken = errors.New("idempotency: stale fencing token (IK002)")
	// IK003: the key is not processing (completed or failed already).  HTTP 409.
	ErrNotProcessing = errors.New("idempotency: key not processing (IK003)")
	// IK004: no such key in this scope.  HTTP 404.
	ErrKeyNotFound = errors.New("idempotency: no such key (IK004)")
	// IK005: a NULL token outside the transaction that claimed the key (a bug).  HTTP 500.
	ErrTokenRequired = errors.New("idempotency: fencing token required (IK005)")
	// IK006: row level security recorded but off.  HTTP 503.
	ErrRowSecurityOff = errors.New("idempotency: row level security is off (IK006)")
	// 22004 / 22023: a NULL, empty, over-long or control-character key or
	// scope, or an argument out of range.  HTTP 400.
	ErrInvalidKey = errors.New("idempotency: invalid key, scope or argument (22004/22023)")
	// Another data exception (class 22): PostgreSQL refused the request as
	// jsonb (a \u0000 in a string, a number beyond numeric).  HTTP 400.
	ErrInvalidRequest = errors.New("idempotency: request refused as jsonb (class 22)")
	// 25006: a read-only transaction or a hot standby.  HTTP 503.
	ErrReadOnly = errors.New("idempotency: database is read-only (25006)")
)

// ErrSettled: a Claimed used after its handler returned (kept, or handed to
// a goroutine of its own): the middleware has completed or failed the key
// and ended its transaction, so Claimed.Tx and Claimed.Checkpoint refuse.
// Not a database error; a bug of the handler.  HTTP 500.
var ErrSettled = errors.New("idempotency: the claim was settled: its handler has returned")

// Error is a database error of a key function: its SQLSTATE, what it means
// here (Kind, one of the Err* variables, nil for other errors) and the
// driver's error.
type Error struct {
	Kind error
	PQ   *pq.Error
}

// Code is the SQLSTATE.
func (e *Error) Code() string { return string(e.PQ.Code) }

func (e *Error) Error() string {
	s := fmt.Sprintf("%s (%s)", e.PQ.Message, e.PQ.Code)
	if e.PQ.Detail != "" {
		s += ": " + e.PQ.Detail
	}
	return s
}

// Is matches the Err* variable of the SQLSTATE.
func (e *Error) Is(target error) bool { return e.Kind != nil && target == e.Kind }

// Unwrap gives the driver's *pq.Error.
func (e *Error) Unwrap() error { return e.PQ }

// kindOf is what a SQLSTATE means here (nil: not the extension's).
func kindOf(code string) error {
	switch code {
	case "IK001":
		return ErrRequestMismatch
	case "IK002":
		return ErrStaleToken
	case "IK003":
		return ErrNotProcessing
	case "IK004":
		return ErrKeyNotFound
	case "IK005":
		return ErrTokenRequired
	case "IK006":
		return ErrRowSecurityOff
	case "22004", "22023":
		return ErrInvalidKey
	case "25006":
		return ErrReadOnly
	}
	if len(code) == 5 && code[:2] == "22" {
		return ErrInvalidRequest
	}
	return nil
}

// wrap turns a driver error into an *Error (other errors unchanged).
func wrap(err error) error {
	var pqErr *pq.Error
	if err == nil || !errors.As(err, &pqErr) {
		return err
	}
	return &Error{Kind: kindOf(string(pqErr.Code)), PQ: pqErr}
}

// SQLState is the SQLSTATE of err ("" when the database gave none).
func SQLState(err error) string {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return string(pqErr.Code)
	}
	return ""
}

// HTTPStatus is the status err answers (docs/reference.md's table; 500 for
// anything that is not the extension's).
func HTTPStatus(err error) int {
	switch kindOf(SQLState(err)) {
	case ErrRequestMismatch:
		return 422
	case ErrStaleToken, ErrNotProcessing:
		return 409
	case ErrKeyNotFound:
		return 404
	case ErrInvalidKey, ErrInvalidRequest:
		return 400
	case ErrRowSecurityOff, ErrReadOnly:
		return 503
	}
	return 500
}
