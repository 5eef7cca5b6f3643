package idempotency;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A TCP proxy in front of PostgreSQL that, once armed, forwards the first
 * message with "COMMIT" to the server and, when the server answers it (it
 * has committed), drops both links instead of passing the answer on: the
 * client sees its connection lost during COMMIT (08006), an outcome it
 * cannot know.
 */
final class CommitDroppingProxy implements AutoCloseable {
    private static final byte[] COMMIT = "COMMIT".getBytes(StandardCharsets.US_ASCII);

    private final ServerSocket listener;
    private final String host;
    private final int port;
    final AtomicBoolean armed = new AtomicBoolean();

    CommitDroppingProxy(String host, int port) throws IOException {
        this.host = host;
        this.port = port;
        this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        daemon(this::accept);
    }

    int port() {
        return listener.getLocalPort();
    }

    private static void daemon(Runnable r) {
        Thread t = new Thread(r, "commit-dropping-proxy");
        t.setDaemon(true);
        t.start();
    }

    private void accept() {
        while (!listener.isClosed()) {
            try {
                Socket client = listener.accept();
                Socket server = new Socket(host, port);
                AtomicBoolean dropped = new AtomicBoolean();
                daemon(() -> toServer(client, server, dropped));
                daemon(() -> toClient(server, client, dropped));
            } catch (IOException e) {
                return;
            }
        }
    }

    private void toServer(Socket client, Socket server, AtomicBoolean dropped) {
        byte[] buf = new byte[65536];
        try (InputStream in = client.getInputStream()) {
            OutputStream out = server.getOutputStream();
            int n;
            while ((n = in.read(buf)) > 0) {
                if (contains(buf, n, COMMIT) && armed.compareAndSet(true, false))
                    dropped.set(true); // the server's reply cuts the link instead (toClient)
                out.write(buf, 0, n);
                out.flush();
            }
        } catch (IOException e) {
            // either side gone
        } finally {
            closeQuietly(client);
            closeQuietly(server);
        }
    }

    private static void toClient(Socket server, Socket client, AtomicBoolean dropped) {
        byte[] buf = new byte[65536];
        try (InputStream in = server.getInputStream()) {
            OutputStream out = client.getOutputStream();
            int n;
            while ((n = in.read(buf)) > 0) {
                if (dropped.get())
                    break; // the server has run the COMMIT: the client never hears it
                out.write(buf, 0, n);
                out.flush();
            }
        } catch (IOException e) {
            // either side gone
        } finally {
            closeQuietly(client);
            closeQuietly(server);
        }
    }

    private static boolean contains(byte[] buf, int n, byte[] what) {
        outer:
        for (int i = 0; i + what.length <= n; i++) {
            for (int j = 0; j < what.length; j++) {
                if (buf[i + j] != what[j])
                    continue outer;
            }
            return true;
        }
        return false;
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // closed already
        }
    }

    @Override
    public void close() throws IOException {
        listener.close();
    }
}
