package idempotency;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
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
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * IdempotencyFilter on a real HTTP server (the JDK's) and a real database
 * (the PG* environment variables, as IdempotencyTest).  The handler answers
 * PostgreSQL's clock_timestamp(): a replay has the first answer's bytes, a
 * second run does not.
 */
class IdempotencyFilterTest {
    private static HttpServer server;
    private static ExecutorService threads;
    private static ConnectionPool pool;
    private static final List<IdempotencyFilter> filters = new CopyOnWriteArrayList<>();
    private static final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    /** Handler runs per key, events per key. */
    private static final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
    private static final Map<String, List<Event>> events = new ConcurrentHashMap<>();
    /** Keys whose handler waits for the latch (committed claims in flight). */
    private static final Map<String, CountDownLatch[]> holds = new ConcurrentHashMap<>();

    @BeforeAll
    static void start() throws IOException {
        String host = System.getenv().getOrDefault("PGHOST", "127.0.0.1");
        String url = "jdbc:postgresql://" + host + ":" + System.getenv().getOrDefault("PGPORT", "5432") + "/"
            + System.getenv().getOrDefault("PGDATABASE", "postgres");
        Properties p = new Properties();
        p.setProperty("user", System.getenv().getOrDefault("PGUSER", "postgres"));
        if (System.getenv("PGPASSWORD") != null)
            p.setProperty("password", System.getenv("PGPASSWORD"));
        pool = new ConnectionPool(url, p, 8);
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 50);
        mount("/default", filter());
        mount("/header", filter().scopeFromHeader("Merchant-Id"));
        mount("/small", filter().maxBody(100));
        mount("/card", filter().committedWhen(ex -> true).lease(Duration.ofSeconds(30))
                                .heartbeatConnections(new ConnectionPool(url, p, 1)));
        mount("/await", filter().committedWhen(ex -> true).awaitResult(Duration.ofSeconds(60)));
        threads = Executors.newCachedThreadPool();
        server.setExecutor(threads);
        server.start();
    }

    @AfterAll
    static void stop() {
        server.stop(0);
        threads.shutdownNow();
        filters.forEach(IdempotencyFilter::close);
    }

    private static IdempotencyFilter filter() {
        IdempotencyFilter f = new IdempotencyFilter(pool)
            .validate((ex, body) -> {
                if (body.contains("\"invalid\""))
                    throw new Problem(422, "Invalid", "the validator refused it");
            })
            .onOutcome(e -> events.computeIfAbsent(e.key(), k -> new CopyOnWriteArrayList<>()).add(e));
        filters.add(f);
        return f;
    }

    private static void mount(String path, IdempotencyFilter f) {
        server.createContext(path, IdempotencyFilterTest::handle).getFilters().add(f);
    }

    /**
     * The handler: a body with "fail" records a recovery point and throws a
     * Problem, unless an earlier attempt left a recovery point; else 201 with
     * the time, the scope and the recovery point.
     */
    private static void handle(HttpExchange ex) {
        Claimed claim = Claimed.of(ex);
        runs.computeIfAbsent(claim.key(), k -> new AtomicInteger()).incrementAndGet();
        CountDownLatch[] hold = holds.get(claim.key());
        if (hold != null) {
            hold[0].countDown();
            try {
                hold[1].await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        try {
            if (claim.body().contains("\"fail\"") && claim.recoveryPoint() == null) {
                claim.checkpoint("before-failure:" + claim.outcome());
                throw new Problem(502, "Upstream failed", "try again").header("Retry-After", "1");
            }
            try (PreparedStatement ps = claim.transaction().prepareStatement(
                    "SELECT jsonb_build_object('at', clock_timestamp()::text, 'scope', ?::text, "
                    + "'point', ?::text)::text")) {
                ps.setString(1, claim.scope());
                ps.setString(2, claim.recoveryPoint());
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    claim.respond(201, rs.getString(1));
                }
            }
        } catch (SQLException e) {
            throw Problem.from(e);
        }
    }

    private static String key() {
        return "filter-" + UUID.randomUUID();
    }

    private static HttpRequest.Builder post(String path, String key, String body) {
        HttpRequest.Builder b = HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + server.getAddress().getPort() + path))
            .timeout(Duration.ofSeconds(120))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
        if (key != null)
            b.header("Idempotency-Key", key);
        return b;
    }

    private static HttpResponse<String> send(HttpRequest.Builder b) throws Exception {
        return client.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    private static List<Event.Observed> observed(String key) {
        return events.getOrDefault(key, List.of()).stream().map(Event::outcome).toList();
    }

    private static int runsOf(String key) {
        AtomicInteger n = runs.get(key);
        return n == null ? 0 : n.get();
    }

    @Test
    void firstAnswerAndReplayAreTheSameBytes() throws Exception {
        String key = key();
        HttpResponse<String> first = send(post("/default", key, "{\"amount\": 10}"));
        assertEquals(201, first.statusCode());
        assertEquals("application/json", first.headers().firstValue("Content-Type").orElse(""));
        assertTrue(first.headers().firstValue("Idempotent-Replayed").isEmpty());
        HttpResponse<String> again = send(post("/default", key, "{\"amount\":10}")); // same JSON
        assertEquals(201, again.statusCode());
        assertEquals("true", again.headers().firstValue("Idempotent-Replayed").orElse(""));
        assertEquals(first.body(), again.body());
        assertEquals(1, runsOf(key));
        assertEquals(List.of(Event.Observed.NEW, Event.Observed.REPLAY), observed(key));
        Event e = events.get(key).get(0);
        assertEquals(201, e.status());
        assertFalse(e.committed());
        assertTrue(e.claimTime().compareTo(Duration.ZERO) > 0);
        assertTrue(e.elapsed().compareTo(e.claimTime()) >= 0);
        assertNull(e.sqlstate());
    }

    private static void assertProblem(HttpResponse<String> r, int status) {
        assertEquals(status, r.statusCode(), r.body());
        assertEquals("application/problem+json", r.headers().firstValue("Content-Type").orElse(""));
        assertTrue(r.body().contains("\"status\":" + status), r.body());
    }

    @Test
    void badRequestsAreRejectedBeforeAnyClaim() throws Exception {
        String key = key();
        assertProblem(send(post("/default", null, "{}")), 400);
        assertProblem(send(post("/default", key, "{}").setHeader("Content-Type", "text/plain")), 415);
        assertProblem(send(post("/small", key, "{\"pad\": \"" + "x".repeat(200) + "\"}")), 413);
        assertProblem(send(post("/default", key, "{\"amount\": ")), 400);
        assertProblem(send(post("/default", key, "{\"invalid\": 1}")), 422);
        assertEquals(0, runsOf(key));
        assertEquals(List.of(Event.Observed.REJECTED, Event.Observed.REJECTED, Event.Observed.REJECTED,
                             Event.Observed.REJECTED), observed(key));
        // nothing was claimed: the key is new now
        assertEquals(201, send(post("/default", key, "{}")).statusCode());
        assertEquals(Event.Observed.NEW, observed(key).get(4));
    }

    @Test
    void anotherBodyIs422() throws Exception {
        String key = key();
        assertEquals(201, send(post("/default", key, "{\"amount\": 10}")).statusCode());
        assertProblem(send(post("/default", key, "{\"amount\": 11}")), 422);
        Event e = events.get(key).get(1);
        assertEquals(Event.Observed.MISMATCH, e.outcome());
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
        assertEquals("true", b.headers().firstValue("Idempotent-Replayed").orElse(""));

        String other = key();
        HttpResponse<String> c = send(post("/header", other, "{}").header("Merchant-Id", "m-c"));
        HttpResponse<String> d = send(post("/header", other, "{}").header("Merchant-Id", "m-d"));
        assertTrue(c.body().contains("\"scope\": \"m-c\""), c.body());
        assertTrue(d.body().contains("\"scope\": \"m-d\""), d.body());
        assertTrue(d.headers().firstValue("Idempotent-Replayed").isEmpty());
        assertEquals(2, runsOf(other));
    }

    @Test
    void aFailedHandlerLeavesTheKeyFree() throws Exception {
        String key = key();
        HttpResponse<String> failed = send(post("/default", key, "{\"fail\": 1}"));
        assertProblem(failed, 502);
        assertEquals("1", failed.headers().firstValue("Retry-After").orElse(""));
        HttpResponse<String> again = send(post("/default", key, "{\"fail\": 1}"));
        assertProblem(again, 502); // rolled back, with its recovery point: run again, not replayed
        assertEquals(2, runsOf(key));
        assertEquals(List.of(Event.Observed.NEW, Event.Observed.NEW), observed(key));
        assertEquals(502, events.get(key).get(1).status());
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
        assertEquals("true", again.headers().firstValue("Idempotent-Replayed").orElse(""));
        assertEquals(List.of(Event.Observed.NEW, Event.Observed.REPLAY), observed(key));
    }

    @Test
    void aKeyInFlightIs409WithRetryAfter() throws Exception {
        String key = key();
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        holds.put(key, new CountDownLatch[] {entered, go});
        CompletableFuture<HttpResponse<String>> first =
            client.sendAsync(post("/card", key, "{}").build(), HttpResponse.BodyHandlers.ofString());
        try {
            assertTrue(entered.await(60, TimeUnit.SECONDS));
            HttpResponse<String> dup = send(post("/card", key, "{}"));
            assertProblem(dup, 409);
            long after = Long.parseLong(dup.headers().firstValue("Retry-After").orElse("0"));
            assertTrue(after >= 1, "Retry-After " + after);
            assertEquals(Event.Observed.IN_PROGRESS, events.get(key).get(0).outcome());
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
        CompletableFuture<HttpResponse<String>> first =
            client.sendAsync(post("/await", key, "{}").build(), HttpResponse.BodyHandlers.ofString());
        assertTrue(entered.await(60, TimeUnit.SECONDS));
        CompletableFuture<HttpResponse<String>> retry =
            client.sendAsync(post("/await", key, "{}").build(), HttpResponse.BodyHandlers.ofString());
        // let the first finish once the retry is waiting in idem_claim (or has not started yet:
        // then it replays at once, which the assertions accept as well)
        waitForClaimInFlight();
        go.countDown();
        HttpResponse<String> a = first.get(120, TimeUnit.SECONDS);
        HttpResponse<String> b = retry.get(120, TimeUnit.SECONDS);
        assertEquals(201, a.statusCode(), a.body());
        assertEquals(201, b.statusCode(), b.body());
        assertEquals(a.body(), b.body());
        assertEquals("true", b.headers().firstValue("Idempotent-Replayed").orElse(""));
        assertEquals(1, runsOf(key));
        assertEquals(2, observed(key).size());
        assertEquals(Set.of(Event.Observed.NEW, Event.Observed.REPLAY), Set.copyOf(observed(key)));
    }

    /** Waits (up to 30 s) until another session of this database is active in idem_claim (the retry). */
    private static void waitForClaimInFlight() throws Exception {
        Connection c = pool.borrow();
        try (PreparedStatement ps = c.prepareStatement(
                 "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                 + "AND state = 'active' AND query LIKE '%idem_claim%' AND pid <> pg_backend_pid()")) {
            for (int i = 0; i < 300; i++) {
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    if (rs.getInt(1) > 0)
                        return;
                }
                Thread.sleep(100);
            }
        } finally {
            pool.release(c);
        }
    }
}
