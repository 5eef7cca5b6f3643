package idempotency;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.LocalDate;
import java.util.HexFormat;
import java.util.Properties;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The JDBC class and the key generator against a real database: the PG*
 * environment variables (PGHOST, PGPORT, PGDATABASE, PGUSER) name it; the
 * role needs idempotency_app.
 */
class IdempotencyTest {
    private static final Duration LEASE = Duration.ofSeconds(30);
    private Connection c;
    private final String scope = "junit-" + UUID.randomUUID();

    @BeforeEach
    void connect() throws SQLException {
        String env = System.getenv("PGHOST");
        String url = "jdbc:postgresql://" + (env == null ? "127.0.0.1" : env) + ":"
            + System.getenv().getOrDefault("PGPORT", "5432") + "/" + System.getenv().getOrDefault("PGDATABASE", "postgres");
        Properties p = new Properties();
        p.setProperty("user", System.getenv().getOrDefault("PGUSER", "postgres"));
        c = DriverManager.getConnection(url, p);
    }

    @AfterEach
    void close() throws SQLException {
        c.close();
    }

    private static String key() {
        return "k-" + UUID.randomUUID();
    }

    @Test
    void claimCompleteInOneTransactionThenReplay() throws SQLException {
        String key = key();
        c.setAutoCommit(false);
        Idempotency.Claim first = Idempotency.claim(c, key, "{\"order\":\"A1\",\"amount\":3000}", scope, LEASE, true);
        assertEquals(Idempotency.Outcome.NEW, first.outcome());
        assertTrue(first.mine());
        Idempotency.complete(c, key, 201, "{\"payment_id\": 7, \"order\": \"A1\"}", scope, null);
        c.commit();
        Idempotency.Claim again = Idempotency.claim(c, key, "{ \"amount\": 3000, \"order\": \"A1\" }", scope, LEASE, true);
        c.commit();
        assertEquals(Idempotency.Outcome.REPLAY, again.outcome());
        assertEquals(201, again.responseCode());
        assertEquals("{\"order\": \"A1\", \"payment_id\": 7}", again.response()); // jsonb's text
        assertNull(again.token());
    }

    @Test
    void sqlstatesBecomeExceptions() throws SQLException {
        String key = key();
        Idempotency.Claim claim = Idempotency.claim(c, key, "{\"amount\":1}", scope, LEASE, true); // committed
        IdempotencyException e = assertThrows(IdempotencyException.RequestMismatch.class,
            () -> Idempotency.claim(c, key, "{\"amount\":2}", scope, LEASE, true));
        assertEquals(422, e.httpStatus());
        assertEquals("IK001", e.getSQLState());
        assertEquals(409, assertThrows(IdempotencyException.StaleToken.class,
            () -> Idempotency.complete(c, key, 201, "{}", scope, claim.token() + 1)).httpStatus());
        assertEquals(500, assertThrows(IdempotencyException.TokenRequired.class,
            () -> Idempotency.complete(c, key, 201, "{}", scope, null)).httpStatus());
        Idempotency.complete(c, key, 201, "{}", scope, claim.token());
        assertEquals(409, assertThrows(IdempotencyException.NotProcessing.class,
            () -> Idempotency.complete(c, key, 201, "{}", scope, claim.token())).httpStatus());
        assertEquals(404, assertThrows(IdempotencyException.KeyNotFound.class,
            () -> Idempotency.heartbeat(c, key(), scope, 1, LEASE)).httpStatus());
        assertEquals(400, assertThrows(IdempotencyException.InvalidKey.class,
            () -> Idempotency.claim(c, "k".repeat(300), "{}", scope, LEASE, true)).httpStatus());
        assertEquals(400, assertThrows(IdempotencyException.InvalidKey.class,
            () -> Idempotency.claim(c, "", "{}", scope, LEASE, true)).httpStatus());
    }

    @Test
    void inProgressThenReclaimedWithTheRecoveryPoint() throws SQLException {
        String key = key();
        Idempotency.Claim first = Idempotency.claim(c, key, "{\"amount\":5}", scope, LEASE, true);
        Idempotency.heartbeat(c, key, scope, first.token(), LEASE);
        Idempotency.Claim dup = Idempotency.claim(c, key, "{\"amount\":5}", scope, LEASE, true);
        assertEquals(Idempotency.Outcome.IN_PROGRESS, dup.outcome());
        assertTrue(dup.retryAfter().toSeconds() > 0);
        Idempotency.checkpoint(c, key, "authorized:auth_1", scope, first.token());
        Idempotency.fail(c, key, scope, first.token(), null, null, true);
        Idempotency.Claim second = Idempotency.claim(c, key, "{\"amount\":5}", scope, LEASE, true);
        assertEquals(Idempotency.Outcome.RECLAIMED, second.outcome());
        assertEquals("authorized:auth_1", second.recoveryPoint());
        assertTrue(second.token() > first.token());
        Idempotency.release(c, key, scope, second.token());
        assertEquals(Idempotency.Outcome.NEW, Idempotency.claim(c, key, "{\"amount\":5}", scope, LEASE, true).outcome());
    }

    @Test
    void keyGeneratorIsTheExtensionsCanonicalHash() throws Exception {
        LocalDate day = LocalDate.of(2026, 11, 23);
        String k = KeyGenerator.generate(c, "m42", "A1", new BigDecimal("10.00"), "eur", day);
        // SHA-256 of the canonical JSON (jsonb key order: shorter keys first,
        // numbers normalized): what a client without a database computes
        String canonical = "{\"date\":\"20261123\",\"order\":\"A1\",\"amount\":10,\"currency\":\"EUR\",\"merchant\":\"m42\"}";
        String sha = HexFormat.of().formatHex(
            MessageDigest.getInstance("SHA-256").digest(canonical.getBytes(StandardCharsets.UTF_8)));
        assertEquals(KeyGenerator.PREFIX + sha, k);
        assertEquals(k, KeyGenerator.generate(c, "m42", "A1", new BigDecimal("10"), "EUR", day));
        assertEquals(k, KeyGenerator.generate(c, "m42", "A1", new BigDecimal("1E+1"), "EUR", day));
        assertNotEquals(k, KeyGenerator.generate(c, "m42", "A1", new BigDecimal("10"), "EUR", day.plusDays(1)));
        assertNotEquals(k, KeyGenerator.generate(c, "m42", "A2", new BigDecimal("10"), "EUR", day));
        // no "a|b" + "c" vs "a" + "b|c" collision
        assertNotEquals(KeyGenerator.generate(c, "m|4", "2A1", BigDecimal.ONE, "EUR", day),
                        KeyGenerator.generate(c, "m", "4|2A1", BigDecimal.ONE, "EUR", day));
        assertThrows(IllegalArgumentException.class,
            () -> KeyGenerator.generate(c, "m42", "A1", BigDecimal.ZERO, "EUR", day));
    }

    /**
     * awaitResult: null is the idempotency.await_result setting, as
     * documented (it was sent as 0), Duration.ZERO no wait; the overload
     * without it is the setting too.
     */
    @Test
    void awaitResultNullIsTheSettingAndZeroDoesNotWait() throws SQLException {
        String key = key();
        Idempotency.Claim first = Idempotency.claim(c, key, "{\"amount\":8}", scope, LEASE, true); // committed, in flight
        try (Statement st = c.createStatement()) {
            st.execute("SET idempotency.await_result = '3 s'");
        }
        long t0 = System.nanoTime();
        assertEquals(Idempotency.Outcome.IN_PROGRESS,
            Idempotency.claim(c, key, "{\"amount\":8}", scope, LEASE, true, Duration.ZERO).outcome());
        long zero = System.nanoTime() - t0;
        t0 = System.nanoTime();
        assertEquals(Idempotency.Outcome.IN_PROGRESS,
            Idempotency.claim(c, key, "{\"amount\":8}", scope, LEASE, true, null).outcome());
        long setting = System.nanoTime() - t0;
        t0 = System.nanoTime();
        assertEquals(Idempotency.Outcome.IN_PROGRESS,
            Idempotency.claim(c, key, "{\"amount\":8}", scope, LEASE, true).outcome());
        long overload = System.nanoTime() - t0;
        // (the setting is 3 s, so that a claim slowed by a loaded machine is
        // not taken for one that waited)
        assertTrue(zero < Duration.ofMillis(2000).toNanos(), "ZERO waited " + zero / 1_000_000 + " ms");
        assertTrue(setting >= Duration.ofMillis(2950).toNanos(), "null waited only " + setting / 1_000_000 + " ms");
        assertTrue(overload >= Duration.ofMillis(2950).toNanos(), "the overload waited only " + overload / 1_000_000 + " ms");
        Idempotency.release(c, key, scope, first.token());
    }

    /** IK006 (row level security recorded but off) is 503 with Retry-After, as in the other clients. */
    @Test
    void rowSecurityOffIs503WithRetryAfter() {
        SQLException t = IdempotencyException.translate(new SQLException("row level security is off", "IK006"));
        assertTrue(t instanceof IdempotencyException.RowSecurityOff, t.getClass().getName());
        assertEquals(503, ((IdempotencyException) t).httpStatus());
        Problem p = Problem.from(new SQLException("row level security is off", "IK006"));
        assertEquals(503, p.status());
        assertEquals("1", p.headers().get("Retry-After"));
    }
}
