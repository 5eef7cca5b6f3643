package idempotency;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jakarta.servlet.Filter;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.util.stream.Stream;
import org.apache.catalina.Context;
import org.apache.catalina.LifecycleException;
import org.apache.catalina.LifecycleState;
import org.apache.catalina.startup.Tomcat;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * IdempotencyServletFilter in a real servlet container (embedded Tomcat,
 * Debian's libtomcat10-embed-java), registered as an application does it
 * (ServletContext.addFilter) in front of a payment servlet, and a real
 * database: the HTTP contract's tests (FilterContract), a Problem inside a
 * ServletException, and the jar without the servlet API.
 */
class IdempotencyServletFilterTest extends FilterContract {
    /** Tomcat's loggers, held (java.util.logging keeps them weakly): errors only. */
    private static final Logger TOMCAT_LOG = Logger.getLogger("org.apache");
    private static Tomcat tomcat;
    private static Path base;
    private static ConnectionPool pool;
    private static final List<IdempotencyServletFilter> filters = new CopyOnWriteArrayList<>();
    /**
     * By Idempotency-Key: what a filter in front of /default found in the
     * claim's attribute after it (the answer is sent before, so the test waits).
     */
    private static final Map<String, CompletableFuture<String>> after = new ConcurrentHashMap<>();

    @BeforeAll
    static void start() throws IOException, LifecycleException, SQLException {
        TOMCAT_LOG.setLevel(Level.SEVERE);
        pool = new ConnectionPool(databaseUrl(), databaseUser(), 8);
        // a connection now, on this thread: DriverManager finds its drivers at its first use, with
        // the thread's context class loader, which on a request thread is the web application's
        pool.release(pool.borrow());
        PGSimpleDataSource heartbeatSource = new PGSimpleDataSource(); // a DataSource, as Spring Boot has
        heartbeatSource.setUrl(databaseUrl());
        heartbeatSource.setUser(databaseUser().getProperty("user"));
        heartbeatSource.setPassword(databaseUser().getProperty("password"));
        Map<String, IdempotencyServletFilter> mounted = Map.of(
            "/default", filter(),
            "/nowait", filter().waitForDuplicates(false),
            "/header", filter().scopeFromHeader("Merchant-Id"),
            "/small", filter().maxBody(100),
            "/card", filter().committedWhen(r -> true).lease(Duration.ofSeconds(30))
                              .heartbeatConnections(ConnectionSource.of(heartbeatSource)),
            "/await", filter().committedWhen(r -> "card".equals(r.getParameter("mode")))
                              .awaitResult(Duration.ofSeconds(60)));
        base = Files.createTempDirectory("idempotency-tomcat");
        tomcat = new Tomcat();
        tomcat.setBaseDir(base.toString());
        tomcat.setHostname("127.0.0.1");
        tomcat.setPort(0);
        tomcat.getConnector().setProperty("address", "127.0.0.1");
        Context ctx = tomcat.addContext("", null);
        // as an application registers it: ServletContext.addFilter, in front of the payment servlet
        ctx.addServletContainerInitializer((classes, sc) -> {
            sc.addServlet("payments", new Payments()).addMapping("/");
            // in front of the idempotency filter on /default: what the request holds once it returns
            Filter front = (request, response, chain) -> {
                chain.doFilter(request, response);
                if (request instanceof HttpServletRequest http && http.getHeader("Idempotency-Key") != null)
                    after.computeIfAbsent(http.getHeader("Idempotency-Key"), k -> new CompletableFuture<>())
                        .complete(String.valueOf(request.getAttribute(IdempotencyServletFilter.CLAIM)));
            };
            sc.addFilter("front", front).addMappingForUrlPatterns(null, false, "/default");
            for (String path : mounts)
                sc.addFilter("idempotency" + path, mounted.get(path)).addMappingForUrlPatterns(null, false, path);
        }, null);
        tomcat.start();
        // a filter that fails to start leaves the context stopped (every answer 404), not an exception
        if (ctx.getState() != LifecycleState.STARTED)
            throw new IllegalStateException("the Tomcat context did not start: " + ctx.getState());
    }

    @AfterAll
    static void stop() throws LifecycleException, IOException {
        tomcat.stop();
        tomcat.destroy();
        filters.forEach(IdempotencyServletFilter::close);
        try (Stream<Path> files = Files.walk(base)) {
            files.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        }
    }

    private static IdempotencyServletFilter filter() {
        IdempotencyServletFilter f = new IdempotencyServletFilter(pool)
            .validate((request, body) -> validate(body)).onOutcome(HOOK);
        filters.add(f);
        return f;
    }

    @Override
    URI uri(String path) {
        return URI.create("http://127.0.0.1:" + tomcat.getConnector().getLocalPort() + path);
    }

    @Override
    ConnectionSource pool() {
        return pool;
    }

    /**
     * The payment servlet: GET "ok"; else FilterContract.pay, with the body
     * it reads from the request, as servlets do.  With "wrapped" in the body
     * a failure (a Problem) is thrown inside a ServletException.
     */
    private static final class Payments extends HttpServlet {
        private static final long serialVersionUID = 1L;

        @Override
        protected void doGet(HttpServletRequest request, HttpServletResponse response) throws IOException {
            response.getWriter().write("ok");
        }

        @Override
        protected void doPost(HttpServletRequest request, HttpServletResponse response)
                throws IOException, ServletException {
            Claimed claim = IdempotencyServletFilter.claimOf(request);
            String read = new String(request.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            int run;
            try {
                run = pay(claim, read);
            } catch (SQLException e) {
                throw Problem.from(e);
            } catch (Problem p) {
                if (read.contains("\"wrapped\""))
                    throw new ServletException(p);
                throw p;
            }
            if (read.contains("\"self\"")) {
                response.setStatus(202);
                response.getWriter().write("{\"self\": " + run + "}");
            }
        }
    }

    @Test
    void aProblemInAServletExceptionIsSentAsTheProblem() throws Exception {
        assertAFailureLeavesTheKeyFree("{\"fail\": 1, \"wrapped\": 1}");
    }

    /** The claim's attribute is gone once the filter returns: its transaction has ended. */
    @Test
    void theClaimIsNotLeftOnTheRequest() throws Exception {
        String key = key();
        assertEquals(201, send(post("/default", key, "{\"amount\": 10}")).statusCode());
        assertEquals("null", after.computeIfAbsent(key, k -> new CompletableFuture<>()).get(30, TimeUnit.SECONDS));
    }

    /**
     * The jar without the servlet API: a JVM of its own, with only the jar,
     * the tests' classes and pgjdbc on its class path, loads every class of
     * the jar but IdempotencyServletFilter's and serves a payment through
     * IdempotencyFilter (WithoutServletApi).
     */
    @Test
    void theJarWorksWithoutTheServletApi() throws Exception {
        String cp = String.join(File.pathSeparator, where(IdempotencyFilter.class), where(WithoutServletApi.class),
                                where(org.postgresql.Driver.class));
        Path out = Files.createTempFile("idempotency-no-servlet", ".log");
        try {
            Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                                           "-cp", cp, WithoutServletApi.class.getName())
                .redirectErrorStream(true).redirectOutput(out.toFile()).start();
            assertTrue(p.waitFor(120, TimeUnit.SECONDS), "timed out");
            String log = Files.readString(out);
            assertEquals(0, p.exitValue(), log);
            assertTrue(log.contains("201 replayed"), log);
        } finally {
            Files.delete(out);
        }
    }

    private static String where(Class<?> c) throws URISyntaxException {
        return Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
    }
}
