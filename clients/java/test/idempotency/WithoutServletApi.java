package idempotency;

import com.sun.net.httpserver.HttpServer;
import java.io.File;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Properties;
import java.util.UUID;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.stream.Stream;

/**
 * Run by IdempotencyServletFilterTest in a JVM without the servlet API on
 * its class path: loads (and initializes) every class of the library but
 * IdempotencyServletFilter's, then serves one payment twice through
 * IdempotencyFilter on the JDK's HTTP server and a real database (the PG*
 * environment variables); prints "201 replayed" when the second answer was
 * the first one's replay.  Exits non-zero on any failure.
 */
final class WithoutServletApi {
    private WithoutServletApi() {}

    public static void main(String[] args) throws Exception {
        try {
            Class.forName("jakarta.servlet.Filter");
            throw new AssertionError("the servlet API is on the class path: this check proves nothing");
        } catch (ClassNotFoundException expected) {
            // as it should be
        }
        List<String> classes = libraryClasses();
        for (String name : classes)
            if (!name.startsWith("idempotency.IdempotencyServletFilter"))
                Class.forName(name, true, WithoutServletApi.class.getClassLoader());
        System.out.println("loaded " + classes.size() + " classes but the servlet filter's");

        String url = "jdbc:postgresql://" + System.getenv().getOrDefault("PGHOST", "127.0.0.1") + ":"
            + System.getenv().getOrDefault("PGPORT", "5432") + "/" + System.getenv().getOrDefault("PGDATABASE", "postgres");
        Properties p = new Properties();
        p.setProperty("user", System.getenv().getOrDefault("PGUSER", "postgres"));
        if (System.getenv("PGPASSWORD") != null)
            p.setProperty("password", System.getenv("PGPASSWORD"));
        ConnectionPool pool = new ConnectionPool(url, p, 2);
        IdempotencyFilter filter = new IdempotencyFilter(pool);
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 10);
        server.createContext("/payments", ex -> {
            Claimed claim = Claimed.of(ex);
            try (Statement s = claim.transaction().createStatement();
                 ResultSet rs = s.executeQuery("SELECT jsonb_build_object('at', clock_timestamp()::text)::text")) {
                rs.next();
                claim.respond(201, rs.getString(1));
            } catch (SQLException e) {
                throw Problem.from(e);
            }
        }).getFilters().add(filter);
        server.start();
        try {
            HttpClient client = HttpClient.newHttpClient();
            HttpRequest req = HttpRequest.newBuilder(
                    URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/payments"))
                .header("Content-Type", "application/json")
                .header("Idempotency-Key", "no-servlet-" + UUID.randomUUID())
                .POST(HttpRequest.BodyPublishers.ofString("{\"amount\": 1}")).build();
            HttpResponse<String> first = client.send(req, HttpResponse.BodyHandlers.ofString());
            HttpResponse<String> again = client.send(req, HttpResponse.BodyHandlers.ofString());
            if (first.statusCode() != 201 || !first.body().equals(again.body())
                    || !"true".equals(again.headers().firstValue("Idempotent-Replayed").orElse("")))
                throw new AssertionError(first.statusCode() + " " + first.body() + " / " + again.statusCode() + " "
                                         + again.body());
            System.out.println(again.statusCode() + " replayed");
        } finally {
            server.stop(0);
            filter.close();
        }
    }

    /** The class names of the library's jar (or classes folder), where IdempotencyFilter was loaded from. */
    private static List<String> libraryClasses() throws Exception {
        Path where = Path.of(IdempotencyFilter.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        List<String> names = new ArrayList<>();
        if (Files.isDirectory(where)) {
            try (Stream<Path> files = Files.walk(where)) {
                files.map(f -> where.relativize(f).toString()).forEach(n -> add(names, n.replace(File.separatorChar, '/')));
            }
        } else {
            try (JarFile jar = new JarFile(where.toFile())) {
                for (Enumeration<JarEntry> e = jar.entries(); e.hasMoreElements(); )
                    add(names, e.nextElement().getName());
            }
        }
        if (!names.contains("idempotency.IdempotencyFilter"))
            throw new AssertionError("no library classes found in " + where);
        return names;
    }

    private static void add(List<String> names, String entry) {
        if (entry.startsWith("idempotency/") && entry.endsWith(".class"))
            names.add(entry.substring(0, entry.length() - ".class".length()).replace('/', '.'));
    }
}
