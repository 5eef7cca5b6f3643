package idempotency;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Heartbeats against a real database (the PG* environment variables): a
 * held claim's lease is renewed, and a claim settled elsewhere is reported
 * lost.  Waits for what it checks (up to a minute), never for a set time.
 */
class HeartbeatsTest {
    private static ConnectionPool pool() {
        String url = "jdbc:postgresql://" + System.getenv().getOrDefault("PGHOST", "127.0.0.1") + ":"
            + System.getenv().getOrDefault("PGPORT", "5432") + "/"
            + System.getenv().getOrDefault("PGDATABASE", "postgres");
        Properties p = new Properties();
        p.setProperty("user", System.getenv().getOrDefault("PGUSER", "postgres"));
        if (System.getenv("PGPASSWORD") != null)
            p.setProperty("password", System.getenv("PGPASSWORD"));
        return new ConnectionPool(url, p, 3);
    }

    @Test
    void aHeldLeaseIsRenewedAndASettledClaimIsLost() throws Exception {
        ConnectionPool pool = pool();
        String key = "beat-" + UUID.randomUUID();
        String scope = "junit-beats";
        Connection c = pool.borrow();
        try (Heartbeats beats = new Heartbeats(pool, Duration.ofSeconds(600), Duration.ofMillis(50))) {
            Idempotency.Claim claim = Idempotency.claim(c, key, "{}", scope, Duration.ofSeconds(60), false);
            assertEquals(Idempotency.Outcome.NEW, claim.outcome());
            Heartbeats.Handle handle = beats.hold(key, scope, claim.token());
            // a duplicate sees the lease left: 60 s at first, up to 600 s once renewed
            Duration left = Duration.ZERO;
            for (int i = 0; i < 600 && left.compareTo(Duration.ofSeconds(120)) <= 0; i++) {
                Idempotency.Claim dup = Idempotency.claim(c, key, "{}", scope, Duration.ofSeconds(60), false);
                assertEquals(Idempotency.Outcome.IN_PROGRESS, dup.outcome());
                left = dup.retryAfter();
                if (left.compareTo(Duration.ofSeconds(120)) <= 0)
                    Thread.sleep(100);
            }
            assertTrue(left.compareTo(Duration.ofSeconds(120)) > 0, "lease left " + left);
            assertFalse(handle.lost());
            // settled by its holder elsewhere: the next heartbeat finds IK003
            Idempotency.complete(c, key, 200, "{}", scope, claim.token());
            for (int i = 0; i < 600 && !handle.lost(); i++)
                Thread.sleep(100);
            assertTrue(handle.lost());
            handle.stop();
        } finally {
            pool.release(c);
        }
    }

    /**
     * A heartbeat that fails for another reason than a loss (25006: a
     * read-only server, as after a failover to a standby) keeps the claim:
     * not lost, renewed once the database takes writes again.
     */
    @Test
    void aHeartbeatRefusedByAReadOnlyServerKeepsTheClaim() throws Exception {
        ConnectionPool pool = pool();
        AtomicBoolean readOnly = new AtomicBoolean(true);
        AtomicInteger readOnlyBorrows = new AtomicInteger();
        ConnectionSource source = new ConnectionSource() {
            @Override
            public Connection borrow() throws SQLException {
                if (readOnly.get())
                    readOnlyBorrows.incrementAndGet();
                Connection b = pool.borrow();
                try (Statement st = b.createStatement()) {
                    st.execute("SET default_transaction_read_only = " + (readOnly.get() ? "on" : "off"));
                }
                return b;
            }

            @Override
            public void release(Connection b) {
                pool.release(b);
            }
        };
        String key = "beat-ro-" + UUID.randomUUID();
        String scope = "junit-beats";
        Connection c = pool.borrow();
        try (Heartbeats beats = new Heartbeats(source, Duration.ofSeconds(600), Duration.ofMillis(50))) {
            Idempotency.Claim claim = Idempotency.claim(c, key, "{}", scope, Duration.ofSeconds(60), false);
            Heartbeats.Handle handle = beats.hold(key, scope, claim.token());
            // heartbeats refused with 25006: five borrowed (one at a time, so
            // four refused at least), however slow the machine
            for (int i = 0; i < 1200 && readOnlyBorrows.get() < 5; i++)
                Thread.sleep(50);
            assertTrue(readOnlyBorrows.get() >= 5, "only " + readOnlyBorrows.get() + " heartbeats in 60 s");
            assertFalse(handle.lost(), "a read-only refusal was taken for a lost claim");
            readOnly.set(false);
            Duration left = Duration.ZERO;
            for (int i = 0; i < 600 && left.compareTo(Duration.ofSeconds(120)) <= 0; i++) {
                Idempotency.Claim dup = Idempotency.claim(c, key, "{}", scope, Duration.ofSeconds(60), false);
                assertEquals(Idempotency.Outcome.IN_PROGRESS, dup.outcome());
                left = dup.retryAfter();
                if (left.compareTo(Duration.ofSeconds(120)) <= 0)
                    Thread.sleep(100);
            }
            assertTrue(left.compareTo(Duration.ofSeconds(120)) > 0, "not renewed once writable: lease left " + left);
            assertFalse(handle.lost());
            handle.stop();
            Idempotency.release(c, key, scope, claim.token());
        } finally {
            pool.release(c);
        }
    }
}
