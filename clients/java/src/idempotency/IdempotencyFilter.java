package idempotency;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpExchange;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.Collections;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * The HTTP contract of the project's example services (examples/README.md)
 * as a filter for the JDK's {@code com.sun.net.httpserver}:
 * {@code server.createContext("/payments", handler).getFilters().add(filter)}.
 *
 * <p>Per POST (PUT, PATCH) request, before anything is claimed: no
 * Idempotency-Key 400, not application/json 415, a body over
 * {@link #maxBody} 413, not JSON 400, then whatever {@link #validate} and
 * the scope function throw.  Then idem_claim(key, body, scope): NEW and
 * RECLAIMED run the handler ({@link Claimed}); REPLAY sends the stored status
 * and body with {@code Idempotent-Replayed: true}; IN_PROGRESS and STALE 409
 * with Retry-After; database errors as {@link Problem#from}.
 *
 * <p>The same contract for servlet containers (Tomcat, Spring Boot):
 * IdempotencyServletFilter.  Both run on one core (FilterCore).
 */
public final class IdempotencyFilter extends Filter {
    /**
     * Refused here (a 500 when set): the JDK's HttpServer keeps an
     * exchange's attributes in its context, shared by every exchange of
     * the context at once, so a scope set as an attribute for one request
     * is every request's.  Use {@link #setScope}.  (For servlets, whose
     * request attributes are the request's own: IdempotencyServletFilter.)
     */
    public static final String SCOPE_ATTRIBUTE = "idempotency.scope";

    /*
     * What belongs to one exchange: kept here, not in its attributes (see
     * SCOPE_ATTRIBUTE; the JDK 17 and 25 both share them), by the
     * exchange's identity.  Weak keys: an exchange this filter never
     * reached (refused in front of it) leaves nothing behind.
     */
    private static final Map<HttpExchange, Claimed> CLAIMS = Collections.synchronizedMap(new WeakHashMap<>());
    private static final Map<HttpExchange, String> SCOPES = Collections.synchronizedMap(new WeakHashMap<>());
    /* the claim of the handler running on this thread: for an exchange a filter after this one wrapped */
    private static final ThreadLocal<Claimed> RUNNING = new ThreadLocal<>();

    /**
     * The caller's scope, for the default scope function: an
     * authentication filter in front of this one calls it with the
     * exchange this filter receives (no filter between them may wrap it:
     * the scope would not be found, and would be "" or the principal's).
     */
    public static void setScope(HttpExchange ex, String scope) {
        SCOPES.put(Objects.requireNonNull(ex), Objects.requireNonNull(scope));
    }

    /**
     * The claim this filter made for the exchange its handler runs for, or
     * for the handler running on this thread (a filter between wrapped the
     * exchange), or null (Claimed.of).
     */
    static Claimed claimOf(HttpExchange ex) {
        Claimed c = CLAIMS.get(ex);
        return c != null ? c : RUNNING.get();
    }

    /** Checks a request (body: JSON already) before the claim; throws {@link Problem} to refuse it. */
    @FunctionalInterface
    public interface Validator {
        void validate(HttpExchange ex, String body);
    }

    private final FilterCore<HttpExchange> core;

    /** A filter claiming keys on connections from connections (the requests' pool). */
    public IdempotencyFilter(ConnectionSource connections) {
        this.core = new FilterCore<>(connections, IdempotencyFilter::authenticatedScope);
    }

    /** The default scope: {@link #setScope}'s, else the exchange's principal, else "". */
    private static String authenticatedScope(HttpExchange ex) {
        String s = SCOPES.get(ex);
        if (s != null)
            return s;
        if (ex.getAttribute(SCOPE_ATTRIBUTE) != null) {
            throw new IllegalStateException("the exchange attribute " + SCOPE_ATTRIBUTE
                                            + " is shared by all requests of the context; use IdempotencyFilter.setScope");
        }
        return ex.getPrincipal() == null ? "" : ex.getPrincipal().getUsername();
    }

    /**
     * The scope (tenant, merchant) of a request's keys, from the
     * authenticated caller; throw {@link Problem} to refuse the request.
     */
    public IdempotencyFilter scopeWith(Function<HttpExchange, String> f) {
        core.scope = Objects.requireNonNull(f);
        return this;
    }

    /**
     * The scope from a request header ("" when absent): only where the
     * header is trusted (a gateway sets it), since a caller who picks it can
     * probe another tenant's keys.
     */
    public IdempotencyFilter scopeFromHeader(String name) {
        return scopeWith(FilterCore.headerScope(ex -> ex.getRequestHeaders().getFirst(name)));
    }

    /** Checks the body before the claim (your 422s): a refused request never leaves a key behind. */
    public IdempotencyFilter validate(Validator v) {
        core.validator = Objects.requireNonNull(v)::validate;
        return this;
    }

    /** Which requests claim committed, with a lease and heartbeats (work outside the database). */
    public IdempotencyFilter committedWhen(Predicate<HttpExchange> p) {
        core.committedWhen = Objects.requireNonNull(p);
        return this;
    }

    /** A committed claim's lease (30 s). */
    public IdempotencyFilter lease(Duration d) {
        core.lease = d;
        return this;
    }

    /** The heartbeats' period (lease / 3). */
    public IdempotencyFilter heartbeatEvery(Duration d) {
        core.heartbeatEvery = d;
        return this;
    }

    /**
     * The heartbeats' own connections (default: the requests'): give it one
     * or two, or with the request pool busy the leases lapse and another
     * instance takes the keys over.
     */
    public IdempotencyFilter heartbeatConnections(ConnectionSource c) {
        core.heartbeatConnections = c;
        return this;
    }

    /** Whether a duplicate of a request still in its transaction waits for it, then replays (true). */
    public IdempotencyFilter waitForDuplicates(boolean wait) {
        core.waitForDuplicates = wait;
        return this;
    }

    /**
     * How long a retry of a committed claim in flight waits for its result
     * (idem_claim's await_result, no lock held) before answering 409: 3 s
     * unless set, Duration.ZERO not at all, null the idempotency.await_result
     * setting (0 s unless set).
     */
    public IdempotencyFilter awaitResult(Duration d) {
        core.awaitResult = d;
        return this;
    }

    /** The largest body accepted (64 KiB); larger: 413. */
    public IdempotencyFilter maxBody(int bytes) {
        core.maxBody = bytes;
        return this;
    }

    /** The methods that need a key (POST, PUT, PATCH); others pass through untouched. */
    public IdempotencyFilter methods(String... names) {
        core.methods = Set.of(names);
        return this;
    }

    /**
     * A callback per request with its outcome and timings (metrics,
     * tracing), called once the answer is ready, just before it is sent.
     */
    public IdempotencyFilter onOutcome(Consumer<Event> f) {
        core.hook = Objects.requireNonNull(f);
        return this;
    }

    @Override
    public String description() {
        return "Idempotency-Key on the idempotency extension";
    }

    /** Stops the heartbeat timer. */
    public void close() {
        core.close();
    }

    @Override
    public void doFilter(HttpExchange ex, Chain chain) throws IOException {
        try {
            if (core.applies(ex.getRequestMethod()))
                core.filter(new Exchange(ex, chain));
            else
                chain.doFilter(ex);
        } finally {
            SCOPES.remove(ex);
        }
    }

    /** An HttpExchange as the core sees it. */
    private record Exchange(HttpExchange ex, Chain chain) implements FilterCore.Exchange<HttpExchange> {
        @Override
        public HttpExchange request() {
            return ex;
        }

        @Override
        public String method() {
            return ex.getRequestMethod();
        }

        @Override
        public String header(String name) {
            return ex.getRequestHeaders().getFirst(name);
        }

        @Override
        public InputStream body() {
            return ex.getRequestBody();
        }

        @Override
        public void replaceBody(byte[] raw) {
            ex.setStreams(new ByteArrayInputStream(raw), null);
        }

        @Override
        public void attach(Claimed claimed) {
            CLAIMS.put(ex, claimed);
        }

        @Override
        public void handle() throws IOException {
            RUNNING.set(CLAIMS.get(ex));
            try {
                chain.doFilter(ex);
            } finally {
                CLAIMS.remove(ex);
                RUNNING.remove();
            }
        }

        @Override
        public boolean answered() {
            return ex.getResponseCode() != -1;
        }

        @Override
        public int answeredStatus() {
            return ex.getResponseCode();
        }

        @Override
        public void finish() {
            ex.close();
        }

        @Override
        public void send(int status, Map<String, String> headers, String contentType, byte[] body)
                throws IOException {
            IdempotencyFilter.send(ex, status, headers, contentType, body);
        }
    }

    /** Sends an answer and closes the exchange (no body when body is null). */
    static void send(HttpExchange ex, int status, Map<String, String> headers, String contentType, byte[] body)
            throws IOException {
        headers.forEach((n, v) -> ex.getResponseHeaders().set(n, v));
        if (body == null) {
            ex.sendResponseHeaders(status, -1);
        } else {
            ex.getResponseHeaders().set("Content-Type", contentType);
            ex.sendResponseHeaders(status, body.length);
            ex.getResponseBody().write(body);
        }
        ex.close();
    }
}
