package idempotency;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * The HTTP contract (examples/README.md) as tests, for a filter in front of
 * a payment handler on a real server and a real database (the PG*
 * environment variables, as IdempotencyTest).  A subclass starts the server
 * with the filter mounted, configured as {@link #mounts} says, in front of
 * a handler that hands the claim and the body it read to {@link #pay}.  The
 * handler answers PostgreSQL's clock_timestamp(): a replay has the first
 * answer's bytes, a second run does not.
 */
abstract class FilterContract {
    /** Handler runs per key, events per key. */
    static final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
    static final Map<String, List<Event>> events = new ConcurrentHashMap<>();
    /** Keys whose handler waits for the latch (claims in flight). */
    static final Map<String, CountDownLatch[]> holds = new ConcurrentHashMap<>();

    /**
     * The paths a subclass mounts the filter on, each with the options the
     * tests expect: "/default" (none), "/nowait" (waitForDuplicates false),
     * "/header" (scopeFromHeader Merchant-Id), "/small" (maxBody 100),
     * "/card" (every request committed, heartbeats on connections of their
     * own), "/await" (committed for ?mode=card, awaitResult 60 s); every one
     * with {@link #validate} and {@link #HOOK}.
     */
    static final List<String> mounts = List.of("/default", "/nowait", "/header", "/small", "/card", "/await");

    /** The validator of every mount: a body with "invalid" is refused (422). */
    static void validate(String body) {
        if (body.contains("\"invalid\""))
            throw new Problem(422, "Invalid", "the validator refused it");
    }

    /** The outcome hook of every mount. */
    static final Consumer<Event> HOOK =
        e -> events.computeIfAbsent(e.key(), k -> new CopyOnWriteArrayList<>()).add(e);

    static final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    static String databaseUrl() {
        return "jdbc:postgresql://" + System.getenv().getOrDefault("PGHOST", "127.0.0.1") + ":"
            + System.getenv().getOrDefault("PGPORT", "5432") + "/" + System.getenv().getOrDefault("PGDATABASE", "postgres");
    }

    static Properties databaseUser() {
        Properties p = new Properties();
        p.setProperty("user", System.getenv().getOrDefault("PGUSER", "postgres"));
        if (System.getenv("PGPASSWORD") != null)
            p.setProperty("password", System.getenv("PGPASSWORD"));
        return p;
    }

    /** The server's address of path. */
    abstract URI uri(String path);

    /** The requests' pool (the tests' own queries use it too). */
    abstract ConnectionSource pool();

    /**
     * What the handler does with the claim and the body it read from the
     * request (as handlers do): a body with "crash" throws an
     * IllegalStateException on its first run, "error" an AssertionError; "fail" records a recovery point
     * and throws a Problem, unless an earlier attempt left a recovery point;
     * else 201 with the time, the scope, the recovery point and the body read.
     * A body with "nul" answers 201 with a body idem_complete refuses (22P05).
     * A body with "self" the handler answers by itself, before this: 202
     * {"self": run}.
     *
     * With "keep" the handler keeps the claim (kept), its transaction
     * (keptConnections) and a statement of it (keptStatements), as one that
     * hands them to work of its own might.
     *
     * @return the run of this key (1 the first)
     */
    static int pay(Claimed claim, String read) throws SQLException {
        int run = runs.computeIfAbsent(claim.key(), k -> new AtomicInteger()).incrementAndGet();
        CountDownLatch[] hold = holds.get(claim.key());
        if (hold != null) {
            hold[0].countDown();
            try {
                hold[1].await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (read.contains("\"keep\"")) {
            kept.put(claim.key(), claim);
            keptConnections.put(claim.key(), claim.transaction());
            keptStatements.put(claim.key(), claim.transaction().prepareStatement("SELECT 1"));
            Connection tx = claim.transaction();
            String unwrapped;
            try {
                unwrapped = "escaped to " + tx.unwrap(org.postgresql.PGConnection.class);
            } catch (SQLException e) {
                unwrapped = e.getSQLState();
            }
            keptUnwrapped.put(claim.key(), unwrapped + " " + tx.isWrapperFor(org.postgresql.PGConnection.class)
                                           + " " + (tx.unwrap(Connection.class) == tx)
                                           + " " + keptStatements.get(claim.key()).isWrapperFor(org.postgresql.PGStatement.class));
        }
        if (read.contains("\"self\""))
            return run;
        if (read.contains("\"crash\"") && run == 1)
            throw new IllegalStateException("the handler crashed (a test)");
        if (read.contains("\"error\"") && run == 1)
            throw new AssertionError("the handler failed with an Error (a test)");
        if (read.contains("\"nul\"")) {
            // an answer idem_complete refuses: \u0000 in a string (22P05)
            claim.respond(201, "{\"note\": \"a\\u0000b\"}");
            return run;
        }
        if (read.contains("\"fail\"") && claim.recoveryPoint() == null) {
            claim.checkpoint("before-failure:" + claim.outcome());
            throw failure();
        }
        try (PreparedStatement ps = claim.transaction().prepareStatement(
                "SELECT jsonb_build_object('at', clock_timestamp()::text, 'scope', ?::text, "
                + "'point', ?::text, 'read', ?::jsonb)::text")) {
            ps.setString(1, claim.scope());
            ps.setString(2, claim.recoveryPoint());
            ps.setString(3, read);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                claim.respond(201, rs.getString(1));
            }
        }
        return run;
    }

    /** The handler's failure: an upstream that failed. */
    static Problem failure() {
        return new Problem(502, "Upstream failed", "try again").header("Retry-After", "1");
    }

    static String key() {
        return "filter-" + UUID.randomUUID();
    }

    HttpRequest.Builder post(String path, String key, String body) {
        HttpRequest.Builder b = HttpRequest.newBuilder(uri(path))
            .timeout(Duration.ofSeconds(120))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
        if (key != null)
            b.header("Idempotency-Key", key);
        return b;
    }

    static HttpResponse<String> send(HttpRequest.Builder b) throws Exception {
        return client.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    static CompletableFuture<HttpResponse<String>> sendAsync(HttpRequest.Builder b) {
        return client.sendAsync(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    static List<Event.Observed> observed(String key) {
        return events.getOrDefault(key, List.of()).stream().map(Event::outcome).toList();
    }

    static int runsOf(String key) {
        AtomicInteger n = runs.get(key);
        return n == null ? 0 : n.get();
    }

    static String replayed(HttpResponse<String> r) {
        return r.headers().firstValue("Idempotent-Replayed").orElse("");
    }

    static void assertProblem(HttpResponse<String> r, int status) {
        assertEquals(status, r.statusCode(), r.body());
        assertEquals("application/problem+json", r.headers().firstValue("Content-Type").orElse(""));
        assertTrue(r.body().contains("\"status\":" + status), r.body());
    }

    /** The claims handlers kept ("keep"), by key, and a statement of each one's transaction. */
    static final Map<String, Claimed> kept = new ConcurrentHashMap<>();
    static final Map<String, PreparedStatement> keptStatements = new ConcurrentHashMap<>();
    static final Map<String, Connection> keptConnections = new ConcurrentHashMap<>();
    /** What unwrap gave the handler: refused (0A000) beyond the guard. */
    static final Map<String, String> keptUnwrapped = new ConcurrentHashMap<>();

    /**
     * A claim kept past its handler is refused: its transaction ended and
     * its connection went back to the pool, maybe to another request.
     */
    @Test
    void aClaimIsRefusedOnceItsHandlerReturned() throws Exception {
        String key = key();
        assertEquals(201, send(post("/default", key, "{\"keep\": 1}")).statusCode());
        Claimed claim = kept.get(key);
        assertThrows(IllegalStateException.class, claim::transaction);
        assertThrows(IllegalStateException.class, () -> claim.checkpoint("late"));
        assertThrows(IllegalStateException.class, () -> claim.respond(201, "{}"));
        // what it gave before: its connection went back to the pool, maybe to another request
        PreparedStatement ps = keptStatements.get(key);
        assertThrows(SQLException.class, ps::executeQuery);
        assertThrows(SQLException.class, ps::getConnection);
        Connection c = keptConnections.get(key);
        // the handler could not unwrap it to the driver's connection (or statement) while it ran
        assertEquals("0A000 false true false", keptUnwrapped.get(key));
        assertThrows(SQLException.class, () -> c.prepareStatement("SELECT 1"));
        assertThrows(SQLException.class, c::commit);
        assertEquals(c, c);
        c.close(); // does nothing: the connection is the pool's
        assertTrue(c.isClosed());
        Connection mine = pool().borrow(); // the pool's connections work
        try {
            assertTrue(mine.isValid(5));
        } finally {
            pool().release(mine);
        }
    }

    @Test
    void firstAnswerAndReplayAreTheSameBytes() throws Exception {
        String key = key();
        HttpResponse<String> first = send(post("/default", key, "{\"amount\": 10}"));
        assertEquals(201, first.statusCode(), first.body());
        assertEquals("application/json", first.headers().firstValue("Content-Type").orElse(""));
        assertEquals(Integer.toString(first.body().getBytes(StandardCharsets.UTF_8).length),
                     first.headers().firstValue("Content-Length").orElse(""));
        assertTrue(first.headers().firstValue("Idempotent-Replayed").isEmpty());
        // the handler read the body the filter had read (jsonb text: PostgreSQL's spacing)
        assertTrue(first.body().contains("\"read\": {\"amount\": 10}"), first.body());
        HttpResponse<String> again = send(post("/default", key, "{\"amount\":10}")); // same JSON
        assertEquals(201, again.statusCode());
        assertEquals("true", replayed(again));
        assertEquals("application/json", again.headers().firstValue("Content-Type").orElse(""));
        assertEquals(first.body(), again.body());
        assertEquals(1, runsOf(key));
        assertEquals(List.of(Event.Observed.NEW, Event.Observed.REPLAY), observed(key));
        Event e = events.get(key).get(0);
        assertEquals(201, e.status());
        assertEquals(key, e.key());
        assertFalse(e.committed());
        assertTrue(e.claimTime().compareTo(Duration.ZERO) > 0);
        assertTrue(e.elapsed().compareTo(e.claimTime()) >= 0);
        assertNull(e.sqlstate());
        assertEquals(201, events.get(key).get(1).status());
    }

    @Test
    void badRequestsAreRejectedBeforeAnyClaim() throws Exception {
        String key = key();
        HttpResponse<String> noKey = send(post("/default", null, "{}"));
        assertProblem(noKey, 400);
        assertTrue(noKey.body().contains("Idempotency-Key header missing"), noKey.body());
        assertProblem(send(post("/default", key, "{}").setHeader("Content-Type", "text/plain")), 415);
        assertProblem(send(post("/small", key, "{\"pad\": \"" + "x".repeat(200) + "\"}")), 413);
        assertProblem(send(post("/default", key, "{\"amount\": ")), 400);
        assertProblem(send(post("/default", key, "{\"invalid\": 1}")), 422);
        assertEquals(0, runsOf(key));
        assertEquals(List.of(Event.Observed.REJECTED, Event.Observed.REJECTED, Event.Observed.REJECTED,
                             Event.Observed.REJECTED), observed(key));
        assertEquals(List.of(415, 413, 400, 422), events.get(key).stream().map(Event::status).toList());
        // nothing was claimed: the key is new now
        assertEquals(201, send(post("/default", key, "{}")).statusCode());
        assertEquals(Event.Observed.NEW, observed(key).get(4));
    }

    @Test
    void otherMethodsPassThroughUntouched() throws Exception {
        int before = events.values().stream().mapToInt(List::size).sum();
        HttpResponse<String> r = send(HttpRequest.newBuilder(uri("/default")).GET());
        assertEquals(200, r.statusCode());
        assertEquals("ok", r.body());
        assertEquals(before, events.values().stream().mapToInt(List::size).sum()); // no event: not seen
    }

    @Test
    void anotherBodyIs422() throws Exception {
        String key = key();
        assertEquals(201, send(post("/default", key, "{\"amount\": 10}")).statusCode());
        HttpResponse<String> other = send(post("/default", key, "{\"amount\": 11}"));
        assertProblem(other, 422);
        assertTrue(other.body().contains("Idempotency-Key reused with a different request body"), other.body());
        Event e = events.get(key).get(1);
        assertEquals(Event.Observed.MISMATCH, e.outcome());
        assertEquals(422, e.status());
        assertEquals("IK001", e.sqlstate());
        assertEquals(1, runsOf(key));
    }

    @Test
    void theScopeComesFromAHeaderOnlyWhenConfigured() throws Exception {
        String key = key();
        HttpResponse<String> a = send(post("/default", key, "{}").header("Merchant-Id", "m-a"));
        HttpResponse<String> b = send(post("/default", key, "{}").header("Merchant-Id", "m-b"));
        assertTrue(a.body().contains("\"scope\": \"\""), a.body());
        assertEquals(a.body(), b.body()); // one scope: the header is ignored
        assertEquals("true", replayed(b));

        String other = key();
        HttpResponse<String> c = send(post("/header", other, "{}").header("Merchant-Id", "m-c"));
        HttpResponse<String> d = send(post("/header", other, "{}").header("Merchant-Id", "m-d"));
        assertTrue(c.body().contains("\"scope\": \"m-c\""), c.body());
        assertTrue(d.body().contains("\"scope\": \"m-d\""), d.body());
        assertTrue(d.headers().firstValue("Idempotent-Replayed").isEmpty());
        assertEquals(2, runsOf(other));
        assertEquals("m-d", events.get(other).get(1).scope());
    }

    @Test
    void aFailedHandlerLeavesTheKeyFree() throws Exception {
        assertAFailureLeavesTheKeyFree("{\"fail\": 1}");
    }

    /** A body the handler fails with (a 502 Problem): rolled back, so the retry runs again. */
    void assertAFailureLeavesTheKeyFree(String body) throws Exception {
        String key = key();
        HttpResponse<String> failed = send(post("/default", key, body));
        assertProblem(failed, 502);
        assertEquals("1", failed.headers().firstValue("Retry-After").orElse(""));
        HttpResponse<String> again = send(post("/default", key, body));
        assertProblem(again, 502); // rolled back, with its recovery point: run again, not replayed
        assertTrue(again.headers().firstValue("Idempotent-Replayed").isEmpty());
        assertEquals(2, runsOf(key));
        assertEquals(List.of(Event.Observed.NEW, Event.Observed.NEW), observed(key));
        assertEquals(502, events.get(key).get(1).status());
    }

    /**
     * A handler that fails with an Error (an assertion, a stack overflow):
     * its claim is ended all the same, answered 500, and a retry runs again
     * (the claim's transaction stayed open before, the key locked for good,
     * the retry waiting for it).
     */
    @Test
    void aHandlerFailingWithAnErrorLeavesTheKeyFree() throws Exception {
        String key = key();
        HttpResponse<String> failed = send(post("/default", key, "{\"error\": 1}").timeout(Duration.ofSeconds(30)));
        assertProblem(failed, 500);
        HttpResponse<String> retry = send(post("/default", key, "{\"error\": 1}").timeout(Duration.ofSeconds(30)));
        assertEquals(201, retry.statusCode(), retry.body());
        assertEquals(2, runsOf(key));
        assertEquals(List.of(Event.Observed.ERROR, Event.Observed.NEW), observed(key));
    }

    @Test
    void aCrashedHandlerIs500AndTheRetryRunsAgain() throws Exception {
        String key = key();
        HttpResponse<String> crashed = send(post("/default", key, "{\"crash\": 1}"));
        assertProblem(crashed, 500);
        assertFalse(crashed.body().contains("crashed"), crashed.body()); // no exception text
        HttpResponse<String> retry = send(post("/default", key, "{\"crash\": 1}"));
        assertEquals(201, retry.statusCode(), retry.body());
        assertTrue(retry.headers().firstValue("Idempotent-Replayed").isEmpty());
        assertEquals(2, runsOf(key));
        assertEquals(List.of(Event.Observed.ERROR, Event.Observed.NEW), observed(key));
        assertEquals(500, events.get(key).get(0).status());
    }

    @Test
    void aHandlerThatAnswersByItselfRecordsNothing() throws Exception {
        String key = key();
        HttpResponse<String> own = send(post("/default", key, "{\"self\": 1}"));
        assertEquals(202, own.statusCode(), own.body());
        assertEquals("{\"self\": 1}", own.body());
        HttpResponse<String> again = send(post("/default", key, "{\"self\": 1}"));
        assertEquals("{\"self\": 2}", again.body()); // run again: the key was rolled back
        assertTrue(again.headers().firstValue("Idempotent-Replayed").isEmpty());
        // reported after the handler's own answer went out (the JDK's server
        // sends it as the handler writes): wait for the second event
        for (int i = 0; i < 200 && observed(key).size() < 2; i++)
            Thread.sleep(25);
        assertEquals(List.of(Event.Observed.NEW, Event.Observed.NEW), observed(key));
        assertEquals(202, events.get(key).get(0).status());
    }

    @Test
    void aDuplicateWaitsForTheFirstTransactionThenReplays() throws Exception {
        String key = key();
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        holds.put(key, new CountDownLatch[] {entered, go});
        CompletableFuture<HttpResponse<String>> first = sendAsync(post("/default", key, "{}"));
        CompletableFuture<HttpResponse<String>> dup;
        try {
            assertTrue(entered.await(60, TimeUnit.SECONDS));
            dup = sendAsync(post("/default", key, "{}"));
            waitForClaimInFlight(); // the duplicate waits on the first one's uncommitted claim
        } finally {
            go.countDown();
        }
        HttpResponse<String> a = first.get(120, TimeUnit.SECONDS);
        HttpResponse<String> b = dup.get(120, TimeUnit.SECONDS);
        assertEquals(201, a.statusCode(), a.body());
        assertEquals(201, b.statusCode(), b.body());
        assertEquals(a.body(), b.body());
        assertEquals("true", replayed(b));
        assertEquals(1, runsOf(key));
        // each answer's event: the duplicate's may come first (it goes on
        // once the first commits, before the first's own event is recorded)
        for (int i = 0; i < 400 && observed(key).size() < 2; i++)
            Thread.sleep(25);
        assertEquals(List.of(Event.Observed.NEW, Event.Observed.REPLAY),
                     observed(key).stream().sorted().toList());
    }

    @Test
    void aDuplicateIs409AtOnceWithoutWaiting() throws Exception {
        String key = key();
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        holds.put(key, new CountDownLatch[] {entered, go});
        CompletableFuture<HttpResponse<String>> first = sendAsync(post("/nowait", key, "{}"));
        try {
            assertTrue(entered.await(60, TimeUnit.SECONDS));
            HttpResponse<String> dup = send(post("/nowait", key, "{}"));
            assertProblem(dup, 409);
            assertEquals("1", dup.headers().firstValue("Retry-After").orElse(""));
            assertEquals(List.of(Event.Observed.IN_PROGRESS), observed(key));
        } finally {
            go.countDown();
        }
        HttpResponse<String> r = first.get(120, TimeUnit.SECONDS);
        assertEquals(201, r.statusCode(), r.body());
        HttpResponse<String> retry = send(post("/nowait", key, "{}"));
        assertEquals(r.body(), retry.body());
        assertEquals("true", replayed(retry));
        assertEquals(1, runsOf(key));
    }

    @Test
    void aCommittedClaimFailsRetryableAndIsReclaimedWithItsRecoveryPoint() throws Exception {
        String key = key();
        HttpResponse<String> failed = send(post("/card", key, "{\"fail\": 1}"));
        assertProblem(failed, 502);
        assertEquals("1", failed.headers().firstValue("Retry-After").orElse(""));
        // recorded failed and retryable: the retry takes the key over and finds the point
        HttpResponse<String> retry = send(post("/card", key, "{\"fail\": 1}"));
        assertEquals(201, retry.statusCode(), retry.body());
        assertTrue(retry.body().contains("\"point\": \"before-failure:NEW\""), retry.body());
        HttpResponse<String> replay = send(post("/card", key, "{\"fail\": 1}"));
        assertEquals(retry.body(), replay.body());
        assertEquals("true", replayed(replay));
        assertEquals(List.of(Event.Observed.NEW, Event.Observed.RECLAIMED, Event.Observed.REPLAY), observed(key));
        assertTrue(events.get(key).get(1).committed());
        assertEquals(2, runsOf(key));
    }

    @Test
    void aCommittedClaimCompletesWithItsTokenAndReplays() throws Exception {
        String key = key();
        HttpResponse<String> first = send(post("/card", key, "{}"));
        assertEquals(201, first.statusCode(), first.body());
        HttpResponse<String> again = send(post("/card", key, "{}"));
        assertEquals(first.body(), again.body());
        assertEquals("true", replayed(again));
        assertEquals(List.of(Event.Observed.NEW, Event.Observed.REPLAY), observed(key));
        assertTrue(events.get(key).get(0).committed());
    }

    @Test
    void aKeyInFlightIs409WithRetryAfter() throws Exception {
        String key = key();
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        holds.put(key, new CountDownLatch[] {entered, go});
        CompletableFuture<HttpResponse<String>> first = sendAsync(post("/card", key, "{}"));
        try {
            assertTrue(entered.await(60, TimeUnit.SECONDS));
            HttpResponse<String> dup = send(post("/card", key, "{}"));
            assertProblem(dup, 409);
            long after = Long.parseLong(dup.headers().firstValue("Retry-After").orElse("0"));
            assertTrue(after >= 1 && after <= 30, "Retry-After " + after); // the lease left
            assertEquals(Event.Observed.IN_PROGRESS, events.get(key).get(0).outcome());
            assertTrue(events.get(key).get(0).committed());
        } finally {
            go.countDown();
        }
        HttpResponse<String> r = first.get(120, TimeUnit.SECONDS);
        assertEquals(201, r.statusCode(), r.body());
        assertEquals(1, runsOf(key));
    }

    @Test
    void aRetryAwaitsTheResultOfTheClaimInFlight() throws Exception {
        String key = key();
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        holds.put(key, new CountDownLatch[] {entered, go});
        CompletableFuture<HttpResponse<String>> first = sendAsync(post("/await?mode=card", key, "{}"));
        assertTrue(entered.await(60, TimeUnit.SECONDS));
        CompletableFuture<HttpResponse<String>> retry = sendAsync(post("/await?mode=card", key, "{}"));
        // let the first finish once the retry is waiting in idem_claim (or has not started yet:
        // then it replays at once, which the assertions accept as well)
        waitForClaimInFlight();
        go.countDown();
        HttpResponse<String> a = first.get(120, TimeUnit.SECONDS);
        HttpResponse<String> b = retry.get(120, TimeUnit.SECONDS);
        assertEquals(201, a.statusCode(), a.body());
        assertEquals(201, b.statusCode(), b.body());
        assertEquals(a.body(), b.body());
        assertEquals("true", replayed(b));
        assertEquals(1, runsOf(key));
        assertEquals(2, observed(key).size());
        assertEquals(Set.of(Event.Observed.NEW, Event.Observed.REPLAY), Set.copyOf(observed(key)));
        assertTrue(events.get(key).get(0).committed()); // committedWhen saw the query string
    }

    /** Waits (up to 30 s) until another session of this database waits inside idem_claim (the retry). */
    void waitForClaimInFlight() throws Exception {
        Connection c = pool().borrow();
        try (PreparedStatement ps = c.prepareStatement(
                 "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                 + "AND state = 'active' AND wait_event IS NOT NULL AND query LIKE '%idem_claim%' "
                 + "AND pid <> pg_backend_pid()")) {
            for (int i = 0; i < 300; i++) {
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    if (rs.getInt(1) > 0)
                        return;
                }
                Thread.sleep(100);
            }
        } finally {
            pool().release(c);
        }
    }

    /** The key's status, or null when there is no such key. */
    String statusOf(String key) throws SQLException {
        Connection c = pool().borrow();
        try (PreparedStatement ps = c.prepareStatement("SELECT status FROM idempotency_keys WHERE key = ?")) {
            ps.setString(1, key);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : null;
            }
        } finally {
            pool().release(c);
        }
    }

    /**
     * A key stored without a status: replayed 500 when it failed (idem_fail
     * without a code; attempts_exhausted after it), 200 when completed (by
     * SQL); not a NullPointerException.
     */
    @Test
    void aReplayOfAKeyStoredWithoutAStatus() throws Exception {
        String failed = key();
        String done = key();
        Connection c = pool().borrow();
        try {
            Idempotency.Claim claim = Idempotency.claim(c, failed, "{}", "", Duration.ofSeconds(30), true);
            Idempotency.fail(c, failed, "", claim.token(), null, null, false);
            try (PreparedStatement ps = c.prepareStatement("SELECT idem_claim(?, '{}'), idem_complete(?, NULL, NULL)")) {
                ps.setString(1, done);
                ps.setString(2, done);
                ps.execute();
            }
        } finally {
            pool().release(c);
        }
        HttpResponse<String> a = send(post("/default", failed, "{}"));
        assertEquals(500, a.statusCode(), a.body());
        assertEquals("true", replayed(a));
        HttpResponse<String> b = send(post("/default", done, "{}"));
        assertEquals(200, b.statusCode(), b.body());
        assertEquals("true", replayed(b));
        assertEquals(500, events.get(failed).get(0).status());
        assertEquals(List.of(Event.Observed.REPLAY), observed(failed));
    }

    /**
     * An answer idem_complete refuses (\u0000 in a string: 22P05) is the
     * server's fault: 500, not 400.  In a transaction the key is left free;
     * a committed claim is recorded failed, not retryable (below).
     */
    @Test
    void anAnswerIdemCompleteRefusesIs500() throws Exception {
        String key = key();
        assertProblem(send(post("/default", key, "{\"nul\": 1}")), 500);
        assertNull(statusOf(key));
        String card = key();
        assertProblem(send(post("/card", card, "{\"nul\": 1}")), 500);
        assertEquals("failed", statusOf(card));
        assertEquals(List.of(Event.Observed.ERROR), observed(key));
        assertEquals(500, events.get(key).get(0).status());
        assertEquals("22P05", events.get(key).get(0).sqlstate());
    }

    /**
     * A committed claim whose answer idem_complete refuses: the work outside
     * was done, and a retry's answer would be refused as well, so the key is
     * recorded failed, not retryable (500, answer_not_storable): the retry
     * replays that, the handler (a charge) ran once.
     */
    @Test
    void aCommittedClaimsRefusedAnswerIsNotRetried() throws Exception {
        String key = key();
        HttpResponse<String> first = send(post("/card", key, "{\"nul\": 1}"));
        assertProblem(first, 500);
        assertTrue(first.body().contains("\"title\":\"Internal error\""), first.body());
        assertTrue(first.body().contains("The request was processed but its answer could not be stored."), first.body());
        HttpResponse<String> retry = send(post("/card", key, "{\"nul\": 1}"));
        assertEquals(500, retry.statusCode(), retry.body());
        assertEquals("true", replayed(retry));
        assertEquals("{\"error\": \"answer_not_storable\"}", retry.body());
        assertEquals(1, runsOf(key));
        assertEquals(List.of(Event.Observed.ERROR, Event.Observed.REPLAY), observed(key));
        assertEquals("22P05", events.get(key).get(0).sqlstate());
    }

    /** A retry of a committed claim in flight waits 3 s for its result by default, as in the other clients. */
    @Test
    void aRetryWaitsThreeSecondsByDefault() throws Exception {
        String key = key();
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        holds.put(key, new CountDownLatch[] {entered, go});
        CompletableFuture<HttpResponse<String>> first = sendAsync(post("/card", key, "{}"));
        long waited;
        try {
            assertTrue(entered.await(60, TimeUnit.SECONDS));
            long t0 = System.nanoTime();
            HttpResponse<String> dup = send(post("/card", key, "{}"));
            waited = System.nanoTime() - t0;
            assertProblem(dup, 409);
        } finally {
            go.countDown();
        }
        assertTrue(waited >= Duration.ofMillis(2900).toNanos(), "the retry waited " + waited / 1_000_000 + " ms");
        assertEquals(201, first.get(120, TimeUnit.SECONDS).statusCode());
    }
}
