package idempotency;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.LocalDate;
import java.time.format.DateTimeFormatter;

/**
 * The source documents' deterministic payment key (merchant, merchant order
 * id, amount, currency, request date -> "PAY_IDEM_" + SHA-256), expressed
 * with idem_request_hash: the fields go into a JSON document and the
 * extension hashes its canonical form, so amount spellings (10, 10.0,
 * 10.00, 1e1) and field order give the same key, and the key is the same
 * SHA-256 the extension computes for a request -- no hand-written
 * "a|b|c" concatenation (where "a|b" + "c" and "a" + "b|c" collide) and no
 * amount normalization of our own.
 *
 * <p>Use it for clients that cannot send their own Idempotency-Key (batch
 * imports, a gateway retrying on behalf of a merchant).  Two real payments
 * with the same fields on the same day get the same key: include a field
 * that tells them apart (the merchant's order id does, if it is unique), or
 * let the client generate a random key instead.
 */
public final class KeyGenerator {
    public static final String PREFIX = "PAY_IDEM_";
    private static final DateTimeFormatter DAY = DateTimeFormatter.BASIC_ISO_DATE; // yyyyMMdd

    private KeyGenerator() {}

    /** The key for these fields (currency upper-cased, as the source did). */
    public static String generate(Connection c, String merchantId, String merchantOrderId, BigDecimal amount,
                                  String currency, LocalDate requestDate) throws SQLException {
        if (merchantId == null || merchantId.isEmpty() || merchantOrderId == null || merchantOrderId.isEmpty()
                || amount == null || currency == null || requestDate == null)
            throw new IllegalArgumentException("merchant, order, amount, currency and date are required");
        if (merchantOrderId.length() > 64)
            throw new IllegalArgumentException("merchant order id longer than 64 characters");
        if (amount.signum() <= 0)
            throw new IllegalArgumentException("amount must be positive");
        String sql = "SELECT ? || encode(idem_request_hash(jsonb_build_object("
            + "'merchant', ?::text, 'order', ?::text, 'amount', ?::numeric, 'currency', upper(?), 'date', ?::text)), 'hex')";
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setString(1, PREFIX);
            ps.setString(2, merchantId);
            ps.setString(3, merchantOrderId);
            ps.setBigDecimal(4, amount);
            ps.setString(5, currency);
            ps.setString(6, DAY.format(requestDate));
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getString(1);
            }
        }
    }
}
