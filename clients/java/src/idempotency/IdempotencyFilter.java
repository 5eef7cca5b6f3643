package idempotency;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpExchange;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Objects;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.regex.Pattern;

/**
 * The HTTP contract of the project's example services (examples/README.md)
 * as a filter for the JDK's {@code com.sun.net.httpserver}:
 * {@code server.createContext("/payments", handler).getFilters().add(filter)}.
 *
 * <p>Per POST (PUT, PATCH) request, before anything is claimed: no
 * Idempotency-Key 400, not application/json 415, a body over
 * {@link #maxBody} 413, not JSON 400, then whatever {@link #validate} and
 * the scope function throw.  Then idem_claim(key, body, scope): NEW and
 * RECLAIMED run the handler ({@link Claimed}); REPLAY sends the stored status
 * and body with {@code Idempotent-Replayed: true}; IN_PROGRESS and STALE 409
 * with Retry-After; database errors as {@link Problem#from}.
 */
public final class IdempotencyFilter extends Filter {
    /** An exchange attribute an authentication filter in front may set: the caller's scope (a String). */
    public static final String SCOPE_ATTRIBUTE = "idempotency.scope";

    private static final Pattern JSON_TYPE = Pattern.compile("(?i)^application/json\\s*(;.*)?$");

    /** Checks a request (body: JSON already) before the claim; throws {@link Problem} to refuse it. */
    @FunctionalInterface
    public interface Validator {
        void validate(HttpExchange ex, String body);
    }

    private final ConnectionSource connections;
    private Heartbeats heartbeats;
    private ConnectionSource heartbeatConnections;
    private Duration lease = Duration.ofSeconds(30);
    private Duration heartbeatEvery;
    private boolean waitForDuplicates = true;
    private Duration awaitResult = Duration.ZERO;
    private int maxBody = 64 * 1024;
    private Set<String> methods = Set.of("POST", "PUT", "PATCH");
    private Function<HttpExchange, String> scope = IdempotencyFilter::authenticatedScope;
    private Validator validator = (ex, body) -> { };
    private Predicate<HttpExchange> committedWhen = ex -> false;
    private Consumer<Event> hook = e -> { };

    /** A filter claiming keys on connections from connections (the requests' pool). */
    public IdempotencyFilter(ConnectionSource connections) {
        this.connections = Objects.requireNonNull(connections);
    }

    /** The default scope: {@link #SCOPE_ATTRIBUTE}, else the exchange's principal, else "". */
    private static String authenticatedScope(HttpExchange ex) {
        if (ex.getAttribute(SCOPE_ATTRIBUTE) instanceof String s)
            return s;
        return ex.getPrincipal() == null ? "" : ex.getPrincipal().getUsername();
    }

    /**
     * The scope (tenant, merchant) of a request's keys, from the
     * authenticated caller; throw {@link Problem} to refuse the request.
     */
    public IdempotencyFilter scopeWith(Function<HttpExchange, String> f) {
        this.scope = Objects.requireNonNull(f);
        return this;
    }

    /**
     * The scope from a request header ("" when absent): only where the
     * header is trusted (a gateway sets it), since a caller who picks it can
     * probe another tenant's keys.
     */
    public IdempotencyFilter scopeFromHeader(String name) {
        return scopeWith(ex -> {
            String v = ex.getRequestHeaders().getFirst(name);
            return v == null ? "" : v;
        });
    }

    /** Checks the body before the claim (your 422s): a refused request never leaves a key behind. */
    public IdempotencyFilter validate(Validator v) {
        this.validator = Objects.requireNonNull(v);
        return this;
    }

    /** Which requests claim committed, with a lease and heartbeats (work outside the database). */
    public IdempotencyFilter committedWhen(Predicate<HttpExchange> p) {
        this.committedWhen = Objects.requireNonNull(p);
        return this;
    }

    /** A committed claim's lease (30 s). */
    public IdempotencyFilter lease(Duration d) {
        this.lease = d;
        return this;
    }

    /** The heartbeats' period (lease / 3). */
    public IdempotencyFilter heartbeatEvery(Duration d) {
        this.heartbeatEvery = d;
        return this;
    }

    /**
     * The heartbeats' own connections (default: the requests'): give it one
     * or two, or with the request pool busy the leases lapse and another
     * instance takes the keys over.
     */
    public IdempotencyFilter heartbeatConnections(ConnectionSource c) {
        this.heartbeatConnections = c;
        return this;
    }

    /** Whether a duplicate of a request still in its transaction waits for it, then replays (true). */
    public IdempotencyFilter waitForDuplicates(boolean wait) {
        this.waitForDuplicates = wait;
        return this;
    }

    /**
     * How long a retry of a committed claim in flight waits for its result
     * (idem_claim's await_result, no lock held) before answering 409 (0: the
     * idempotency.await_result setting).
     */
    public IdempotencyFilter awaitResult(Duration d) {
        this.awaitResult = d;
        return this;
    }

    /** The largest body accepted (64 KiB); larger: 413. */
    public IdempotencyFilter maxBody(int bytes) {
        this.maxBody = bytes;
        return this;
    }

    /** The methods that need a key (POST, PUT, PATCH); others pass through untouched. */
    public IdempotencyFilter methods(String... names) {
        this.methods = Set.of(names);
        return this;
    }

    /**
     * A callback per request with its outcome and timings (metrics,
     * tracing), called once the answer is ready, just before it is sent.
     */
    public IdempotencyFilter onOutcome(Consumer<Event> f) {
        this.hook = Objects.requireNonNull(f);
        return this;
    }

    @Override
    public String description() {
        return "Idempotency-Key on the idempotency extension";
    }

    /** Stops the heartbeat timer. */
    public synchronized void close() {
        if (heartbeats != null)
            heartbeats.close();
    }

    private synchronized Heartbeats heartbeats() {
        if (heartbeats == null) {
            Duration every = heartbeatEvery != null ? heartbeatEvery : lease.dividedBy(3);
            heartbeats = new Heartbeats(heartbeatConnections != null ? heartbeatConnections : connections,
                                        lease, every);
        }
        return heartbeats;
    }

    // ---- per request ---------------------------------------------------------

    private final class Request {
        final long start = System.nanoTime();
        String key = "";
        String scope = "";
        boolean committed;
        long claimNanos;

        void report(Event.Observed outcome, int status, String sqlstate) {
            try {
                hook.accept(new Event(outcome, status, Duration.ofNanos(System.nanoTime() - start),
                                      Duration.ofNanos(claimNanos), key, scope, committed, sqlstate));
            } catch (RuntimeException e) {
                System.err.println("idempotency: the outcome hook threw: " + e);
            }
        }
    }

    @Override
    public void doFilter(HttpExchange ex, Chain chain) throws IOException {
        if (!methods.contains(ex.getRequestMethod())) {
            chain.doFilter(ex);
            return;
        }
        Request r = new Request();
        String body;
        try {
            body = admit(ex, r);
        } catch (Problem p) {
            r.report(Event.Observed.REJECTED, p.status(), null);
            p.send(ex);
            return;
        } catch (RuntimeException e) {
            e.printStackTrace();
            Problem p = new Problem(500, "Internal error", "The request was not processed.");
            r.report(Event.Observed.ERROR, p.status(), null);
            p.send(ex);
            return;
        }
        claimAndRun(ex, chain, r, body);
    }

    /** Everything checked before a claim; returns the body. */
    private String admit(HttpExchange ex, Request r) throws IOException {
        String key = ex.getRequestHeaders().getFirst("Idempotency-Key");
        if (key == null || key.isEmpty())
            throw new Problem(400, "Idempotency-Key header missing",
                              ex.getRequestMethod() + " needs an Idempotency-Key header.");
        r.key = key;
        String type = ex.getRequestHeaders().getFirst("Content-Type");
        if (type == null || !JSON_TYPE.matcher(type).matches())
            throw new Problem(415, "Unsupported Content-Type", "Send the request as application/json.");
        byte[] raw;
        try (InputStream in = ex.getRequestBody()) {
            raw = in.readNBytes(maxBody + 1);
        }
        if (raw.length > maxBody)
            throw new Problem(413, "Body too large", "At most " + maxBody + " bytes.");
        String body = new String(raw, StandardCharsets.UTF_8);
        try {
            Json.parse(body);
        } catch (Json.SyntaxError e) {
            throw new Problem(400, "Malformed JSON", "The body is not valid JSON.");
        }
        validator.validate(ex, body);
        String s = scope.apply(ex);
        r.scope = s == null ? "" : s;
        r.committed = committedWhen.test(ex);
        ex.setStreams(new ByteArrayInputStream(raw), null);
        return body;
    }

    private static Event.Observed observedFor(SQLException e) {
        return e instanceof IdempotencyException.RequestMismatch ? Event.Observed.MISMATCH : Event.Observed.ERROR;
    }

    private void claimAndRun(HttpExchange ex, Chain chain, Request r, String body) throws IOException {
        Idempotency.Claim claim;
        Connection c;
        try {
            c = connections.borrow();
        } catch (SQLException e) {
            sendError(ex, r, e);
            return;
        }
        long t0 = System.nanoTime();
        try {
            if (!r.committed)
                c.setAutoCommit(false);
            claim = Idempotency.claim(c, r.key, body, r.scope, lease, waitForDuplicates,
                                      r.committed ? awaitResult : Duration.ZERO);
            r.claimNanos = System.nanoTime() - t0;
            if (!claim.mine() && !r.committed)
                c.commit();
        } catch (SQLException e) {
            r.claimNanos = System.nanoTime() - t0;
            endTransaction(c);
            sendError(ex, r, e);
            return;
        }
        if (!claim.mine()) {
            endTransaction(c);
            answerExisting(ex, r, claim);
            return;
        }
        Heartbeats.Handle beat = null;
        if (r.committed) {
            connections.release(c);
            c = null;
            beat = heartbeats().hold(r.key, r.scope, claim.token());
        }
        Claimed claimed = new Claimed(r.key, r.scope, body, claim, r.committed, connections, c, beat);
        Event.Observed ran = claim.outcome() == Idempotency.Outcome.RECLAIMED
            ? Event.Observed.RECLAIMED : Event.Observed.NEW;
        ex.setAttribute(Claimed.ATTRIBUTE, claimed);
        Problem failure = null;
        boolean clientGone = false;
        try {
            chain.doFilter(ex);
        } catch (Problem p) {
            failure = p;
        } catch (IOException e) {
            clientGone = true;
        } catch (RuntimeException e) {
            e.printStackTrace();
            failure = new Problem(500, "Internal error", "The request was not processed.");
            ran = Event.Observed.ERROR;
        } finally {
            if (beat != null)
                beat.stop();
        }
        boolean handlerAnswered = ex.getResponseCode() != -1;
        if (failure == null && !clientGone && !handlerAnswered && claimed.response != null) {
            String text;
            try {
                text = Idempotency.completeReturningText(claimed.transaction(), r.key, claimed.status,
                                                         claimed.response, r.scope,
                                                         r.committed ? claim.token() : null);
                claimed.tx.commit();
            } catch (SQLException e) {
                if (claimed.tx != null)
                    endTransaction(claimed.tx);
                if (r.committed)
                    failRetryable(r, claim.token());
                sendError(ex, r, e);
                return;
            }
            endTransaction(claimed.tx);
            r.report(ran, claimed.status, null);
            sendStored(ex, claimed.status, text, false);
            return;
        }
        // the handler failed (or answered by itself): nothing is recorded
        if (claimed.tx != null)
            endTransaction(claimed.tx);
        if (r.committed)
            failRetryable(r, claim.token());
        if (handlerAnswered || clientGone) {
            r.report(ran, handlerAnswered ? ex.getResponseCode() : 499, null);
            ex.close();
            return;
        }
        if (failure == null) {
            System.err.println("idempotency: the handler recorded no answer (Claimed.respond)");
            failure = new Problem(500, "Internal error", "The request was not processed.");
            ran = Event.Observed.ERROR;
        }
        r.report(ran, failure.status(), null);
        failure.send(ex);
    }

    private void failRetryable(Request r, long token) {
        try {
            Connection c = connections.borrow();
            try {
                Idempotency.fail(c, r.key, r.scope, token, null, null, true);
            } finally {
                connections.release(c);
            }
        } catch (SQLException e) {
            // taken over meanwhile (the other attempt answers), or the
            // database is away: the lease runs out and a retry takes it over
        }
    }

    private void endTransaction(Connection c) {
        try {
            if (!c.getAutoCommit()) {
                c.rollback(); // nothing left after a commit
                c.setAutoCommit(true);
            }
        } catch (SQLException e) {
            try { c.close(); } catch (SQLException ignored) { /* broken */ }
        }
        connections.release(c);
    }

    private void sendError(HttpExchange ex, Request r, SQLException e) throws IOException {
        Problem p = Problem.from(e);
        SQLException t = IdempotencyException.translate(e);
        r.report(observedFor(t), p.status(), t.getSQLState());
        p.send(ex);
    }

    private void answerExisting(HttpExchange ex, Request r, Idempotency.Claim claim) throws IOException {
        if (claim.outcome() == Idempotency.Outcome.REPLAY) {
            r.report(Event.Observed.REPLAY, claim.responseCode(), null);
            sendStored(ex, claim.responseCode(), claim.response(), true);
            return;
        }
        Duration d = claim.retryAfter();
        long after = d == null ? 1 : Math.max(1, d.toSeconds() + (d.toMillisPart() > 0 ? 1 : 0));
        Problem p = new Problem(409, "A request with this Idempotency-Key is being processed",
            claim.outcome() == Idempotency.Outcome.STALE
                ? "An earlier attempt stopped midway; an operator must settle it."
                : "Retry after the time in Retry-After.").header("Retry-After", Long.toString(after));
        r.report(Event.Observed.IN_PROGRESS, 409, null);
        p.send(ex);
    }

    /** A body as PostgreSQL stored it (jsonb text): the same bytes on every replay. */
    private static void sendStored(HttpExchange ex, int code, String text, boolean replayed) throws IOException {
        if (replayed)
            ex.getResponseHeaders().set("Idempotent-Replayed", "true");
        if (text == null) {
            ex.sendResponseHeaders(code, -1);
        } else {
            byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", "application/json");
            ex.sendResponseHeaders(code, bytes.length);
            ex.getResponseBody().write(bytes);
        }
        ex.close();
    }
}
