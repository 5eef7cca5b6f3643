package idempotency;

import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * The HTTP contract of the project's example services (examples/README.md)
 * as a {@code jakarta.servlet.Filter} (Servlet 5.0 and later: Tomcat 10,
 * Spring Boot 3), the same as {@link IdempotencyFilter} for the JDK's HTTP
 * server, with the same options and answers.
 *
 * <p>Per POST (PUT, PATCH) request, before anything is claimed: no
 * Idempotency-Key 400, not application/json 415, a body over
 * {@link #maxBody} 413, not JSON 400, then whatever {@link #validate} and
 * the scope function throw.  Then idem_claim(key, body, scope): NEW and
 * RECLAIMED run the servlet, which finds the claim in the request attribute
 * {@link #CLAIM} ({@link #claimOf}), does its work in
 * {@link Claimed#transaction()} and ends with {@link Claimed#respond}; the
 * filter completes the key in that transaction, commits and sends
 * PostgreSQL's jsonb text of the answer, the bytes every replay gets.  The
 * servlet reads the request body as usual (the filter hands it the bytes it
 * read).  A servlet that throws {@link Problem} (or writes an answer of its
 * own) has failed: the transaction is rolled back (the key is free again) or,
 * for a committed claim, recorded failed and retryable.  REPLAY sends the
 * stored status and body with {@code Idempotent-Replayed: true};
 * IN_PROGRESS and STALE 409 with Retry-After; database errors as
 * {@link Problem#from}.
 *
 * <p>Synchronous requests only: register it without async support.  The
 * servlet API is needed by this class alone; the rest of the jar runs
 * without it.
 */
public final class IdempotencyServletFilter implements Filter {
    /** A request attribute an authentication filter in front may set: the caller's scope (a String). */
    public static final String SCOPE_ATTRIBUTE = IdempotencyFilter.SCOPE_ATTRIBUTE;

    /** The request attribute holding the {@link Claimed} claim while the servlet runs. */
    public static final String CLAIM = Claimed.ATTRIBUTE;

    /** Checks a request (body: JSON already) before the claim; throws {@link Problem} to refuse it. */
    @FunctionalInterface
    public interface Validator {
        void validate(HttpServletRequest request, String body);
    }

    private final FilterCore<HttpServletRequest> core;

    /** A filter claiming keys on connections from connections (the requests' pool). */
    public IdempotencyServletFilter(ConnectionSource connections) {
        this.core = new FilterCore<>(connections, IdempotencyServletFilter::authenticatedScope);
    }

    /** The default scope: {@link #SCOPE_ATTRIBUTE}, else the request's user principal, else "". */
    private static String authenticatedScope(HttpServletRequest request) {
        if (request.getAttribute(SCOPE_ATTRIBUTE) instanceof String s)
            return s;
        return request.getUserPrincipal() == null ? "" : request.getUserPrincipal().getName();
    }

    /**
     * The request's claim, while the servlet runs (the filter takes it off
     * the request when it returns); IllegalStateException when the filter is
     * not in front of the servlet.
     */
    public static Claimed claimOf(ServletRequest request) {
        if (request.getAttribute(CLAIM) instanceof Claimed c)
            return c;
        throw new IllegalStateException("no IdempotencyServletFilter in front of this servlet");
    }

    /**
     * The scope (tenant, merchant) of a request's keys, from the
     * authenticated caller; throw {@link Problem} to refuse the request.
     */
    public IdempotencyServletFilter scopeWith(Function<HttpServletRequest, String> f) {
        core.scope = Objects.requireNonNull(f);
        return this;
    }

    /**
     * The scope from a request header ("" when absent): only where the
     * header is trusted (a gateway sets it), since a caller who picks it can
     * probe another tenant's keys.
     */
    public IdempotencyServletFilter scopeFromHeader(String name) {
        return scopeWith(FilterCore.headerScope(request -> request.getHeader(name)));
    }

    /** Checks the body before the claim (your 422s): a refused request never leaves a key behind. */
    public IdempotencyServletFilter validate(Validator v) {
        core.validator = Objects.requireNonNull(v)::validate;
        return this;
    }

    /** Which requests claim committed, with a lease and heartbeats (work outside the database). */
    public IdempotencyServletFilter committedWhen(Predicate<HttpServletRequest> p) {
        core.committedWhen = Objects.requireNonNull(p);
        return this;
    }

    /** A committed claim's lease (30 s). */
    public IdempotencyServletFilter lease(Duration d) {
        core.lease = d;
        return this;
    }

    /** The heartbeats' period (lease / 3). */
    public IdempotencyServletFilter heartbeatEvery(Duration d) {
        core.heartbeatEvery = d;
        return this;
    }

    /**
     * The heartbeats' own connections (default: the requests'): give it one
     * or two, or with the request pool busy the leases lapse and another
     * instance takes the keys over.
     */
    public IdempotencyServletFilter heartbeatConnections(ConnectionSource c) {
        core.heartbeatConnections = c;
        return this;
    }

    /** Whether a duplicate of a request still in its transaction waits for it, then replays (true). */
    public IdempotencyServletFilter waitForDuplicates(boolean wait) {
        core.waitForDuplicates = wait;
        return this;
    }

    /**
     * How long a retry of a committed claim in flight waits for its result
     * (idem_claim's await_result, no lock held) before answering 409: 3 s
     * unless set, Duration.ZERO not at all, null the idempotency.await_result
     * setting (0 s unless set).
     */
    public IdempotencyServletFilter awaitResult(Duration d) {
        core.awaitResult = d;
        return this;
    }

    /** The largest body accepted (64 KiB); larger: 413. */
    public IdempotencyServletFilter maxBody(int bytes) {
        core.maxBody = bytes;
        return this;
    }

    /** The methods that need a key (POST, PUT, PATCH); others pass through untouched. */
    public IdempotencyServletFilter methods(String... names) {
        core.methods = Set.of(names);
        return this;
    }

    /**
     * A callback per request with its outcome and timings (metrics,
     * tracing), called once the answer is ready, just before it is sent.
     */
    public IdempotencyServletFilter onOutcome(Consumer<Event> f) {
        core.hook = Objects.requireNonNull(f);
        return this;
    }

    /** Stops the heartbeat timer. */
    public void close() {
        core.close();
    }

    /** The container takes the filter out of service: stops the heartbeat timer. */
    @Override
    public void destroy() {
        close();
    }

    @Override
    public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
            throws IOException, ServletException {
        if (!(request instanceof HttpServletRequest http) || !(response instanceof HttpServletResponse out)
                || !core.applies(http.getMethod())) {
            chain.doFilter(request, response);
            return;
        }
        // the claim is the servlet's while it runs: its transaction ends with the filter, so
        // nothing after (an error page, a filter in front) finds it; a claim there before is kept
        Object before = http.getAttribute(CLAIM);
        try {
            core.filter(new Exchange(http, out, chain));
        } finally {
            http.setAttribute(CLAIM, before);
        }
    }

    /** A servlet request and response as the core sees them. */
    private static final class Exchange implements FilterCore.Exchange<HttpServletRequest> {
        private HttpServletRequest request;
        private final HttpServletResponse response;
        private final Answer answer;
        private final FilterChain chain;

        Exchange(HttpServletRequest request, HttpServletResponse response, FilterChain chain) {
            this.request = request;
            this.response = response;
            this.answer = new Answer(response);
            this.chain = chain;
        }

        @Override
        public HttpServletRequest request() {
            return request;
        }

        @Override
        public String method() {
            return request.getMethod();
        }

        @Override
        public String header(String name) {
            return request.getHeader(name);
        }

        @Override
        public InputStream body() throws IOException {
            return request.getInputStream();
        }

        @Override
        public void replaceBody(byte[] raw) {
            request = new Body(request, raw);
        }

        @Override
        public void attach(Claimed claimed) {
            request.setAttribute(CLAIM, claimed);
        }

        @Override
        public void handle() throws IOException, ServletException {
            try {
                chain.doFilter(request, answer);
            } catch (ServletException e) {
                if (e.getRootCause() instanceof Problem p)
                    throw p;
                throw e;
            }
        }

        @Override
        public boolean answered() {
            return answer.answered || response.isCommitted();
        }

        @Override
        public int answeredStatus() {
            return response.getStatus();
        }

        @Override
        public void finish() {
            // the container ends the servlet's own answer
        }

        @Override
        public void send(int status, Map<String, String> headers, String contentType, byte[] body)
                throws IOException {
            if (response.isCommitted()) {
                System.err.println("idempotency: the response was committed before the filter's answer");
                return;
            }
            response.resetBuffer();
            response.setStatus(status);
            headers.forEach(response::setHeader);
            if (body == null) {
                response.setContentLength(0);
            } else {
                response.setContentType(contentType);
                response.setContentLength(body.length);
                response.getOutputStream().write(body);
            }
            response.flushBuffer();
        }
    }

    /** The request as the servlet sees it: the body bytes the filter read. */
    private static final class Body extends HttpServletRequestWrapper {
        private final byte[] raw;

        Body(HttpServletRequest request, byte[] raw) {
            super(request);
            this.raw = raw;
        }

        @Override
        public int getContentLength() {
            return raw.length;
        }

        @Override
        public long getContentLengthLong() {
            return raw.length;
        }

        @Override
        public ServletInputStream getInputStream() {
            ByteArrayInputStream in = new ByteArrayInputStream(raw);
            return new ServletInputStream() {
                @Override
                public int read() {
                    return in.read();
                }

                @Override
                public int read(byte[] b, int off, int len) {
                    return in.read(b, off, len);
                }

                @Override
                public boolean isFinished() {
                    return in.available() == 0;
                }

                @Override
                public boolean isReady() {
                    return true;
                }

                @Override
                public void setReadListener(ReadListener listener) {
                    throw new IllegalStateException("IdempotencyServletFilter serves synchronous requests only");
                }
            };
        }

        @Override
        public BufferedReader getReader() {
            String enc = getCharacterEncoding();
            Charset cs = enc == null ? StandardCharsets.UTF_8 : Charset.forName(enc);
            return new BufferedReader(new InputStreamReader(new ByteArrayInputStream(raw), cs));
        }
    }

    /**
     * The response as the servlet sees it: notes whether the servlet
     * answered by itself (took the body's stream or writer, sent an error or
     * a redirect, flushed), which makes its run a failure.
     */
    private static final class Answer extends HttpServletResponseWrapper {
        boolean answered;

        Answer(HttpServletResponse response) {
            super(response);
        }

        @Override
        public ServletOutputStream getOutputStream() throws IOException {
            answered = true;
            return super.getOutputStream();
        }

        @Override
        public PrintWriter getWriter() throws IOException {
            answered = true;
            return super.getWriter();
        }

        @Override
        public void sendError(int sc, String msg) throws IOException {
            answered = true;
            super.sendError(sc, msg);
        }

        @Override
        public void sendError(int sc) throws IOException {
            answered = true;
            super.sendError(sc);
        }

        @Override
        public void sendRedirect(String location) throws IOException {
            answered = true;
            super.sendRedirect(location);
        }

        @Override
        public void flushBuffer() throws IOException {
            answered = true;
            super.flushBuffer();
        }
    }
}
