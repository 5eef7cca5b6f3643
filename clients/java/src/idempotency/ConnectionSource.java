package idempotency;

import java.sql.Connection;
import java.sql.SQLException;
import javax.sql.DataSource;

/**
 * Where {@link IdempotencyFilter}, IdempotencyServletFilter and
 * {@link Heartbeats} get their connections: {@link ConnectionPool}, or any
 * {@link DataSource} (HikariCP, PGSimpleDataSource, a container's) through
 * {@link #of(DataSource)}.  A connection is borrowed in autocommit mode and
 * handed back the same way.
 */
public interface ConnectionSource {
    /** A connection in autocommit mode; hand it back with {@link #release}. */
    Connection borrow() throws SQLException;

    /** Takes back a borrowed connection (closes it when it is broken or in a transaction). */
    void release(Connection c);

    /** A source over a DataSource: release closes, which a pooling DataSource turns into a return. */
    static ConnectionSource of(DataSource ds) {
        return new ConnectionSource() {
            @Override
            public Connection borrow() throws SQLException {
                return ds.getConnection();
            }

            @Override
            public void release(Connection c) {
                try {
                    if (!c.isClosed() && !c.getAutoCommit()) {
                        c.rollback();
                        c.setAutoCommit(true);
                    }
                } catch (SQLException ignored) {
                    // broken: closed below
                }
                try {
                    c.close();
                } catch (SQLException ignored) {
                    // already gone
                }
            }
        };
    }
}
