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
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
