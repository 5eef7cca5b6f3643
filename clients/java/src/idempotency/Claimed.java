package idempotency;

import com.sun.net.httpserver.HttpExchange;
import java.sql.Connection;
import java.sql.SQLException;

/**
 * The claim behind a request that {@link IdempotencyFilter} let through to
 * its handler: {@code Claimed.of(exchange)} (behind IdempotencyServletFilter:
 * {@code IdempotencyServletFilter.claimOf(request)}, the request attribute
 * {@link #ATTRIBUTE}).  The handler does its work in
 * {@link #transaction()} and ends with {@link #respond}; the filter then
 * completes the key in that transaction, commits and sends the stored text.
 * A handler that throws {@link Problem} (or answers by itself) has failed:
 * the filter rolls the transaction back (the key is free again) or, for a
 * committed claim, records it failed and retryable.
 */
public final class Claimed {
    /** The servlet request attribute holding the claim (IdempotencyServletFilter). */
    public static final String ATTRIBUTE = "idempotency.claimed";

    private final String key;
    private final String scope;
    private final String body;
    private final Idempotency.Claim claim;
    private final boolean committed;
    private final ConnectionSource connections;
    private final Heartbeats.Handle heartbeat;
    Connection tx;
    Integer status;
    String response;
    /** Set by the filter once the handler has returned: the claim's transaction is the filter's. */
    volatile boolean settled;

    Claimed(String key, String scope, String body, Idempotency.Claim claim, boolean committed,
            ConnectionSource connections, Connection tx, Heartbeats.Handle heartbeat) {
        this.key = key;
        this.scope = scope;
        this.body = body;
        this.claim = claim;
        this.committed = committed;
        this.connections = connections;
        this.tx = tx;
        this.heartbeat = heartbeat;
    }

    /**
     * The request's claim, only while its handler runs (from any thread;
     * given a wrapper of the exchange, from the handler's own thread);
     * IllegalStateException when the filter is not in front of the handler
     * or the handler has returned.  (Kept by the filter, not as an exchange
     * attribute: the JDK's HttpServer shares those among all the requests
     * of a context.)
     */
    public static Claimed of(HttpExchange ex) {
        Claimed c = IdempotencyFilter.claimOf(ex);
        if (c != null)
            return c;
        throw new IllegalStateException("no IdempotencyFilter in front of this handler");
    }

    public String key() {
        return key;
    }

    public String scope() {
        return scope;
    }

    /** The request body (JSON, already checked). */
    public String body() {
        return body;
    }

    /** NEW or RECLAIMED. */
    public Idempotency.Outcome outcome() {
        return claim.outcome();
    }

    public long token() {
        return claim.token();
    }

    /** Claimed committed, with a lease (work outside the database). */
    public boolean isCommitted() {
        return committed;
    }

    /** What an earlier attempt recorded with {@link #checkpoint} (RECLAIMED), or null. */
    public String recoveryPoint() {
        return claim.recoveryPoint();
    }

    /** True once a heartbeat found the committed claim taken over: stop, the other attempt answers. */
    public boolean isLost() {
        return heartbeat != null && heartbeat.lost();
    }

    /**
     * The transaction the key is completed in: the claim's own (default
     * mode), or for a committed claim one begun at the first call (the key is
     * then completed with its token, fenced).  Do not commit it, nor use it
     * once the handler has returned: the filter ends it and gives the
     * connection back (IllegalStateException then).
     */
    public Connection transaction() throws SQLException {
        checkOpen();
        return ownTransaction();
    }

    /** IllegalStateException once the handler has returned. */
    private void checkOpen() {
        if (settled)
            throw new IllegalStateException("the claim of " + key + " was settled: its handler has returned");
    }

    /** The filter's own use of the transaction, after the handler. */
    Connection ownTransaction() throws SQLException {
        if (tx == null) {
            Connection c = connections.borrow();
            try {
                c.setAutoCommit(false);
            } catch (SQLException e) {
                connections.release(c);
                throw e;
            }
            tx = c;
        }
        return tx;
    }

    /**
     * Records a recovery point (idem_checkpoint, fenced by the token: IK002
     * when another attempt took the key over).  For a committed claim it is
     * committed at once, on a connection of its own.  IllegalStateException
     * once the handler has returned.
     */
    public void checkpoint(String point) throws SQLException {
        checkOpen();
        if (!committed) {
            Idempotency.checkpoint(transaction(), key, point, scope, claim.token());
            return;
        }
        Connection c = connections.borrow();
        try {
            Idempotency.checkpoint(c, key, point, scope, claim.token());
        } finally {
            connections.release(c);
        }
    }

    /**
     * The answer to record and send: status and a JSON document.  The filter
     * sends PostgreSQL's jsonb text of it, the bytes every replay gets.
     * IllegalStateException once the handler has returned.
     */
    public void respond(int status, String json) {
        checkOpen();
        this.status = status;
        this.response = json;
    }
}
