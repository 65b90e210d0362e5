package zoolog.e2e.support;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.Watcher.Event.EventType;

/** A watcher that records every event it receives, in delivery order. */
public final class Events implements Watcher {
    public static final long WAIT_S = 60;

    private final LinkedBlockingQueue<WatchedEvent> queue = new LinkedBlockingQueue<>();

    @Override
    public void process(WatchedEvent event) {
        queue.add(event);
    }

    /** Waits (bounded) for the next event. */
    public WatchedEvent next() throws InterruptedException {
        WatchedEvent e = queue.poll(WAIT_S, TimeUnit.SECONDS);
        if (e == null) {
            throw new AssertionError("no watch event within " + WAIT_S + " s");
        }
        return e;
    }

    /** Waits (bounded) for the next node event, skipping session-state events (type None). */
    public WatchedEvent nextNodeEvent() throws InterruptedException {
        while (true) {
            WatchedEvent e = next();
            if (e.getType() != EventType.None) {
                return e;
            }
        }
    }

    /** Everything received so far (call after ZkTestBase.barrier for an exact picture). */
    public List<WatchedEvent> drain() {
        List<WatchedEvent> out = new ArrayList<>();
        queue.drainTo(out);
        return out;
    }

    /** Node events only (type != None), as "Type path" strings, drained. */
    public List<String> drainNodeEvents() {
        List<String> out = new ArrayList<>();
        for (WatchedEvent e : drain()) {
            if (e.getType() != EventType.None) {
                out.add(describe(e));
            }
        }
        return out;
    }

    public static String describe(WatchedEvent e) {
        return e.getType() + " " + e.getPath();
    }
}
