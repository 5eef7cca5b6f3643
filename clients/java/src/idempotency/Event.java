package idempotency;

import java.time.Duration;

/**
 * One request's outcome, given to {@link IdempotencyFilter#onOutcome} (and
 * IdempotencyServletFilter's) once its answer is ready, just before it is
 * sent.
 *
 * @param outcome   what happened
 * @param status    the HTTP status sent
 * @param elapsed   from the filter's start to the answer, ready to send
 * @param claimTime the idem_claim call (zero when there was no claim)
 * @param key       the Idempotency-Key ("" when there was none)
 * @param scope     the scope ("" when not known yet)
 * @param committed a committed claim (work outside the database)
 * @param sqlstate  the SQLSTATE of a database error, or null
 */
public record Event(Observed outcome, int status, Duration elapsed, Duration claimTime, String key, String scope,
                    boolean committed, String sqlstate) {
    /** What happened to a request. */
    public enum Observed {
        /** Claimed now; the handler ran ({@code status} is its answer's). */
        NEW,
        /** The stored answer was sent. */
        REPLAY,
        /** Another request holds the key (or an operator must settle it): 409. */
        IN_PROGRESS,
        /** The key was used before with another body: 422. */
        MISMATCH,
        /** Taken over from an earlier attempt that died or failed; the handler ran. */
        RECLAIMED,
        /** The claim or the completion failed (the database's error: {@code sqlstate}), or the handler threw. */
        ERROR,
        /** Refused before any claim: no or bad key, scope, content type or body. */
        REJECTED;

        /** new, replay, in_progress, mismatch, reclaimed, error, rejected. */
        public String label() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }
}
