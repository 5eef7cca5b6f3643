package payments;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import idempotency.Idempotency;
import idempotency.Idempotency.Claim;
import idempotency.IdempotencyException;
import java.io.IOException;
import java.io.InputStream;
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
 * the Idempotency-Key header with the idempotency extension (through the
 * {@link Idempotency} JDBC class).  README.md beside this file explains it;
 * ../conformance checks it over HTTP.
 *
 * <p>Environment: HOST (127.0.0.1), PORT (3000; 0 picks a free one), PGHOST
 * (TCP host, 127.0.0.1), PGPORT (5432), PGDATABASE, PGUSER, PGPASSWORD,
 * PGSSLMODE, or JDBC_URL instead of PGHOST/PGPORT/PGDATABASE; POOL_SIZE (20),
 * THREADS (100), LEASE_SECONDS (30), HEARTBEAT_SECONDS (LEASE_SECONDS / 3),
 * CARD_NETWORK_URL (http://127.0.0.1:4000), WAIT_FOR_DUPLICATES (true),
 * AWAIT_RESULT_SECONDS (3: in card mode a retry that arrives while the first
 * request is at the card network waits that long for its result, holding a
 * pool connection but no lock, and replays it instead of answering 409).
 */
public final class PaymentsServer {
    private static final int MAX_BODY = 64 * 1024;
    private static final Pattern JSON_TYPE = Pattern.compile("(?i)^application/json\\s*(;.*)?$");
    private static final Pattern CURRENCY = Pattern.compile("^[A-Z]{3}$");
    private static final BigDecimal MAX_AMOUNT = new BigDecimal("1000000000000");

    private final ConnectionPool pool;
    private final Heartbeats heartbeats;
    private final Duration lease;
    private final boolean waitForDuplicates;
    private final Duration awaitResult;
    private final String cardNetwork;
    private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofSeconds(10)).build();

    private PaymentsServer(ConnectionPool pool, Heartbeats heartbeats, Duration lease, boolean wait,
                           Duration awaitResult, String cardNetwork) {
        this.pool = pool;
        this.heartbeats = heartbeats;
        this.lease = lease;
        this.waitForDuplicates = wait;
        this.awaitResult = awaitResult;
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

        Duration lease = Duration.ofMillis((long) (leaseSeconds * 1000));
        PaymentsServer app = new PaymentsServer(
            new ConnectionPool(url, props, (int) envNumber("POOL_SIZE", 20, 1)),
            new Heartbeats(url, props, lease, Duration.ofMillis((long) (beatSeconds * 1000))),
            lease, Boolean.parseBoolean(env("WAIT_FOR_DUPLICATES", "true")),
            Duration.ofMillis((long) (envNumber("AWAIT_RESULT_SECONDS", 3, 0) * 1000)),
            env("CARD_NETWORK_URL", "http://127.0.0.1:4000").replaceAll("/+$", ""));

        HttpServer server = HttpServer.create(new InetSocketAddress(host, port), 512);
        server.createContext("/", app::route);
        server.setExecutor(Executors.newFixedThreadPool((int) envNumber("THREADS", 100, 1)));
        server.start();
        InetSocketAddress a = server.getAddress();
        System.out.println("listening on http://" + a.getAddress().getHostAddress() + ":" + a.getPort());
        System.out.flush();
    }

    // ---- answers -------------------------------------------------------------

    /** A client error found before anything was claimed. */
    private static final class Problem extends Exception {
        final int status;
        final String title;
        final String[] headers;

        Problem(int status, String title, String detail, String... headers) {
            super(detail);
            this.status = status;
            this.title = title;
            this.headers = headers;
        }
    }

    private static void send(HttpExchange ex, int status, String contentType, String body) throws IOException {
        if (body == null) {
            ex.sendResponseHeaders(status, -1);
        } else {
            byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", contentType);
            ex.sendResponseHeaders(status, bytes.length);
            ex.getResponseBody().write(bytes);
        }
        ex.close();
    }

    private static void sendProblem(HttpExchange ex, Problem p) throws IOException {
        for (int i = 0; i + 1 < p.headers.length; i += 2)
            ex.getResponseHeaders().set(p.headers[i], p.headers[i + 1]);
        send(ex, p.status, "application/problem+json",
             "{\"type\":\"about:blank\",\"title\":" + Json.quote(p.title) + ",\"status\":" + p.status
             + ",\"detail\":" + Json.quote(p.getMessage()) + "}");
    }

    /** A body as PostgreSQL stored it (jsonb text): the same bytes on every replay. */
    private static void sendStored(HttpExchange ex, int code, String text, boolean replayed) throws IOException {
        if (replayed)
            ex.getResponseHeaders().set("Idempotent-Replayed", "true");
        send(ex, code, "application/json", text);
    }

    private static void answerExisting(HttpExchange ex, Claim claim) throws IOException {
        if (claim.outcome() == Idempotency.Outcome.REPLAY) {
            sendStored(ex, claim.responseCode(), claim.response(), true);
            return;
        }
        long after = claim.retryAfter() == null ? 1 : Math.max(1, claim.retryAfter().toSeconds()
            + (claim.retryAfter().toMillisPart() > 0 ? 1 : 0));
        sendProblem(ex, new Problem(409, "A request with this Idempotency-Key is being processed",
            claim.outcome() == Idempotency.Outcome.STALE
                ? "An earlier attempt stopped midway; an operator must settle it."
                : "Retry after the time in Retry-After.",
            "Retry-After", Long.toString(after)));
    }

    /** The extension's errors by SQLSTATE; anything else is logged and 500. */
    private static Problem problemFor(SQLException e) {
        if (e instanceof IdempotencyException.RequestMismatch)
            return new Problem(422, "Idempotency-Key reused with a different request body", detail(e));
        if (e instanceof IdempotencyException.InvalidKey)
            return new Problem(400, "Invalid Idempotency-Key or Merchant-Id", e.getMessage());
        if (e instanceof IdempotencyException.StaleToken || e instanceof IdempotencyException.NotProcessing)
            return new Problem(409, "This attempt lost its claim on the Idempotency-Key",
                "Another attempt took the key over; retry to get its result.", "Retry-After", "1");
        if (e instanceof IdempotencyException.ReadOnly)
            return new Problem(503, "Database is read-only", "Retry later.", "Retry-After", "1");
        if (e.getSQLState() != null && e.getSQLState().startsWith("22"))
            return new Problem(400, "Invalid request", "PostgreSQL did not accept the body.");
        e.printStackTrace();
        return new Problem(500, "Internal error", "The payment was not made.");
    }

    private static String detail(SQLException e) {
        Throwable cause = e.getCause();
        if (cause instanceof org.postgresql.util.PSQLException p && p.getServerErrorMessage() != null
                && p.getServerErrorMessage().getDetail() != null)
            return p.getServerErrorMessage().getDetail();
        return e.getMessage();
    }

    // ---- routing and input ---------------------------------------------------

    private void route(HttpExchange ex) throws IOException {
        try {
            String path = ex.getRequestURI().getPath();
            if (path.equals("/healthz") && ex.getRequestMethod().equals("GET")) {
                Connection c = pool.borrow();
                pool.release(c);
                send(ex, 200, "text/plain", "ok");
            } else if (path.equals("/payments") && ex.getRequestMethod().equals("POST")) {
                pay(ex);
            } else {
                throw new Problem(404, "Not found", "No route for " + ex.getRequestMethod() + " " + path + ".");
            }
        } catch (Problem p) {
            sendProblem(ex, p);
        } catch (SQLException e) {
            sendProblem(ex, problemFor(e));
        } catch (IOException e) {
            ex.close(); // the client went away
        } catch (RuntimeException e) {
            e.printStackTrace();
            sendProblem(ex, new Problem(500, "Internal error", "The request was not processed."));
        }
    }

    /** A valid payment body. */
    private record Payment(String order, long amount, String currency) {}

    private static Payment parsePayment(String body) throws Problem {
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

    // Checks everything before any key is claimed: a bad request never
    // leaves a key behind.
    private void pay(HttpExchange ex) throws IOException, SQLException, Problem {
        String key = ex.getRequestHeaders().getFirst("Idempotency-Key");
        if (key == null || key.isEmpty())
            throw new Problem(400, "Idempotency-Key header missing", "POST /payments needs an Idempotency-Key header.");
        String query = ex.getRequestURI().getRawQuery();
        boolean card = "mode=card".equals(query);
        if (query != null && !query.isEmpty() && !card)
            throw new Problem(400, "Unknown mode", "mode is either absent or card.");
        String type = ex.getRequestHeaders().getFirst("Content-Type");
        if (type == null || !JSON_TYPE.matcher(type).matches())
            throw new Problem(415, "Unsupported Content-Type", "Send the payment as application/json.");
        byte[] raw;
        try (InputStream in = ex.getRequestBody()) {
            raw = in.readNBytes(MAX_BODY + 1);
        }
        if (raw.length > MAX_BODY)
            throw new Problem(413, "Body too large", "At most " + MAX_BODY + " bytes.");
        String body = new String(raw, StandardCharsets.UTF_8);
        Payment payment = parsePayment(body);
        String scope = ex.getRequestHeaders().getFirst("Merchant-Id");
        if (scope == null)
            scope = "";
        if (card)
            payWithCard(ex, key, scope, body, payment);
        else
            payInTransaction(ex, key, scope, body, payment);
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

    // ---- default mode: one transaction -------------------------------------

    // Claim, pay, record, commit.  A duplicate of a request still in its
    // transaction waits for it (holding its pool connection), then replays.
    private void payInTransaction(HttpExchange ex, String key, String scope, String body, Payment payment)
            throws IOException, SQLException {
        Connection c = pool.borrow();
        String response;
        try {
            c.setAutoCommit(false);
            Claim claim = Idempotency.claim(c, key, body, scope, lease, waitForDuplicates);
            if (!claim.mine()) {
                c.commit();
                answerExisting(ex, claim);
                return;
            }
            response = insertPayment(c, scope, payment, null);
            Idempotency.complete(c, key, 201, response, scope, null);
            c.commit();
        } finally {
            endTransaction(c);
        }
        sendStored(ex, 201, response, false);
    }

    private void endTransaction(Connection c) {
        try {
            if (!c.getAutoCommit()) {
                c.rollback(); // nothing left to roll back after a commit
                c.setAutoCommit(true);
            }
        } catch (SQLException e) {
            try { c.close(); } catch (SQLException ignored) { /* broken */ }
        }
        pool.release(c);
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

    private void checkpoint(String key, String scope, long token, String point) throws SQLException {
        Connection c = pool.borrow();
        try {
            Idempotency.checkpoint(c, key, point, scope, token);
        } finally {
            pool.release(c);
        }
    }

    // Claim (committed, with a lease), authorize the card unless an earlier
    // attempt did, then insert the payment and complete with the token in
    // one transaction.  Recovery points: "authorizing" before the card call
    // (a retry that finds it asks the card network whether the call went
    // through), "authorized:<id>" after it (a retry uses the id and calls
    // nothing).  No pool connection is held during the card call.
    private void payWithCard(HttpExchange ex, String key, String scope, String body, Payment payment)
            throws IOException, SQLException {
        Claim claim;
        Connection c = pool.borrow();
        try {
            // autocommit: committed; a retry during the card call awaits its result
            claim = Idempotency.claim(c, key, body, scope, lease, true, awaitResult);
        } finally {
            pool.release(c);
        }
        if (!claim.mine()) {
            answerExisting(ex, claim);
            return;
        }
        long token = claim.token();
        String response;
        Heartbeats.Handle beat = heartbeats.hold(key, scope, token);
        try {
            String authorization = null;
            String point = claim.recoveryPoint() == null ? "" : claim.recoveryPoint();
            if (point.startsWith("authorized:")) {
                authorization = point.substring("authorized:".length());
            } else {
                if (point.equals("authorizing"))
                    authorization = lookUpAuthorization(scope, key);
                if (authorization == null) {
                    checkpoint(key, scope, token, "authorizing"); // also a fence: IK002 if taken over
                    authorization = authorize(scope, key, payment.amount());
                }
                checkpoint(key, scope, token, "authorized:" + authorization);
            }
            c = pool.borrow();
            try {
                c.setAutoCommit(false);
                response = insertPayment(c, scope, payment, authorization);
                Idempotency.complete(c, key, 201, response, scope, token);
                c.commit();
            } finally {
                endTransaction(c);
            }
        } catch (CardNetworkError e) {
            // Recorded as failed, retryable: the next request with this key
            // takes it over (and finds the recovery point).
            System.err.println(e.getMessage());
            c = pool.borrow();
            try {
                Idempotency.fail(c, key, scope, token, null, null, true);
            } catch (SQLException ignored) {
                // taken over meanwhile: the other attempt answers
            } finally {
                pool.release(c);
            }
            sendProblem(ex, new Problem(502, "Card network unavailable", "Retry with the same Idempotency-Key.",
                                        "Retry-After", "1"));
            return;
        } finally {
            beat.stop();
        }
        sendStored(ex, 201, response, false);
    }

    static {
        Locale.setDefault(Locale.ROOT);
    }
}
