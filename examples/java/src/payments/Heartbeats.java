package payments;

import idempotency.Idempotency;
import idempotency.IdempotencyException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Renews the leases of the committed claims in flight, on a connection of
 * its own: when every pool connection is busy (or waiting for a duplicate),
 * the leases must still be renewed, or another instance takes the keys over
 * and authorizes the card again.
 */
final class Heartbeats {
    private record Held(String key, String scope, long token) {}

    private final String url;
    private final Properties props;
    private final Duration lease;
    private final Map<Held, Boolean> held = new ConcurrentHashMap<>();
    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "heartbeats");
        t.setDaemon(true);
        return t;
    });
    private Connection connection;

    Heartbeats(String url, Properties props, Duration lease, Duration every) {
        this.url = url;
        this.props = props;
        this.lease = lease;
        timer.scheduleWithFixedDelay(this::beat, every.toMillis(), every.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** Stops the renewals of one claim. */
    interface Handle {
        void stop();
    }

    /** Keeps the claim's lease alive until the returned handle is stopped. */
    Handle hold(String key, String scope, long token) {
        Held h = new Held(key, scope, token);
        held.put(h, Boolean.TRUE);
        return () -> held.remove(h);
    }

    private void beat() {
        for (Held h : held.keySet()) {
            try {
                if (connection == null || connection.isClosed())
                    connection = DriverManager.getConnection(url, props);
                Idempotency.heartbeat(connection, h.key(), h.scope(), h.token(), lease);
            } catch (IdempotencyException e) {
                // taken over (IK002) or settled (IK003): nothing left to renew
                held.remove(h);
            } catch (SQLException e) {
                System.err.println("heartbeat failed: " + e.getMessage());
                try { if (connection != null) connection.close(); } catch (SQLException ignored) { /* gone */ }
                connection = null;
                return;
            }
        }
    }
}
