package zoolog.e2e.support;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A tiny loopback TCP proxy in front of the server. While stalled it forwards nothing in either
 * direction and holds new connections unconnected, so from the server's side the client's session
 * simply goes silent (exactly what a network partition looks like). sever() additionally drops every
 * current connection.
 */
public final class StallableProxy implements AutoCloseable {
    private final ServerSocket listener;
    private final int targetPort;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private final Object gate = new Object();
    private volatile boolean stalled;
    private volatile boolean closed;

    public StallableProxy(int targetPort) throws IOException {
        this.targetPort = targetPort;
        this.listener = new ServerSocket();
        listener.bind(new InetSocketAddress("127.0.0.1", 0));
        Thread t = new Thread(this::acceptLoop, "proxy-accept");
        t.setDaemon(true);
        t.start();
    }

    public String hostPort() {
        return "127.0.0.1:" + listener.getLocalPort();
    }

    public void stall() {
        stalled = true;
    }

    public void resume() {
        synchronized (gate) {
            stalled = false;
            gate.notifyAll();
        }
    }

    /** Closes every connection currently proxied (both sides). New ones are still accepted. */
    public void sever() {
        for (Socket s : sockets) {
            closeQuietly(s);
        }
        sockets.clear();
    }

    private void awaitOpen() throws InterruptedException {
        synchronized (gate) {
            while (stalled && !closed) {
                gate.wait(1000);
            }
        }
    }

    private void acceptLoop() {
        while (!closed) {
            try {
                Socket client = listener.accept();
                sockets.add(client);
                Thread t = new Thread(() -> connect(client), "proxy-conn");
                t.setDaemon(true);
                t.start();
            } catch (IOException e) {
                return;
            }
        }
    }

    private void connect(Socket client) {
        try {
            awaitOpen();
            if (client.isClosed()) {
                return;
            }
            Socket upstream = new Socket();
            upstream.connect(new InetSocketAddress("127.0.0.1", targetPort), 10_000);
            sockets.add(upstream);
            pump(client, upstream);
            pump(upstream, client);
        } catch (IOException | InterruptedException e) {
            closeQuietly(client);
        }
    }

    private void pump(Socket from, Socket to) {
        Thread t = new Thread(() -> {
            byte[] buf = new byte[65536];
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                while (true) {
                    int n = in.read(buf);
                    if (n < 0) {
                        break;
                    }
                    awaitOpen();
                    out.write(buf, 0, n);
                    out.flush();
                }
            } catch (IOException | InterruptedException e) {
                // connection gone
            } finally {
                closeQuietly(from);
                closeQuietly(to);
            }
        }, "proxy-pump");
        t.setDaemon(true);
        t.start();
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // ignore
        }
    }

    @Override
    public void close() {
        closed = true;
        resume();
        try {
            listener.close();
        } catch (IOException ignored) {
            // ignore
        }
        sever();
    }
}
