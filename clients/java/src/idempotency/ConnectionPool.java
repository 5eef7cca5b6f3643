package idempotency;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.Properties;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/**
 * At most {@code size} connections, made on demand and reused.  Use a real
 * pool (HikariCP) in production; this one keeps the example free of
 * downloads.  A connection handed back in a transaction or broken is closed.
 */
public final class ConnectionPool implements ConnectionSource {
    private final String url;
    private final Properties props;
    private final Semaphore permits;
    private final ConcurrentLinkedDeque<Connection> idle = new ConcurrentLinkedDeque<>();

    /** At most size connections to url (a jdbc:postgresql: URL) with props (user, password...). */
    public ConnectionPool(String url, Properties props, int size) {
        this.url = url;
        this.props = props;
        this.permits = new Semaphore(size, true);
    }

    @Override
    public Connection borrow() throws SQLException {
        try {
            if (!permits.tryAcquire(60, TimeUnit.SECONDS))
                throw new SQLException("no database connection free for 60 s", "53300");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new SQLException("interrupted", "57014");
        }
        try {
            Connection c;
            while ((c = idle.pollFirst()) != null) {
                if (c.isValid(5))
                    return c;
                c.close();
            }
            return DriverManager.getConnection(url, props);
        } catch (SQLException | RuntimeException e) {
            permits.release();
            throw e;
        }
    }

    @Override
    public void release(Connection c) {
        try {
            if (!c.isClosed() && c.getAutoCommit())
                idle.addFirst(c);
            else
                c.close();
        } catch (SQLException e) {
            try { c.close(); } catch (SQLException ignored) { /* already broken */ }
        } finally {
            permits.release();
        }
    }
}
