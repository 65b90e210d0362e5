package zoolog.e2e.support;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * One server process driven through the shared launcher script tests/zk-server, so this suite talks to
 * zoolog (ZK_KIND=zoolog, the default) and Apache ZooKeeper (ZK_KIND=apache) through the same door.
 * The data directory survives stop/kill/restart; restart keeps the port.
 */
public final class ZkServer {
    private static final long SCRIPT_TIMEOUT_S = 120;

    private final Path dir;
    private int port = -1;

    public ZkServer(Path dir) {
        this.dir = dir;
    }

    public static String kind() {
        String k = System.getenv("ZK_KIND");
        return k == null || k.isEmpty() ? "zoolog" : k;
    }

    /**
     * ZK_TOPOLOGY: "standalone" (default) or "ensemble", where tests/zk-server starts a 3-server
     * ensemble and hands out the client port of its leader or of a follower.
     */
    public static boolean isEnsemble() {
        return "ensemble".equals(System.getenv("ZK_TOPOLOGY"));
    }

    /** The server.N=... lines of an ensemble started by tests/zk-server in dir (as member 1's zoo.cfg lists them). */
    public static List<String> ensembleServerLines(Path dir) {
        try {
            List<String> lines = new ArrayList<>();
            for (String line : Files.readAllLines(dir.resolve("s1").resolve("zoo.cfg"))) {
                if (line.startsWith("server.")) {
                    lines.add(line.trim());
                }
            }
            lines.sort(java.util.Comparator.comparingInt(l -> Integer.parseInt(l.substring(7, l.indexOf('=')))));
            return lines;
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    public static Path repoRoot() {
        String prop = System.getProperty("zoolog.repo.root");
        Path start = prop != null ? Path.of(prop) : Path.of("").toAbsolutePath();
        for (Path p = start.toAbsolutePath().normalize(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("tests/zk-server"))) {
                return p;
            }
        }
        throw new IllegalStateException("cannot find tests/zk-server above " + start);
    }

    /** settings: "key=value" zoo.cfg lines and "-Dprop=value" system properties. */
    public ZkServer start(String... settings) {
        List<String> args = new ArrayList<>(List.of("start", dir.toString()));
        args.addAll(Arrays.asList(settings));
        port = Integer.parseInt(run(args).trim());
        return this;
    }

    public void restart() {
        port = Integer.parseInt(run(List.of("restart", dir.toString())).trim());
    }

    public void stop() {
        run(List.of("stop", dir.toString()));
    }

    public void kill() {
        run(List.of("kill", dir.toString()));
    }

    public int port() {
        return port;
    }

    public String hostPort() {
        return "127.0.0.1:" + port;
    }

    public Path dir() {
        return dir;
    }

    private String run(List<String> args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(repoRoot().resolve("tests/zk-server").toString());
        cmd.addAll(args);
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.environment().put("ZK_KIND", kind());
        try {
            Path err = Files.createTempFile("zk-server", ".err");
            pb.redirectError(err.toFile());
            Process p = pb.start();
            byte[] out = p.getInputStream().readAllBytes();
            if (!p.waitFor(SCRIPT_TIMEOUT_S, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IllegalStateException("zk-server " + args + " did not finish");
            }
            String errText = Files.readString(err);
            Files.deleteIfExists(err);
            if (p.exitValue() != 0) {
                throw new IllegalStateException("zk-server " + args + " failed (" + p.exitValue() + "): " + errText);
            }
            return new String(out, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** Sends a four-letter word and returns the whole text reply. */
    public String fourLetter(String word) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 10_000);
            s.setSoTimeout(30_000);
            OutputStream out = s.getOutputStream();
            out.write(word.getBytes(StandardCharsets.US_ASCII));
            out.flush();
            s.shutdownOutput();
            InputStream in = s.getInputStream();
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            in.transferTo(buf);
            return buf.toString(StandardCharsets.UTF_8);
        }
    }

    /** The version from the srvr line "Zookeeper version: 3.9.3-abc, built on ...", e.g. "3.9.3". */
    public String version() throws IOException {
        for (String line : fourLetter("srvr").split("\n")) {
            if (line.startsWith("Zookeeper version:")) {
                String v = line.substring("Zookeeper version:".length()).trim();
                int end = 0;
                while (end < v.length() && (Character.isDigit(v.charAt(end)) || v.charAt(end) == '.')) {
                    end++;
                }
                return v.substring(0, end);
            }
        }
        return "";
    }

    /**
     * True when the server is Apache ZooKeeper older than 3.9 (Debian ships 3.8.0). The suite targets 3.9
     * behaviour and skips the few checks where 3.8 differs.
     */
    public boolean isApacheBefore39() throws IOException {
        if (!"apache".equals(kind())) {
            return false;
        }
        String[] parts = version().split("\\.");
        if (parts.length < 2) {
            return false;
        }
        int major = Integer.parseInt(parts[0]);
        int minor = Integer.parseInt(parts[1]);
        return major < 3 || (major == 3 && minor < 9);
    }
}
