package idempotency;

import com.sun.net.httpserver.HttpExchange;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Wrapper;

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
    private volatile boolean settled;
    /** The transaction as the handler sees it: refused once settled. */
    private Connection handed;

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
     * connection back to the pool, so this throws IllegalStateException then,
     * and the connection it gave before, its statements and result sets
     * throw SQLException (55000) at any use but close(), which does nothing.
     * None of them unwraps to the driver's own object (SQLException 0A000):
     * that would outlive the claim unguarded.
     */
    public synchronized Connection transaction() throws SQLException {
        checkOpen();
        if (handed == null)
            handed = guard(Connection.class, ownTransaction());
        return handed;
    }

    /** IllegalStateException once the handler has returned. */
    private void checkOpen() {
        if (settled)
            throw new IllegalStateException("the claim of " + key + " was settled: its handler has returned");
    }

    /**
     * The filter's: the handler has returned.  From now on the handler's
     * transaction() and what it gave are refused, and tx no longer changes.
     */
    synchronized void settle() {
        settled = true;
    }

    /** The filter's own use of the transaction, after the handler. */
    synchronized Connection ownTransaction() throws SQLException {
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
     * target as the handler sees it (a java.sql interface): once the claim is
     * settled, close() does nothing, isClosed() is true and any other call
     * throws SQLException, so a connection kept past the handler can never
     * reach the pool's connection (maybe another request's transaction);
     * the statements and result sets it makes are guarded the same way.
     */
    private <T> T guard(Class<T> type, T target) {
        return type.cast(Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type},
                                                (proxy, m, args) -> call(proxy, target, m, args)));
    }

    private Object call(Object proxy, Object target, Method m, Object[] args) throws Throwable {
        if (m.getDeclaringClass() == Object.class) {
            return switch (m.getName()) {
                case "equals" -> args[0] == proxy; // a proxy equals itself only
                case "hashCode" -> System.identityHashCode(proxy);
                default -> "guarded " + target;
            };
        }
        if (m.getDeclaringClass() == Wrapper.class) {
            // unwrap would hand out the pool's connection (or statement)
            // itself, beyond the guard: only to what the proxy is already
            Class<?> iface = (Class<?>) args[0];
            if (m.getName().equals("isWrapperFor"))
                return iface.isInstance(proxy);
            if (iface.isInstance(proxy))
                return proxy;
            throw new SQLException("the claim's " + target.getClass().getSimpleName() + " is guarded: unwrap to "
                                   + iface.getName() + " would let it outlive the claim", "0A000");
        }
        if (settled) {
            switch (m.getName()) {
                case "close":
                    return null;
                case "isClosed":
                    return true;
                default:
                    throw new SQLException("the claim of " + key + " was settled: its handler has returned and its "
                                           + "connection is the pool's", "55000");
            }
        }
        Object r;
        try {
            r = m.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
        Class<?> t = m.getReturnType();
        if (r != null && t.isInterface() && t.getPackageName().equals("java.sql") && t.isInstance(r))
            return guardAny(t, r);
        return r;
    }

    @SuppressWarnings("unchecked")
    private <T> Object guardAny(Class<T> type, Object target) {
        return guard(type, (T) target);
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
