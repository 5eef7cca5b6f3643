package idempotency;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

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

    private static void answer(HttpExchange ex, int status, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        ex.sendResponseHeaders(status, bytes.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(bytes);
        }
    }
}
