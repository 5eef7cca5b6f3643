package payments;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import idempotency.Claimed;
import idempotency.ConnectionPool;
import idempotency.IdempotencyFilter;
import idempotency.Json;
import idempotency.Problem;
import java.io.IOException;
import java.math.BigDecimal;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Executors;
import java.util.regex.Pattern;

/**
 * A payments service on the JDK's HTTP server whose POST /payments honours
 * the Idempotency-Key header through the idempotency library's
 * {@link IdempotencyFilter} (clients/java).  README.md beside this file
 * explains it; ../conformance checks it over HTTP.
 *
 * <p>Environment: HOST (127.0.0.1), PORT (3000; 0 picks a free one), PGHOST
 * (TCP host, 127.0.0.1), PGPORT (5432), PGDATABASE, PGUSER, PGPASSWORD,
 * PGSSLMODE, or JDBC_URL instead of PGHOST/PGPORT/PGDATABASE; POOL_SIZE (20),
 * THREADS (100), LEASE_SECONDS (30), HEARTBEAT_SECONDS (LEASE_SECONDS / 3),
 * CARD_NETWORK_URL (http://127.0.0.1:4000), WAIT_FOR_DUPLICATES (true),
 * AWAIT_RESULT_SECONDS (3: in card mode a retry that arrives while the first
 * request is at the card network waits that long for its result, holding a
 * pool connection but no lock, and replays it instead of answering 409).
 *
 * <p>The scope is the Merchant-Id header, as in the other example services:
 * a stand-in for the authenticated caller (behind a gateway that sets it).
 */
public final class PaymentsServer {
    private static final Pattern CURRENCY = Pattern.compile("^[A-Z]{3}$");
    private static final BigDecimal MAX_AMOUNT = new BigDecimal("1000000000000");

    private final ConnectionPool pool;
    private final String cardNetwork;
    private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofSeconds(10)).build();

    private PaymentsServer(ConnectionPool pool, String cardNetwork) {
        this.pool = pool;
        this.cardNetwork = cardNetwork;
    }

    // ---- configuration -----------------------------------------------------

    private static String env(String name, String fallback) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? fallback : v;
    }

    private static double envNumber(String name, double fallback, double min) {
        String raw = System.getenv(name);
        if (raw == null || raw.isEmpty())
            return fallback;
        try {
            double v = Double.parseDouble(raw);
            if (v >= min)
                return v;
        } catch (NumberFormatException ignored) { /* below */ }
        System.err.printf("%s must be a number >= %s, not '%s'%n", name, min, raw);
        System.exit(2);
        return fallback;
    }

    private static Duration seconds(double s) {
        return Duration.ofMillis((long) (s * 1000));
    }

    public static void main(String[] args) throws Exception {
        String host = env("HOST", "127.0.0.1");
        int port = (int) envNumber("PORT", 3000, 0);
        double leaseSeconds = envNumber("LEASE_SECONDS", 30, 1);
        double beatSeconds = envNumber("HEARTBEAT_SECONDS", leaseSeconds / 3, 0.1);
        String url = env("JDBC_URL", "jdbc:postgresql://" + env("PGHOST", "127.0.0.1") + ":"
            + env("PGPORT", "5432") + "/" + URLEncoder.encode(env("PGDATABASE", env("PGUSER", "postgres")),
                                                                StandardCharsets.UTF_8));
        Properties props = new Properties();
        props.setProperty("user", env("PGUSER", System.getProperty("user.name")));
        if (System.getenv("PGPASSWORD") != null)
            props.setProperty("password", System.getenv("PGPASSWORD"));
        if (System.getenv("PGSSLMODE") != null)
            props.setProperty("sslmode", System.getenv("PGSSLMODE"));
        props.setProperty("ApplicationName", "payments-java");

        ConnectionPool pool = new ConnectionPool(url, props, (int) envNumber("POOL_SIZE", 20, 1));
        PaymentsServer app = new PaymentsServer(pool,
            env("CARD_NETWORK_URL", "http://127.0.0.1:4000").replaceAll("/+$", ""));
        IdempotencyFilter idempotency = new IdempotencyFilter(pool)
            .scopeFromHeader("Merchant-Id")
            .validate(PaymentsServer::validate)
            .committedWhen(PaymentsServer::cardMode)
            .lease(seconds(leaseSeconds))
            .heartbeatEvery(seconds(beatSeconds))
            .heartbeatConnections(new ConnectionPool(url, props, 2))
            .waitForDuplicates(Boolean.parseBoolean(env("WAIT_FOR_DUPLICATES", "true")))
            .awaitResult(seconds(envNumber("AWAIT_RESULT_SECONDS", 3, 0)));

        HttpServer server = HttpServer.create(new InetSocketAddress(host, port), 512);
        server.createContext("/", app::other);
        server.createContext("/payments", app::pay).getFilters().add(idempotency);
        server.setExecutor(Executors.newFixedThreadPool((int) envNumber("THREADS", 100, 1)));
        server.start();
        InetSocketAddress a = server.getAddress();
        System.out.println("listening on http://" + a.getAddress().getHostAddress() + ":" + a.getPort());
        System.out.flush();
    }

    // ---- routing and input ---------------------------------------------------

    private static void send(HttpExchange ex, int status, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "text/plain");
        ex.sendResponseHeaders(status, bytes.length);
        ex.getResponseBody().write(bytes);
        ex.close();
    }

    private static Problem notFound(HttpExchange ex) {
        return new Problem(404, "Not found",
                           "No route for " + ex.getRequestMethod() + " " + ex.getRequestURI().getPath() + ".");
    }

    /** GET /healthz, and 404 for anything but POST /payments. */
    private void other(HttpExchange ex) throws IOException {
        try {
            if (ex.getRequestURI().getPath().equals("/healthz") && ex.getRequestMethod().equals("GET")) {
                pool.release(pool.borrow());
                send(ex, 200, "ok");
            } else {
                notFound(ex).send(ex);
            }
        } catch (SQLException e) {
            Problem.from(e).send(ex);
        }
    }

    private static boolean cardMode(HttpExchange ex) {
        return "mode=card".equals(ex.getRequestURI().getRawQuery());
    }

    /** Before the claim: a bad request never leaves a key behind. */
    private static void validate(HttpExchange ex, String body) {
        if (!ex.getRequestURI().getPath().equals("/payments"))
            throw notFound(ex);
        String query = ex.getRequestURI().getRawQuery();
        if (query != null && !query.isEmpty() && !cardMode(ex))
            throw new Problem(400, "Unknown mode", "mode is either absent or card.");
        parsePayment(body);
    }

    /** A valid payment body. */
    private record Payment(String order, long amount, String currency) {}

    private static Payment parsePayment(String body) {
        Object doc;
        try {
            doc = Json.parse(body);
        } catch (Json.SyntaxError e) {
            throw new Problem(400, "Malformed JSON", "The body is not valid JSON.");
        }
        if (!(doc instanceof Map<?, ?> m))
            throw new Problem(422, "Invalid payment", "The body must be a JSON object.");
        if (!(m.get("order") instanceof String order) || order.isEmpty()
                || order.codePointCount(0, order.length()) > 64)
            throw new Problem(422, "Invalid payment", "\"order\" must be a string of 1 to 64 characters.");
        if (!(m.get("amount") instanceof BigDecimal amount) || amount.signum() <= 0
                || amount.compareTo(MAX_AMOUNT) > 0 || amount.stripTrailingZeros().scale() > 0)
            throw new Problem(422, "Invalid payment",
                "\"amount\" must be an integer from 1 to 1000000000000 (minor units).");
        Object currency = m.get("currency");
        if (m.containsKey("currency") && !(currency instanceof String cur && CURRENCY.matcher(cur).matches()))
            throw new Problem(422, "Invalid payment", "\"currency\", when given, must be three capital letters.");
        return new Payment(order, amount.longValueExact(), (String) currency);
    }

    /** POST /payments behind the filter: the claim is ours (NEW or RECLAIMED). */
    private void pay(HttpExchange ex) {
        if (!ex.getRequestMethod().equals("POST"))
            throw notFound(ex);
        Claimed claim = Claimed.of(ex);
        Payment payment = parsePayment(claim.body());
        try {
            if (claim.isCommitted())
                payWithCard(claim, payment);
            else
                claim.respond(201, insertPayment(claim.transaction(), claim.scope(), payment, null));
        } catch (SQLException e) {
            throw Problem.from(e);
        }
    }

    // ---- the database --------------------------------------------------------

    private static final String INSERT_PAYMENT = """
        WITH p AS (INSERT INTO payments (scope, order_id, amount, currency, authorization_id)
                   VALUES (?, ?, ?, ?, ?) RETURNING *)
        SELECT jsonb_strip_nulls(jsonb_build_object('payment_id', id, 'order', order_id, 'amount', amount,
                                 'currency', currency, 'authorization_id', authorization_id))::text
        FROM p""";

    /** Inserts the payment; returns the response as PostgreSQL's jsonb text. */
    private static String insertPayment(Connection c, String scope, Payment p, String authorization)
            throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(INSERT_PAYMENT)) {
            ps.setString(1, scope);
            ps.setString(2, p.order());
            ps.setLong(3, p.amount());
            ps.setString(4, p.currency());
            ps.setString(5, authorization);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getString(1);
            }
        }
    }

    // ---- card mode: across transactions ------------------------------------

    private static final class CardNetworkError extends Exception {
        CardNetworkError(String message) { super(message); }
    }

    private String cardCall(HttpRequest req, boolean notFoundOk) throws CardNetworkError {
        HttpResponse<String> r;
        try {
            r = http.send(req, HttpResponse.BodyHandlers.ofString());
        } catch (IOException e) {
            throw new CardNetworkError("card network unreachable: " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CardNetworkError("interrupted");
        }
        if (notFoundOk && r.statusCode() == 404)
            return null;
        if (r.statusCode() / 100 != 2)
            throw new CardNetworkError("card network answered " + r.statusCode());
        try {
            if (Json.parse(r.body()) instanceof Map<?, ?> m && m.get("authorization_id") instanceof String id)
                return id;
        } catch (Json.SyntaxError ignored) { /* below */ }
        throw new CardNetworkError("card network answered without an authorization_id");
    }

    /** Asks for an authorization (the card network counts it). */
    private String authorize(String scope, String key, long amount) throws CardNetworkError {
        String json = "{\"merchant\":" + Json.quote(scope) + ",\"idempotency_key\":" + Json.quote(key)
            + ",\"amount\":" + amount + "}";
        return cardCall(HttpRequest.newBuilder(URI.create(cardNetwork + "/authorizations"))
            .timeout(Duration.ofSeconds(60)).header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json)).build(), false);
    }

    /** The authorization made for this key, or null (authorizes nothing). */
    private String lookUpAuthorization(String scope, String key) throws CardNetworkError {
        String q = "merchant=" + URLEncoder.encode(scope, StandardCharsets.UTF_8)
            + "&idempotency_key=" + URLEncoder.encode(key, StandardCharsets.UTF_8);
        return cardCall(HttpRequest.newBuilder(URI.create(cardNetwork + "/authorizations?" + q))
            .timeout(Duration.ofSeconds(60)).GET().build(), true);
    }

    // Authorize the card unless an earlier attempt did, then insert the
    // payment in the claim's transaction (the filter completes the key in it
    // with the token, fenced).  Recovery points: "authorizing" before the
    // card call (a retry that finds it asks the card network whether the call
    // went through), "authorized:<id>" after it (a retry uses the id and
    // calls nothing).  No pool connection is held during the card call; the
    // filter's heartbeats keep the lease.  A card network error is a 502: the
    // filter records the key failed and retryable, and the next request with
    // it takes it over (and finds the recovery point).
    private void payWithCard(Claimed claim, Payment payment) throws SQLException {
        String key = claim.key();
        String scope = claim.scope();
        String authorization = null;
        String point = claim.recoveryPoint() == null ? "" : claim.recoveryPoint();
        try {
            if (point.startsWith("authorized:")) {
                authorization = point.substring("authorized:".length());
            } else {
                if (point.equals("authorizing"))
                    authorization = lookUpAuthorization(scope, key);
                if (authorization == null) {
                    claim.checkpoint("authorizing"); // also a fence: IK002 if taken over
                    authorization = authorize(scope, key, payment.amount());
                }
                claim.checkpoint("authorized:" + authorization);
            }
        } catch (CardNetworkError e) {
            System.err.println(e.getMessage());
            throw new Problem(502, "Card network unavailable", "Retry with the same Idempotency-Key.")
                .header("Retry-After", "1");
        }
        claim.respond(201, insertPayment(claim.transaction(), scope, payment, authorization));
    }

    static {
        Locale.setDefault(Locale.ROOT);
    }
}
