package idempotency;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.regex.Pattern;

/**
 * The HTTP contract (examples/README.md) that {@link IdempotencyFilter}
 * (the JDK's HTTP server) and IdempotencyServletFilter (jakarta.servlet)
 * both implement, over an {@link Exchange} of either: the options, the
 * checks before a claim, the claim, the handler's run and its completion or
 * failure, the answers and the outcome hook.  R is the server's request
 * type, which the scope function, the validator and committedWhen see.
 *
 * <p>It names no server's types, so that the jar works without the servlet
 * API on the class path.
 */
final class FilterCore<R> {
    /** The answer to a handler that failed with an Error, made beforehand (never thrown, never changed). */
    private static final Problem HANDLER_ERROR = new Problem(500, "Internal error", "The request was not processed.");

    private static final Pattern JSON_TYPE = Pattern.compile("(?i)^application/json\\s*(;.*)?$");

    /** One request as the core needs it, from the server's exchange. */
    interface Exchange<R> {
        /** What the scope function, the validator and committedWhen are given. */
        R request();

        String method();

        /** The first value of a request header, or null. */
        String header(String name);

        InputStream body() throws IOException;

        /** The handler reads raw as the request body (the core has read the original). */
        void replaceBody(byte[] raw);

        /** Makes the claim the handler's (Claimed.of, IdempotencyServletFilter.claimOf). */
        void attach(Claimed claimed);

        /**
         * Runs the handler.  It throws {@link Problem} as it was thrown,
         * IOException when the client is gone, anything else for a 500.
         */
        void handle() throws Exception;

        /** Whether the handler answered by itself (sent a status or a body). */
        boolean answered();

        /** The status the handler sent by itself. */
        int answeredStatus();

        /** Ends a request the handler answered by itself (or whose client is gone). */
        void finish() throws IOException;

        /** Sends an answer: status, headers, a Content-Type and body (none when body is null). */
        void send(int status, Map<String, String> headers, String contentType, byte[] body) throws IOException;
    }

    final ConnectionSource connections;
    private Heartbeats heartbeats;
    ConnectionSource heartbeatConnections;
    Duration lease = Duration.ofSeconds(30);
    Duration heartbeatEvery;
    boolean waitForDuplicates = true;
    Duration awaitResult = Duration.ofSeconds(3); // null: the idempotency.await_result setting
    int maxBody = 64 * 1024;
    Set<String> methods = Set.of("POST", "PUT", "PATCH");
    Function<R, String> scope;
    BiConsumer<R, String> validator = (r, body) -> { };
    Predicate<R> committedWhen = r -> false;
    Consumer<Event> hook = e -> { };

    /** A core claiming keys on connections from connections; scope: the default scope function. */
    FilterCore(ConnectionSource connections, Function<R, String> scope) {
        this.connections = Objects.requireNonNull(connections);
        this.scope = scope;
    }

    /** The scope from a request header ("" when absent), through the server's header lookup. */
    static <R> Function<R, String> headerScope(Function<R, String> header) {
        return r -> {
            String v = header.apply(r);
            return v == null ? "" : v;
        };
    }

    /** Whether requests of this method need a key (others pass through untouched). */
    boolean applies(String method) {
        return methods.contains(method);
    }

    /** Stops the heartbeat timer. */
    synchronized void close() {
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

    /** A request whose method {@link #applies}: checked, claimed, run or answered. */
    void filter(Exchange<R> ex) throws IOException {
        Request r = new Request();
        String body;
        try {
            body = admit(ex, r);
        } catch (Problem p) {
            r.report(Event.Observed.REJECTED, p.status(), null);
            send(ex, p);
            return;
        } catch (RuntimeException e) {
            e.printStackTrace();
            Problem p = new Problem(500, "Internal error", "The request was not processed.");
            r.report(Event.Observed.ERROR, p.status(), null);
            send(ex, p);
            return;
        }
        claimAndRun(ex, r, body);
    }

    /** Everything checked before a claim; returns the body. */
    private String admit(Exchange<R> ex, Request r) throws IOException {
        String key = ex.header("Idempotency-Key");
        if (key == null || key.isEmpty())
            throw new Problem(400, "Idempotency-Key header missing",
                              ex.method() + " needs an Idempotency-Key header.");
        r.key = key;
        String type = ex.header("Content-Type");
        if (type == null || !JSON_TYPE.matcher(type).matches())
            throw new Problem(415, "Unsupported Content-Type", "Send the request as application/json.");
        byte[] raw;
        try (InputStream in = ex.body()) {
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
        validator.accept(ex.request(), body);
        String s = scope.apply(ex.request());
        r.scope = s == null ? "" : s;
        r.committed = committedWhen.test(ex.request());
        ex.replaceBody(raw);
        return body;
    }

    private static Event.Observed observedFor(SQLException e) {
        return e instanceof IdempotencyException.RequestMismatch ? Event.Observed.MISMATCH : Event.Observed.ERROR;
    }

    private void claimAndRun(Exchange<R> ex, Request r, String body) throws IOException {
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
        ex.attach(claimed);
        Problem failure = null;
        boolean clientGone = false;
        Error fatal = null;
        try {
            ex.handle();
        } catch (Problem p) {
            failure = p;
        } catch (IOException e) {
            clientGone = true;
        } catch (Exception e) {
            e.printStackTrace();
            failure = new Problem(500, "Internal error", "The request was not processed.");
            ran = Event.Observed.ERROR;
        } catch (Error e) {
            // an assertion, a stack overflow, out of memory: the claim is
            // ended as for an exception (or its transaction stays open, its
            // key locked, for good), answered 500 (a Problem made beforehand:
            // nothing is allocated here), and the Error goes on to the server
            fatal = e;
            failure = HANDLER_ERROR;
            ran = Event.Observed.ERROR;
        } finally {
            claimed.settle();
        }
        // the heartbeats go on until the answer or the failure is recorded
        // (settle stops them then): waiting for a pool connection to record
        // it, the lease must not lapse (a retry would take the key over)
        try {
            if (fatal == null) {
                settle(ex, r, claim, claimed, beat, ran, failure, clientGone);
                return;
            }
            try {
                settle(ex, r, claim, claimed, beat, ran, failure, clientGone);
            } catch (IOException | RuntimeException e) {
                fatal.addSuppressed(e);
            }
            throw fatal;
        } finally {
            stop(beat);
        }
    }

    private static void stop(Heartbeats.Handle beat) {
        if (beat != null)
            beat.stop();
    }

    /**
     * Whether a failed COMMIT may have committed: the connection was lost
     * (no SQLSTATE, class 08) or the server shut down (57P01, 57P02, 57P03).
     */
    static boolean outcomeUnknown(SQLException e) {
        String s = e.getSQLState();
        return s == null || s.startsWith("08") || s.equals("57P01") || s.equals("57P02") || s.equals("57P03");
    }

    /** The answer to a COMMIT that may have committed: the client retries with the same key. */
    static Problem outcomeUnknownProblem() {
        return new Problem(503, "Outcome unknown",
                           "The request may have been processed. Retry it with the same Idempotency-Key to get its result.")
            .header("Retry-After", "1");
    }

    /** Whether idem_complete refused the handler's answer itself (class 22, 54000 too large): every retry would too. */
    private static boolean answerRefused(SQLException e) {
        String s = e.getSQLState();
        return s != null && (s.startsWith("22") || s.equals("54000"));
    }

    /** After the handler: the key completed with its answer, or the claim undone; the answer sent. */
    private void settle(Exchange<R> ex, Request r, Idempotency.Claim claim, Claimed claimed, Heartbeats.Handle beat,
                        Event.Observed ran, Problem failure, boolean clientGone) throws IOException {
        boolean handlerAnswered = ex.answered();
        if (failure == null && !clientGone && !handlerAnswered && claimed.response != null) {
            String text;
            boolean committing = false;
            try {
                text = Idempotency.completeReturningText(claimed.ownTransaction(), r.key, claimed.status,
                                                         claimed.response, r.scope,
                                                         r.committed ? claim.token() : null);
                committing = true;
                // the key's row is this transaction's now: no retry can take it
                // over until it ends, and Heartbeats' one connection would wait
                // for it, every other claim's renewal behind it
                stop(beat);
                claimed.tx.commit();
            } catch (SQLException e) {
                if (claimed.tx != null)
                    endTransaction(claimed.tx);
                if (r.committed && !committing && answerRefused(e)) {
                    // the work outside was done and every retry's answer would
                    // be refused as well: recorded failed, not retryable, so
                    // that retries replay this instead of doing the work again
                    recordFailure(r, claim.token(), 500, "{\"error\": \"answer_not_storable\"}", false);
                    stop(beat);
                    System.err.println("idempotency: the handler's answer could not be stored: " + e.getMessage());
                    r.report(Event.Observed.ERROR, 500, e.getSQLState());
                    send(ex, new Problem(500, "Internal error",
                                         "The request was processed but its answer could not be stored."));
                    return;
                }
                if (r.committed)
                    failRetryable(r, claim.token());
                stop(beat);
                if (committing && outcomeUnknown(e)) {
                    // the connection was lost during COMMIT: it may have committed
                    System.err.println("idempotency: the COMMIT of " + r.key + " failed, its outcome is unknown: "
                                       + e.getMessage());
                    Problem p = outcomeUnknownProblem();
                    r.report(Event.Observed.ERROR, p.status(), e.getSQLState());
                    send(ex, p);
                    return;
                }
                if (e.getSQLState() != null && e.getSQLState().startsWith("22")) {
                    // the handler's answer refused as jsonb: the server's fault, not the request's
                    System.err.println("idempotency: the handler's answer was refused: " + e.getMessage());
                    Problem p = new Problem(500, "Internal error", "The request was not processed.");
                    r.report(Event.Observed.ERROR, 500, e.getSQLState());
                    send(ex, p);
                    return;
                }
                sendError(ex, r, e);
                return;
            }
            stop(beat);
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
        stop(beat);
        if (handlerAnswered || clientGone) {
            r.report(ran, handlerAnswered ? ex.answeredStatus() : 499, null);
            ex.finish();
            return;
        }
        if (failure == null) {
            System.err.println("idempotency: the handler recorded no answer (Claimed.respond)");
            failure = new Problem(500, "Internal error", "The request was not processed.");
            ran = Event.Observed.ERROR;
        }
        r.report(ran, failure.status(), null);
        send(ex, failure);
    }

    private void failRetryable(Request r, long token) {
        recordFailure(r, token, null, null, true);
    }

    private void recordFailure(Request r, long token, Integer code, String json, boolean retryable) {
        try {
            Connection c = connections.borrow();
            try {
                Idempotency.fail(c, r.key, r.scope, token, code, json, retryable);
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

    private void sendError(Exchange<R> ex, Request r, SQLException e) throws IOException {
        Problem p = Problem.from(e);
        SQLException t = IdempotencyException.translate(e);
        r.report(observedFor(t), p.status(), t.getSQLState());
        send(ex, p);
    }

    private void answerExisting(Exchange<R> ex, Request r, Idempotency.Claim claim) throws IOException {
        if (claim.outcome() == Idempotency.Outcome.REPLAY) {
            // no stored status: a key completed by SQL is a success; a failed
            // one (idem_fail without a code, attempts_exhausted) is not
            int code = claim.responseCode() != null ? claim.responseCode()
                : "failed".equals(claim.status()) ? 500 : 200;
            r.report(Event.Observed.REPLAY, code, null);
            sendStored(ex, code, claim.response(), true);
            return;
        }
        Duration d = claim.retryAfter();
        long after = d == null ? 1 : Math.max(1, d.toSeconds() + (d.toMillisPart() > 0 ? 1 : 0));
        Problem p = new Problem(409, "A request with this Idempotency-Key is being processed",
            claim.outcome() == Idempotency.Outcome.STALE
                ? "An earlier attempt stopped midway; an operator must settle it."
                : "Retry after the time in Retry-After.").header("Retry-After", Long.toString(after));
        r.report(Event.Observed.IN_PROGRESS, 409, null);
        send(ex, p);
    }

    /** A problem+json answer. */
    private static void send(Exchange<?> ex, Problem p) throws IOException {
        ex.send(p.status(), p.headers(), "application/problem+json", p.json().getBytes(StandardCharsets.UTF_8));
    }

    /** A body as PostgreSQL stored it (jsonb text): the same bytes on every replay. */
    private static void sendStored(Exchange<?> ex, int code, String text, boolean replayed) throws IOException {
        ex.send(code, replayed ? Map.of("Idempotent-Replayed", "true") : Map.of(), "application/json",
                text == null ? null : text.getBytes(StandardCharsets.UTF_8));
    }
}
