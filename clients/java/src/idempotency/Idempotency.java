package idempotency;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.time.Duration;
import java.time.Instant;

/**
 * The idempotency extension's key functions over JDBC.  Every call runs on
 * the Connection given, in its current transaction: to claim, pay and
 * complete atomically, turn autocommit off, call {@link #claim}, do the work
 * on the same connection, {@link #complete}, commit.  Errors of the
 * extension come out as {@link IdempotencyException} subclasses.
 *
 * <p>Requests and responses are JSON text; responses come back as
 * PostgreSQL's jsonb output, the same bytes on every replay.
 */
public final class Idempotency {
    private Idempotency() {}

    /** What idem_claim found. */
    public enum Outcome {
        NEW, REPLAY, IN_PROGRESS, RECLAIMED, STALE;

        static Outcome of(String s) {
            return valueOf(s.toUpperCase());
        }
    }

    /**
     * The claim's result.  token: only for NEW and RECLAIMED.  response:
     * jsonb text, for REPLAY.  retryAfter: for IN_PROGRESS.  recoveryPoint:
     * what an earlier attempt recorded, for RECLAIMED.
     */
    public record Claim(Outcome outcome, Long token, String status, Integer responseCode, String response,
                        Duration retryAfter, String recoveryPoint) {
        /** NEW or RECLAIMED: this caller holds the key and must do the work. */
        public boolean mine() {
            return outcome == Outcome.NEW || outcome == Outcome.RECLAIMED;
        }
    }

    private static final String CLAIM =
        "SELECT outcome, token, status, response_code, response::text, "
        + "extract(epoch FROM retry_after)::float8, recovery_point "
        + "FROM idem_claim(?, ?::jsonb, ?, lease => make_interval(secs => ?), wait => ?, "
        + "await_result => make_interval(secs => ?))";

    /**
     * idem_claim.  lease: how long the claim holds without heartbeats
     * (matters for claims committed before the work); wait: whether a
     * duplicate of an uncommitted claim waits for it.  A key in flight under
     * another transaction's committed claim is waited for as the
     * idempotency.await_result setting says (0 s unless set).
     */
    public static Claim claim(Connection c, String key, String requestJson, String scope, Duration lease,
                              boolean wait) throws SQLException {
        return claim(c, key, requestJson, scope, lease, wait, null);
    }

    /**
     * idem_claim with await_result: a key in flight under another
     * transaction's committed claim is waited for, up to awaitResult (no
     * lock held), and its result replayed; IN_PROGRESS when the time runs
     * out.  Duration.ZERO: no wait; null: the idempotency.await_result
     * setting (0 s unless set).
     */
    public static Claim claim(Connection c, String key, String requestJson, String scope, Duration lease,
                              boolean wait, Duration awaitResult) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(CLAIM)) {
            ps.setString(1, key);
            ps.setString(2, requestJson);
            ps.setString(3, scope);
            ps.setDouble(4, lease.toMillis() / 1000.0);
            ps.setBoolean(5, wait);
            if (awaitResult == null)
                ps.setNull(6, Types.DOUBLE); // make_interval(secs => NULL) is NULL: the setting
            else
                ps.setDouble(6, awaitResult.toMillis() / 1000.0);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                long token = rs.getLong(2);
                Long tokenOrNull = rs.wasNull() ? null : token;
                int code = rs.getInt(4);
                Integer codeOrNull = rs.wasNull() ? null : code;
                double after = rs.getDouble(6);
                Duration retryAfter = rs.wasNull() ? null : Duration.ofMillis((long) Math.ceil(after * 1000));
                return new Claim(Outcome.of(rs.getString(1)), tokenOrNull, rs.getString(3), codeOrNull,
                                 rs.getString(5), retryAfter, rs.getString(7));
            }
        } catch (SQLException e) {
            throw IdempotencyException.translate(e);
        }
    }

    /** idem_complete.  token: null only in the transaction that claimed. */
    public static void complete(Connection c, String key, int responseCode, String responseJson, String scope,
                                Long token) throws SQLException {
        call(c, "SELECT idem_complete(?, ?, ?::jsonb, ?, ?)", key, responseCode, responseJson, scope, token);
    }

    /**
     * idem_complete, returning the response as PostgreSQL's jsonb text: the
     * bytes a replay of this key gets, to send as the first answer too.
     */
    public static String completeReturningText(Connection c, String key, int responseCode, String responseJson,
                                               String scope, Long token) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT idem_complete(?, ?, ?::jsonb, ?, ?), ?::jsonb::text")) {
            ps.setString(1, key);
            ps.setInt(2, responseCode);
            ps.setString(3, responseJson);
            ps.setString(4, scope);
            if (token == null)
                ps.setNull(5, Types.BIGINT);
            else
                ps.setLong(5, token);
            ps.setString(6, responseJson);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getString(2);
            }
        } catch (SQLException e) {
            throw IdempotencyException.translate(e);
        }
    }

    /** idem_fail.  retryable: the next claim takes the key over (RECLAIMED). */
    public static void fail(Connection c, String key, String scope, Long token, Integer responseCode,
                            String responseJson, boolean retryable) throws SQLException {
        call(c, "SELECT idem_fail(?, ?, ?, ?, ?::jsonb, ?)", key, scope, token, responseCode, responseJson,
             retryable);
    }

    /** idem_heartbeat: extends the lease; returns its new end. */
    public static Instant heartbeat(Connection c, String key, String scope, long token, Duration lease)
            throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT idem_heartbeat(?, ?, ?, make_interval(secs => ?))")) {
            ps.setString(1, key);
            ps.setString(2, scope);
            ps.setLong(3, token);
            ps.setDouble(4, lease.toMillis() / 1000.0);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getTimestamp(1).toInstant();
            }
        } catch (SQLException e) {
            throw IdempotencyException.translate(e);
        }
    }

    /** idem_checkpoint: records progress; a RECLAIMED claim returns it. */
    public static void checkpoint(Connection c, String key, String recoveryPoint, String scope, Long token)
            throws SQLException {
        call(c, "SELECT idem_checkpoint(?, ?, ?, ?)", key, recoveryPoint, scope, token);
    }

    /** idem_release: gives the claim up; the next claim is NEW. */
    public static void release(Connection c, String key, String scope, Long token) throws SQLException {
        call(c, "SELECT idem_release(?, ?, ?)", key, scope, token);
    }

    /** idem_request_hash(jsonb), hex: equal for equal JSON documents. */
    public static String requestHashHex(Connection c, String json) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT encode(idem_request_hash(?::jsonb), 'hex')")) {
            ps.setString(1, json);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getString(1);
            }
        }
    }

    private static void call(Connection c, String sql, Object... args) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < args.length; i++) {
                Object a = args[i];
                if (a == null)
                    ps.setNull(i + 1, i == 0 ? Types.VARCHAR : Types.OTHER);
                else if (a instanceof Long l)
                    ps.setLong(i + 1, l);
                else if (a instanceof Integer n)
                    ps.setInt(i + 1, n);
                else if (a instanceof Boolean b)
                    ps.setBoolean(i + 1, b);
                else
                    ps.setString(i + 1, (String) a);
            }
            ps.execute();
        } catch (SQLException e) {
            throw IdempotencyException.translate(e);
        }
    }
}
