package idempotency;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Renews the leases of the committed claims in flight, on connections of
 * their own: when every request connection is busy (or waiting for a
 * duplicate), the leases must still be renewed, or another instance takes
 * the keys over and does the outside work (a card authorization) again.
 */
public final class Heartbeats implements AutoCloseable {
    private record Held(String key, String scope, long token) {}

    private final ConnectionSource connections;
    private final Duration lease;
    private final Map<Held, Handle> held = new ConcurrentHashMap<>();
    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "idempotency-heartbeats");
        t.setDaemon(true);
        return t;
    });

    /** Renews every held claim's lease to lease, every every, on connections from connections. */
    public Heartbeats(ConnectionSource connections, Duration lease, Duration every) {
        this.connections = connections;
        this.lease = lease;
        timer.scheduleWithFixedDelay(this::beat, every.toMillis(), every.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** One claim's renewals. */
    public static final class Handle {
        private volatile boolean lost;
        private final Runnable stop;

        private Handle(Runnable stop) {
            this.stop = stop;
        }

        /** Stops the renewals. */
        public void stop() {
            stop.run();
        }

        /** True once a heartbeat found the claim taken over (IK002) or settled (IK003). */
        public boolean lost() {
            return lost;
        }
    }

    /** Keeps the claim's lease alive until the returned handle is stopped. */
    public Handle hold(String key, String scope, long token) {
        Held h = new Held(key, scope, token);
        Handle handle = new Handle(() -> held.remove(h));
        held.put(h, handle);
        return handle;
    }

    private void beat() {
        if (held.isEmpty())
            return;
        Connection c;
        try {
            c = connections.borrow();
        } catch (SQLException e) {
            System.err.println("idempotency: heartbeat: no connection: " + e.getMessage());
            return;
        }
        try {
            for (Map.Entry<Held, Handle> e : held.entrySet()) {
                Held h = e.getKey();
                try {
                    Idempotency.heartbeat(c, h.key(), h.scope(), h.token(), lease);
                } catch (IdempotencyException.StaleToken | IdempotencyException.NotProcessing lost) {
                    // taken over (IK002) or settled (IK003): nothing left to renew
                    e.getValue().lost = true;
                    held.remove(h);
                } catch (SQLException other) {
                    // a failover (25006), a timeout, a lock: still held, renewed next time
                    System.err.println("idempotency: heartbeat of " + h.key() + ": " + other.getMessage());
                    if (!c.isValid(1))
                        throw other;
                }
            }
        } catch (SQLException e) {
            System.err.println("idempotency: heartbeat failed: " + e.getMessage());
            try { c.close(); } catch (SQLException ignored) { /* broken */ }
        } finally {
            connections.release(c);
        }
    }

    /** Stops the timer (held claims are no longer renewed). */
    @Override
    public void close() {
        timer.shutdownNow();
    }
}
