package idempotency;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * IdempotencyFilter on a real HTTP server (the JDK's) and a real database:
 * the HTTP contract's tests (FilterContract).
 */
class IdempotencyFilterTest extends FilterContract {
    private static HttpServer server;
    private static ExecutorService threads;
    private static ConnectionPool pool;
    private static ConnectionPool onePool;
    private static CommitDroppingProxy proxy;
    private static final List<IdempotencyFilter> filters = new CopyOnWriteArrayList<>();

    @BeforeAll
    static void start() throws IOException {
        pool = new ConnectionPool(databaseUrl(), databaseUser(), 8);
        Map<String, IdempotencyFilter> mounted = Map.of(
            "/default", filter(),
            "/nowait", filter().waitForDuplicates(false),
            "/header", filter().scopeFromHeader("Merchant-Id"),
            "/small", filter().maxBody(100),
            "/card", filter().committedWhen(ex -> true).lease(Duration.ofSeconds(30))
                              .heartbeatConnections(new ConnectionPool(databaseUrl(), databaseUser(), 1)),
            "/await", filter().committedWhen(ex -> "mode=card".equals(ex.getRequestURI().getRawQuery()))
                              .awaitResult(Duration.ofSeconds(60)));
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 50);
        for (String path : mounts)
            server.createContext(path, IdempotencyFilterTest::handle).getFilters().add(mounted.get(path));
        var two = server.createContext("/two", IdempotencyFilterTest::handleTwo);
        two.getFilters().add(TENANT);
        two.getFilters().add(new IdempotencyFilter(pool));
        var attribute = server.createContext("/attribute", IdempotencyFilterTest::handleOne);
        attribute.getFilters().add(Filter.beforeHandler("scope as an attribute",
            ex -> ex.setAttribute(IdempotencyFilter.SCOPE_ATTRIBUTE, ex.getRequestHeaders().getFirst("Tenant"))));
        attribute.getFilters().add(new IdempotencyFilter(pool));
        var wrapped = server.createContext("/wrapped", IdempotencyFilterTest::handleOne);
        wrapped.getFilters().add(TENANT);
        wrapped.getFilters().add(new IdempotencyFilter(pool));
        wrapped.getFilters().add(new Filter() {
            @Override
            public void doFilter(HttpExchange ex, Chain chain) throws IOException {
                chain.doFilter(new Wrapper(ex));
            }

            @Override
            public String description() {
                return "a wrapper of the exchange, after the idempotency filter";
            }
        });
        // one instance whose request pool has one connection (kept busy past the lease
        // by its handler), another on the shared pool: the same keys
        onePool = new ConnectionPool(databaseUrl(), databaseUser(), 1);
        IdempotencyFilter busy = new IdempotencyFilter(onePool).committedWhen(ex -> true)
            .lease(Duration.ofSeconds(3)).heartbeatEvery(Duration.ofMillis(250))
            .heartbeatConnections(new ConnectionPool(databaseUrl(), databaseUser(), 1)).onOutcome(HOOK);
        IdempotencyFilter other = new IdempotencyFilter(pool).committedWhen(ex -> true)
            .lease(Duration.ofSeconds(3)).awaitResult(Duration.ofSeconds(30)).onOutcome(HOOK);
        // a committed claim whose connections go through a proxy that drops the link during COMMIT
        proxy = new CommitDroppingProxy(System.getenv().getOrDefault("PGHOST", "127.0.0.1"),
                                        Integer.parseInt(System.getenv().getOrDefault("PGPORT", "5432")));
        IdempotencyFilter dropped = new IdempotencyFilter(new ConnectionPool(
                "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/" + System.getenv().getOrDefault("PGDATABASE", "postgres"),
                databaseUser(), 4))
            .committedWhen(ex -> true).heartbeatConnections(new ConnectionPool(databaseUrl(), databaseUser(), 1))
            .onOutcome(HOOK);
        filters.addAll(List.of(busy, other, dropped));
        server.createContext("/busy", IdempotencyFilterTest::handleRun).getFilters().add(busy);
        server.createContext("/busy-other", IdempotencyFilterTest::handleRun).getFilters().add(other);
        server.createContext("/dropped", IdempotencyFilterTest::handleRun).getFilters().add(dropped);
        threads = Executors.newCachedThreadPool();
        server.setExecutor(threads);
        server.start();
    }

    @AfterAll
    static void stop() throws IOException {
        proxy.close();
        server.stop(0);
        threads.shutdownNow();
        filters.forEach(IdempotencyFilter::close);
    }

    private static IdempotencyFilter filter() {
        IdempotencyFilter f = new IdempotencyFilter(pool).validate((ex, body) -> validate(body)).onOutcome(HOOK);
        filters.add(f);
        return f;
    }

    @Override
    URI uri(String path) {
        return URI.create("http://127.0.0.1:" + server.getAddress().getPort() + path);
    }

    @Override
    ConnectionSource pool() {
        return pool;
    }

    /** The handler: GET "ok"; else FilterContract.pay, with the body it reads from the exchange. */
    private static void handle(HttpExchange ex) throws IOException {
        if ("GET".equals(ex.getRequestMethod())) {
            answer(ex, 200, "ok");
            return;
        }
        Claimed claim = Claimed.of(ex);
        String read;
        try (InputStream in = ex.getRequestBody()) {
            read = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        int run;
        try {
            run = pay(claim, read);
        } catch (SQLException e) {
            throw Problem.from(e);
        }
        if (read.contains("\"self\""))
            answer(ex, 202, "{\"self\": " + run + "}");
    }

    /**
     * Answers 201 {"run": the key's run}.  On /busy it first takes the
     * request pool's only connection and gives it back 7 s after it returned:
     * the answer waits that long for a connection to be recorded on.
     */
    private static void handleRun(HttpExchange ex) throws IOException {
        Claimed claim = Claimed.of(ex);
        try (InputStream in = ex.getRequestBody()) {
            in.readAllBytes();
        }
        int run = runs.computeIfAbsent(claim.key(), k -> new AtomicInteger()).incrementAndGet();
        if (ex.getHttpContext().getPath().equals("/busy")) {
            Connection c;
            try {
                c = onePool.borrow();
            } catch (SQLException e) {
                throw Problem.from(e);
            }
            threads.execute(() -> {
                try {
                    Thread.sleep(7000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    onePool.release(c);
                }
            });
        }
        claim.respond(201, "{\"run\": " + run + "}");
    }

    /**
     * A committed claim's heartbeats go on while its answer waits for a pool
     * connection to be recorded on (7 s, past its 3 s lease): a retry at
     * another instance meanwhile finds the key in flight, waits for the
     * result and replays it; it does not take the key over and charge again.
     */
    @Test
    void heartbeatsGoOnUntilTheAnswerIsRecorded() throws Exception {
        String key = key();
        CompletableFuture<HttpResponse<String>> first = sendAsync(post("/busy", key, "{}"));
        for (int i = 0; i < 400 && runsOf(key) == 0; i++)
            Thread.sleep(25);
        assertEquals(1, runsOf(key));
        Thread.sleep(4500); // the handler has returned; its answer waits for the pool, past the lease
        HttpResponse<String> retry = send(post("/busy-other", key, "{}"));
        HttpResponse<String> a = first.get(120, TimeUnit.SECONDS);
        assertEquals(201, a.statusCode(), a.body());
        assertEquals("{\"run\": 1}", a.body());
        assertEquals(201, retry.statusCode(), retry.body());
        assertEquals(a.body(), retry.body());
        assertEquals("true", replayed(retry));
        assertEquals(1, runsOf(key));
    }

    /**
     * The link lost during the COMMIT that records the answer: it may have
     * committed (here it did), so the answer is 503 Outcome unknown with
     * Retry-After, not "not processed"; the retry with the same key replays
     * the answer, the handler ran once.
     */
    @Test
    void aCommitWhoseLinkIsLostIsOutcomeUnknown() throws Exception {
        String key = key();
        proxy.armed.set(true);
        HttpResponse<String> first;
        try {
            first = send(post("/dropped", key, "{}"));
        } finally {
            proxy.armed.set(false);
        }
        assertProblem(first, 503);
        assertTrue(first.body().contains("\"title\":\"Outcome unknown\""), first.body());
        assertTrue(first.body().contains("The request may have been processed. Retry it with the same "
                                         + "Idempotency-Key to get its result."), first.body());
        assertEquals("1", first.headers().firstValue("Retry-After").orElse(""));
        HttpResponse<String> retry = send(post("/dropped", key, "{}"));
        assertEquals(201, retry.statusCode(), retry.body());
        assertEquals("{\"run\": 1}", retry.body());
        assertEquals("true", replayed(retry));
        assertEquals(1, runsOf(key));
        assertEquals(List.of(Event.Observed.ERROR, Event.Observed.REPLAY), observed(key));
        assertTrue(FilterCore.outcomeUnknown(new SQLException("lost", "08006")));
        assertTrue(FilterCore.outcomeUnknown(new SQLException("lost")));
        assertTrue(FilterCore.outcomeUnknown(new SQLException("shutdown", "57P01")));
        assertFalse(FilterCore.outcomeUnknown(new SQLException("serialization", "40001")));
    }

    /** An authentication filter in front: the caller's scope from a header (here, for the test). */
    private static final Filter TENANT = Filter.beforeHandler("tenant",
        ex -> IdempotencyFilter.setScope(ex, ex.getRequestHeaders().getFirst("Tenant")));

    /** Both requests of handleTwo's test are claimed before either handler asks for its claim. */
    private static final CyclicBarrier BOTH = new CyclicBarrier(2);

    /** An exchange passed on as another object (as the JDK 18+'s Filter.adaptRequest does). */
    private static final class Wrapper extends HttpExchange {
        private final HttpExchange ex;

        Wrapper(HttpExchange ex) {
            this.ex = ex;
        }

        @Override public com.sun.net.httpserver.Headers getRequestHeaders() { return ex.getRequestHeaders(); }
        @Override public com.sun.net.httpserver.Headers getResponseHeaders() { return ex.getResponseHeaders(); }
        @Override public URI getRequestURI() { return ex.getRequestURI(); }
        @Override public String getRequestMethod() { return ex.getRequestMethod(); }
        @Override public com.sun.net.httpserver.HttpContext getHttpContext() { return ex.getHttpContext(); }
        @Override public void close() { ex.close(); }
        @Override public InputStream getRequestBody() { return ex.getRequestBody(); }
        @Override public OutputStream getResponseBody() { return ex.getResponseBody(); }
        @Override public void sendResponseHeaders(int code, long length) throws IOException { ex.sendResponseHeaders(code, length); }
        @Override public InetSocketAddress getRemoteAddress() { return ex.getRemoteAddress(); }
        @Override public int getResponseCode() { return ex.getResponseCode(); }
        @Override public InetSocketAddress getLocalAddress() { return ex.getLocalAddress(); }
        @Override public String getProtocol() { return ex.getProtocol(); }
        @Override public Object getAttribute(String name) { return ex.getAttribute(name); }
        @Override public void setAttribute(String name, Object value) { ex.setAttribute(name, value); }
        @Override public void setStreams(InputStream i, OutputStream o) { ex.setStreams(i, o); }
        @Override public com.sun.net.httpserver.HttpPrincipal getPrincipal() { return ex.getPrincipal(); }
    }

    /** The exchanges handleTwo saw: the filter keeps no claim of theirs once they are answered. */
    private static final List<HttpExchange> SEEN = new CopyOnWriteArrayList<>();

    /** The claim's key and scope, asked for once another request's claim was made too. */
    private static void handleTwo(HttpExchange ex) throws IOException {
        SEEN.add(ex);
        try {
            BOTH.await(20, TimeUnit.SECONDS);
        } catch (Exception e) {
            answer(ex, 500, "the other request never came: " + e);
            return;
        }
        Claimed claim = Claimed.of(ex);
        answer(ex, 200, claim.key() + " " + claim.scope());
    }

    /** The claim's key and scope. */
    private static void handleOne(HttpExchange ex) throws IOException {
        Claimed claim = Claimed.of(ex);
        answer(ex, 200, claim.key() + " " + claim.scope());
    }

    private static HttpResponse<String> post(HttpClient client, String path, String key, String tenant) {
        HttpRequest req = HttpRequest.newBuilder(uriOf(path)).header("Content-Type", "application/json")
            .header("Idempotency-Key", key).header("Tenant", tenant)
            .timeout(Duration.ofSeconds(60)).POST(HttpRequest.BodyPublishers.ofString("{}")).build();
        return client.sendAsync(req, HttpResponse.BodyHandlers.ofString()).join();
    }

    private static URI uriOf(String path) {
        return URI.create("http://127.0.0.1:" + server.getAddress().getPort() + path);
    }

    /**
     * Two requests at once, of two tenants, each get their own claim and
     * scope: the JDK's HttpServer shares exchange attributes among all the
     * requests of a context, so neither may travel in them.
     */
    @Test
    void concurrentRequestsKeepTheirOwnClaimAndScope() throws InterruptedException {
        BOTH.reset();
        SEEN.clear();
        HttpClient client = HttpClient.newHttpClient();
        String a = "two-a-" + System.nanoTime(), b = "two-b-" + System.nanoTime();
        var ra = CompletableFuture.supplyAsync(() -> post(client, "/two", a, "tenant-a"));
        var rb = CompletableFuture.supplyAsync(() -> post(client, "/two", b, "tenant-b"));
        assertEquals(a + " tenant-a", ra.join().body());
        assertEquals(b + " tenant-b", rb.join().body());
        assertEquals(2, SEEN.size());
        // the answer reaches the client before the filter, after it, takes
        // the claim off: wait for that, not forever (seen under load)
        for (HttpExchange ex : SEEN) {
            for (int i = 0; i < 400 && IdempotencyFilter.claimOf(ex) != null; i++)
                Thread.sleep(25);
            assertNull(IdempotencyFilter.claimOf(ex), "a claim kept after its request was answered");
        }
    }

    /** A filter after this one that wraps the exchange: the handler still gets its claim. */
    @Test
    void aWrappedExchangeGetsItsClaim() {
        String k = "wrapped-" + System.nanoTime();
        HttpResponse<String> r = post(HttpClient.newHttpClient(), "/wrapped", k, "tenant-w");
        assertEquals(200, r.statusCode(), r.body());
        assertEquals(k + " tenant-w", r.body());
    }

    /** A scope set as an exchange attribute (every request's at once) is refused, not used. */
    @Test
    void scopeAsAnExchangeAttributeIsRefused() throws SQLException {
        String k = "attr-" + System.nanoTime();
        HttpResponse<String> r = post(HttpClient.newHttpClient(), "/attribute", k, "t");
        assertEquals(500, r.statusCode(), r.body());
        assertTrue(r.body().contains("\"Internal error\""), r.body());
        var c = pool.borrow();
        try (var ps = c.prepareStatement("SELECT count(*) FROM idem_lookup(?, 't')")) {
            ps.setString(1, k);
            try (var rs = ps.executeQuery()) {
                rs.next();
                assertEquals(0, rs.getInt(1), "the key was claimed");
            }
        } finally {
            pool.release(c);
        }
    }

    private static void answer(HttpExchange ex, int status, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        ex.sendResponseHeaders(status, bytes.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(bytes);
        }
    }
}
