package idempotency;

import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.sql.SQLException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An answer in application/problem+json (RFC 9457): throw it from a scope
 * function, a validator or a handler behind {@link IdempotencyFilter} (or
 * IdempotencyServletFilter), and the filter sends it (after rolling the claim back or recording it failed,
 * retryable).
 */
public class Problem extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int status;
    private final String title;
    private final Map<String, String> headers = new LinkedHashMap<>();

    /** status, title (the kind of problem) and detail (this occurrence). */
    public Problem(int status, String title, String detail) {
        super(detail);
        this.status = status;
        this.title = title;
    }

    /** The same with a header to send along (Retry-After). */
    public Problem header(String name, String value) {
        headers.put(name, value);
        return this;
    }

    public int status() {
        return status;
    }

    public String title() {
        return title;
    }

    public String detail() {
        return getMessage();
    }

    public Map<String, String> headers() {
        return headers;
    }

    /** The document sent. */
    public String json() {
        return "{\"type\":\"about:blank\",\"title\":" + Json.quote(title) + ",\"status\":" + status
            + ",\"detail\":" + Json.quote(getMessage() == null ? "" : getMessage()) + "}";
    }

    /** Sends it and closes the exchange. */
    public void send(HttpExchange ex) throws IOException {
        IdempotencyFilter.send(ex, status, headers, "application/problem+json",
                               json().getBytes(StandardCharsets.UTF_8));
    }

    /**
     * The answer for a database error: the extension's SQLSTATEs with their
     * statuses (IK001 422, a bad key or scope 400, IK002/IK003 409 with
     * Retry-After, IK006 and 25006 503 with Retry-After), another class 22 error 400
     * (jsonb refused the body), anything else 500 with no SQL in the body
     * (logged to stderr).
     */
    public static Problem from(SQLException e) {
        SQLException t = IdempotencyException.translate(e);
        if (t instanceof IdempotencyException.RequestMismatch)
            return new Problem(422, "Idempotency-Key reused with a different request body", serverDetail(t));
        if (t instanceof IdempotencyException.InvalidKey)
            return new Problem(400, "Invalid Idempotency-Key or scope", t.getMessage());
        if (t instanceof IdempotencyException.StaleToken || t instanceof IdempotencyException.NotProcessing)
            return new Problem(409, "This attempt lost its claim on the Idempotency-Key",
                "Another attempt took the key over; retry to get its result.").header("Retry-After", "1");
        if (t instanceof IdempotencyException.RowSecurityOff)
            return new Problem(503, "Idempotency keys unavailable", "Retry later.").header("Retry-After", "1");
        if (t instanceof IdempotencyException.ReadOnly)
            return new Problem(503, "Database is read-only", "Retry later.").header("Retry-After", "1");
        if (t.getSQLState() != null && t.getSQLState().startsWith("22"))
            return new Problem(400, "Invalid request", "PostgreSQL did not accept the body.");
        System.err.println("idempotency: " + t.getSQLState() + ": " + t.getMessage());
        return new Problem(500, "Internal error", "The request was not processed.");
    }

    private static String serverDetail(SQLException e) {
        Throwable cause = e.getCause();
        if (cause instanceof org.postgresql.util.PSQLException p && p.getServerErrorMessage() != null
                && p.getServerErrorMessage().getDetail() != null)
            return p.getServerErrorMessage().getDetail();
        return e.getMessage();
    }
}
