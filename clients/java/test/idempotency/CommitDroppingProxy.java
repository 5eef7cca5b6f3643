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
                daemon(() -> relay(client, server, dropped, true));
                daemon(() -> relay(server, client, dropped, false));
            } catch (IOException e) {
                return;
            }
        }
    }

    /**
     * Copies from one side to the other until either ends.  Towards the
     * server, an armed proxy marks the link at a COMMIT; towards the client,
     * a marked link is cut at the server's answer (it has committed).
     */
    private void relay(Socket from, Socket to, AtomicBoolean dropped, boolean toServer) {
        byte[] buf = new byte[65536];
        try (InputStream in = from.getInputStream()) {
            OutputStream out = to.getOutputStream();
            int n;
            while ((n = in.read(buf)) > 0) {
                if (toServer && contains(buf, n, COMMIT) && armed.compareAndSet(true, false))
                    dropped.set(true);
                else if (!toServer && dropped.get())
                    break; // the client never hears the COMMIT's answer
                out.write(buf, 0, n);
                out.flush();
            }
        } catch (IOException e) {
            // either side gone
        } finally {
            closeQuietly(from);
            closeQuietly(to);
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
