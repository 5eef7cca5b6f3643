package idempotency;

import java.sql.SQLException;

/**
 * An error of the idempotency extension, by SQLSTATE, with the HTTP status
 * the README's error table gives it.  Subclasses of SQLException, so code
 * that catches SQLException keeps working; the cause is the driver's
 * exception (message, detail naming the key).
 */
public class IdempotencyException extends SQLException {
    private final int httpStatus;

    IdempotencyException(SQLException cause, int httpStatus) {
        super(cause.getMessage(), cause.getSQLState(), cause.getErrorCode(), cause);
        this.httpStatus = httpStatus;
    }

    /** The HTTP status this error answers (IETF Idempotency-Key draft). */
    public int httpStatus() {
        return httpStatus;
    }

    /** IK001: the key was used with a different request.  HTTP 422. */
    public static final class RequestMismatch extends IdempotencyException {
        RequestMismatch(SQLException e) { super(e, 422); }
    }

    /** IK002: stale fencing token, the key was claimed again since.  HTTP 409. */
    public static final class StaleToken extends IdempotencyException {
        StaleToken(SQLException e) { super(e, 409); }
    }

    /** IK003: the key is not processing (completed or failed already).  HTTP 409. */
    public static final class NotProcessing extends IdempotencyException {
        NotProcessing(SQLException e) { super(e, 409); }
    }

    /** IK004: no such key in this scope.  HTTP 404. */
    public static final class KeyNotFound extends IdempotencyException {
        KeyNotFound(SQLException e) { super(e, 404); }
    }

    /** IK005: NULL token outside the claiming transaction (a bug).  HTTP 500. */
    public static final class TokenRequired extends IdempotencyException {
        TokenRequired(SQLException e) { super(e, 500); }
    }

    /** 22004 / 22023: NULL, empty, over-long or control characters in key or scope.  HTTP 400. */
    public static final class InvalidKey extends IdempotencyException {
        InvalidKey(SQLException e) { super(e, 400); }
    }

    /** IK006: row level security recorded but off.  HTTP 503. */
    public static final class RowSecurityOff extends IdempotencyException {
        RowSecurityOff(SQLException e) { super(e, 503); }
    }

    /** 25006: read-only transaction or hot standby.  HTTP 503. */
    public static final class ReadOnly extends IdempotencyException {
        ReadOnly(SQLException e) { super(e, 503); }
    }

    /** The exception for e's SQLSTATE, or e itself when it is not the extension's. */
    public static SQLException translate(SQLException e) {
        if (e instanceof IdempotencyException || e.getSQLState() == null)
            return e;
        return switch (e.getSQLState()) {
            case "IK001" -> new RequestMismatch(e);
            case "IK002" -> new StaleToken(e);
            case "IK003" -> new NotProcessing(e);
            case "IK004" -> new KeyNotFound(e);
            case "IK005" -> new TokenRequired(e);
            case "IK006" -> new RowSecurityOff(e);
            case "22004", "22023" -> new InvalidKey(e);
            case "25006" -> new ReadOnly(e);
            default -> e;
        };
    }
}
