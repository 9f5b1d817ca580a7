/*
 * The Java side of aiocoord's benchmark: Curator's recipes, and the plain ZooKeeper
 * client as the raw limit. Compiled by bench/run.py at bench time against Debian's
 * jars and run as a subprocess, speaking the same protocol as the Python runners:
 *
 *   java Bench LIBRARY SCENARIO CONTENDERS SECONDS CONNECT PATH [--variant V] [--warmup S]
 *   java Bench LIBRARY --list
 *
 * LIBRARY is "curator" (InterProcessMutex, DistributedAtomicLong, LeaderSelector,
 * DistributedDoubleBarrier) or "java" (the
 * plain client: pipelined async setData, sequential round trips). The result is
 * one JSON line on stdout. PATH exists already; everything goes below it.
 */

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicStats;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.AsyncCallback;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

public final class Bench {
    static final int PIPELINE_DEPTH = 1000;
    /** DistributedAtomicLong's optimistic retries: RetryNTimes(CAS_RETRIES, CAS_SLEEP_MS). */
    static final int CAS_RETRIES = 10;
    static final int CAS_SLEEP_MS = 1;
    static final long STOP_GRACE_MS = 60_000;
    static final int SESSION_TIMEOUT_MS = 10_000;
    /** Double barrier: how long the first participants get to queue before the last enters. */
    static final long BARRIER_STAGING_MS = 50;

    /** One run as the driver asks for it. */
    record Args(String library, String scenario, int contenders, double seconds,
                String connect, String path, String variant, double warmup) {
        static Args parse(String[] argv) {
            if (argv.length < 6 || argv.length % 2 != 0) {
                throw new IllegalArgumentException("usage: Bench LIBRARY SCENARIO CONTENDERS"
                        + " SECONDS CONNECT PATH [--variant V] [--warmup S] | Bench LIBRARY --list");
            }
            String variant = "";
            double warmup = 1.0;
            for (int i = 6; i < argv.length; i += 2) {
                switch (argv[i]) {
                    case "--variant" -> variant = argv[i + 1];
                    case "--warmup" -> warmup = Double.parseDouble(argv[i + 1]);
                    default -> throw new IllegalArgumentException("unknown option " + argv[i]);
                }
            }
            return new Args(argv[0], argv[1], Integer.parseInt(argv[2]),
                    Double.parseDouble(argv[3]), argv[4], argv[5], variant, warmup);
        }
    }

    /** The measured interval: operations finishing inside it count. */
    static final class Window {
        final long start;
        final long end;

        Window(Args args) {
            start = System.nanoTime() + (long) (args.warmup() * 1e9);
            end = start + (long) (args.seconds() * 1e9);
        }

        boolean over() {
            return System.nanoTime() >= end;
        }

        boolean counts(long finished) {
            return finished >= start && finished < end;
        }

        double seconds() {
            return (end - start) / 1e9;
        }
    }

    /** One contender's tally; merged at the end so threads never share one. */
    static final class Stats {
        final Window window;
        long ops;
        long conflicts;
        long failures;
        final Map<String, long[]> samples = new LinkedHashMap<>();
        final Map<String, Integer> counts = new LinkedHashMap<>();

        Stats(Window window) {
            this.window = window;
        }

        void record(String kind, long started, long finished) {
            if (!window.counts(finished)) {
                return;
            }
            ops++;
            long[] values = samples.computeIfAbsent(kind, k -> new long[1024]);
            int n = counts.getOrDefault(kind, 0);
            if (n == values.length) {
                values = Arrays.copyOf(values, n * 2);
                samples.put(kind, values);
            }
            values[n] = finished - started;
            counts.put(kind, n + 1);
        }
    }

    /** Mutual-exclusion check: how many contenders are inside the critical section. */
    static final class Gate {
        final AtomicInteger inside = new AtomicInteger();
        final AtomicLong entries = new AtomicLong();
        volatile String violation;

        void enter() {
            int now = inside.incrementAndGet();
            entries.incrementAndGet();
            if (now > 1 && violation == null) {
                violation = now + " contenders inside the critical section at once";
            }
        }

        void leave() {
            inside.decrementAndGet();
        }
    }

    interface Body {
        void run() throws Exception;
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length == 2 && argv[1].equals("--list")) {
            System.out.println(listing(argv[0]));
            return;
        }
        Args args;
        try {
            args = Args.parse(argv);
        } catch (IllegalArgumentException error) {
            System.err.println(error.getMessage());
            System.exit(2);
            return;
        }
        String line;
        try {
            line = run(args);
        } catch (Throwable error) {
            error.printStackTrace();
            System.out.println("{\"library\": " + quote(args.library()) + ", \"error\": "
                    + quote(error.getClass().getSimpleName() + ": " + error.getMessage()) + "}");
            System.out.flush();
            System.exit(1);
            return;
        }
        System.out.println(line);
        System.out.flush();
        System.exit(0); // client threads must not keep the JVM alive
    }

    static String listing(String library) {
        String offers = switch (library) {
            case "curator" -> offer("mutex", "", "1, 8, 32") + ", " + offer("counter", "", "1, 8, 32")
                    + ", " + offer("counter", "promoted", "1, 8, 32") + ", " + offer("election", "", "8")
                    + ", " + offer("barrier", "", "8, 32");
            case "java" -> offer("pipelined", "", "1") + ", " + offer("latency", "", "1");
            default -> throw new IllegalArgumentException("unknown library " + library);
        };
        return "{\"library\": " + quote(library) + ", \"offers\": [" + offers + "]}";
    }

    static String offer(String scenario, String variant, String contenders) {
        return "{\"scenario\": " + quote(scenario) + ", \"variant\": " + quote(variant)
                + ", \"contenders\": [" + contenders + "]}";
    }

    static String run(Args args) throws Exception {
        String key = args.library() + " " + args.scenario() + " " + args.variant();
        return switch (key.trim()) {
            case "curator mutex" -> curatorMutex(args);
            case "curator counter" -> curatorCounter(args, false);
            case "curator counter promoted" -> curatorCounter(args, true);
            case "curator election" -> curatorElection(args);
            case "curator barrier" -> curatorBarrier(args);
            case "java pipelined" -> rawPipelined(args);
            case "java latency" -> rawLatency(args);
            default -> throw new IllegalArgumentException("not offered: " + key.trim());
        };
    }

    // --- Curator -----------------------------------------------------------------

    static List<CuratorFramework> curatorClients(String connect, int count) throws Exception {
        List<CuratorFramework> clients = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            CuratorFramework client = CuratorFrameworkFactory.newClient(
                    connect, SESSION_TIMEOUT_MS, 15_000, new ExponentialBackoffRetry(100, 3));
            client.start();
            clients.add(client);
        }
        for (CuratorFramework client : clients) {
            if (!client.blockUntilConnected(15, TimeUnit.SECONDS)) {
                throw new TimeoutException("Curator did not connect to " + connect);
            }
        }
        return clients;
    }

    static void closeAll(List<CuratorFramework> clients) {
        for (CuratorFramework client : clients) {
            client.close();
        }
    }

    /** Hand-offs/s: each contender loops acquire, a tiny critical section, release. */
    static String curatorMutex(Args args) throws Exception {
        List<CuratorFramework> clients = curatorClients(args.connect(), args.contenders());
        try {
            Window window = new Window(args);
            Gate gate = new Gate();
            List<Stats> tallies = new ArrayList<>();
            List<Body> bodies = new ArrayList<>();
            for (CuratorFramework client : clients) {
                Stats stats = new Stats(window);
                tallies.add(stats);
                InterProcessMutex mutex = new InterProcessMutex(client, args.path() + "/lock");
                bodies.add(() -> {
                    while (!window.over()) {
                        long started = System.nanoTime();
                        mutex.acquire();
                        long held = System.nanoTime();
                        try {
                            gate.enter();
                            Thread.yield();
                            gate.leave();
                        } finally {
                            mutex.release();
                        }
                        stats.record("acquire", started, held);
                    }
                });
            }
            runThreads(window, bodies);
            return result(args, window, tallies, gate.violation,
                    "\"entries\": " + gate.entries.get());
        } finally {
            closeAll(clients);
        }
    }

    /**
     * Successful increments/s of DistributedAtomicLong, optimistic with
     * RetryNTimes(CAS_RETRIES, CAS_SLEEP_MS), optionally promoted to a lock when
     * those run out. The final value must equal the increments that succeeded.
     */
    static String curatorCounter(Args args, boolean promoted) throws Exception {
        String path = args.path() + "/counter";
        List<CuratorFramework> clients = curatorClients(args.connect(), args.contenders());
        try {
            Window window = new Window(args);
            AtomicLong applied = new AtomicLong();
            AtomicLong promotions = new AtomicLong();
            List<Stats> tallies = new ArrayList<>();
            List<Body> bodies = new ArrayList<>();
            for (CuratorFramework client : clients) {
                Stats stats = new Stats(window);
                tallies.add(stats);
                DistributedAtomicLong counter = promoted
                        ? new DistributedAtomicLong(client, path, casRetry(), PromotedToLock.builder()
                                .lockPath(args.path() + "/counter-lock")
                                .retryPolicy(casRetry())
                                .timeout(10, TimeUnit.SECONDS)
                                .build())
                        : new DistributedAtomicLong(client, path, casRetry());
                bodies.add(() -> {
                    while (!window.over()) {
                        long started = System.nanoTime();
                        AtomicValue<Long> value = counter.increment();
                        long finished = System.nanoTime();
                        AtomicStats tries = value.getStats();
                        int attempts = tries.getOptimisticTries() + tries.getPromotedLockTries();
                        if (value.succeeded()) {
                            applied.incrementAndGet();
                            stats.record("increment", started, finished);
                        }
                        if (window.counts(finished)) {
                            stats.conflicts += attempts - (value.succeeded() ? 1 : 0);
                            stats.failures += value.succeeded() ? 0 : 1;
                            if (tries.getPromotedLockTries() > 0) {
                                promotions.incrementAndGet();
                            }
                        }
                    }
                });
            }
            runThreads(window, bodies);
            long value = new DistributedAtomicLong(clients.get(0), path, new RetryNTimes(3, 10))
                    .get().postValue();
            String violation = value == applied.get() ? null
                    : "counter reads " + value + " after " + applied.get() + " successful increments";
            return result(args, window, tallies, violation, "\"final_value\": " + value
                    + ", \"promotions\": " + promotions.get()
                    + ", \"retry\": " + quote("RetryNTimes(" + CAS_RETRIES + ", " + CAS_SLEEP_MS + ")"));
        } finally {
            closeAll(clients);
        }
    }

    /**
     * Leader hand-over: every contender runs a LeaderSelector with autoRequeue whose
     * term is empty. A sample is the time from one leader's takeLeadership returning
     * (it gives leadership up) to the next one's takeLeadership starting.
     */
    static String curatorElection(Args args) throws Exception {
        List<CuratorFramework> clients = curatorClients(args.connect(), args.contenders());
        List<LeaderSelector> selectors = new ArrayList<>();
        try {
            Window window = new Window(args);
            Gate gate = new Gate();
            Stats stats = new Stats(window);
            AtomicLong lastEnd = new AtomicLong();
            for (int i = 0; i < clients.size(); i++) {
                LeaderSelector selector = new LeaderSelector(clients.get(i), args.path() + "/election",
                        new LeaderSelectorListenerAdapter() {
                            @Override
                            public void takeLeadership(CuratorFramework client) {
                                long started = System.nanoTime();
                                gate.enter();
                                long previous = lastEnd.get();
                                Thread.yield();
                                gate.leave();
                                synchronized (stats) {
                                    if (previous != 0) {
                                        stats.record("handover", previous, started);
                                    }
                                }
                                lastEnd.set(System.nanoTime());
                            }
                        });
                selector.setId("p" + i);
                selector.autoRequeue();
                selectors.add(selector);
            }
            for (LeaderSelector selector : selectors) {
                selector.start();
            }
            long left;
            while ((left = window.end - System.nanoTime()) > 0) {
                Thread.sleep(Math.max(1, left / 1_000_000L));
            }
            for (LeaderSelector selector : selectors) {
                selector.close();
            }
            selectors.clear();
            synchronized (stats) {
                return result(args, window, List.of(stats), gate.violation,
                        "\"terms\": " + gate.entries.get());
            }
        } finally {
            for (LeaderSelector selector : selectors) {
                selector.close();
            }
            closeAll(clients);
        }
    }

    /**
     * Double barrier release: in each round all contenders but one enter and wait;
     * then the last one enters. A sample is the time from the last enter call to
     * the moment every contender's enter has returned. Then all leave.
     */
    static String curatorBarrier(Args args) throws Exception {
        int members = args.contenders();
        List<CuratorFramework> clients = curatorClients(args.connect(), members);
        ExecutorService pool = Executors.newFixedThreadPool(members);
        try {
            Window window = new Window(args);
            Stats stats = new Stats(window);
            String violation = null;
            long rounds = 0;
            String path = args.path() + "/barrier";
            while (!window.over() && violation == null) {
                List<DistributedDoubleBarrier> barriers = new ArrayList<>();
                for (CuratorFramework client : clients) {
                    barriers.add(new DistributedDoubleBarrier(client, path, members));
                }
                List<Future<Long>> entered = new ArrayList<>();
                for (int i = 0; i < members - 1; i++) {
                    DistributedDoubleBarrier barrier = barriers.get(i);
                    entered.add(pool.submit(() -> {
                        barrier.enter();
                        return System.nanoTime();
                    }));
                }
                Thread.sleep(BARRIER_STAGING_MS);
                long started = System.nanoTime();
                DistributedDoubleBarrier last = barriers.get(members - 1);
                entered.add(pool.submit(() -> {
                    last.enter();
                    return System.nanoTime();
                }));
                long released = 0;
                for (Future<Long> future : entered) {
                    long at = future.get(STOP_GRACE_MS, TimeUnit.MILLISECONDS);
                    if (at < started) {
                        violation = "a participant passed enter before the last one entered";
                    }
                    released = Math.max(released, at);
                }
                stats.record("release", started, released);
                List<Future<Boolean>> left = new ArrayList<>();
                for (DistributedDoubleBarrier barrier : barriers) {
                    left.add(pool.submit(() -> barrier.leave(STOP_GRACE_MS, TimeUnit.MILLISECONDS)));
                }
                for (Future<Boolean> future : left) {
                    if (!future.get(STOP_GRACE_MS, TimeUnit.MILLISECONDS)) {
                        violation = "a participant's leave timed out";
                    }
                }
                rounds++;
            }
            return result(args, window, List.of(stats), violation, "\"rounds\": " + rounds);
        } finally {
            pool.shutdownNow();
            closeAll(clients);
        }
    }

    static RetryNTimes casRetry() {
        return new RetryNTimes(CAS_RETRIES, CAS_SLEEP_MS);
    }

    // --- the plain ZooKeeper client ------------------------------------------------

    static ZooKeeper rawClient(String connect) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(connect, SESSION_TIMEOUT_MS, event -> {
            if (event.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(15, TimeUnit.SECONDS)) {
            zk.close();
            throw new TimeoutException("ZooKeeper client did not connect to " + connect);
        }
        return zk;
    }

    static String createNode(ZooKeeper zk, String path) throws Exception {
        return zk.create(path, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
    }

    /** Callbacks run one at a time on the client's event thread; the semaphore's
     *  release/acquire orders their writes before the main thread's reads. */
    static final class Acks {
        long acked;
        long versionSum;
        long errors;
        int firstError;
    }

    /** Raw request throughput: PIPELINE_DEPTH async setData requests outstanding. */
    static String rawPipelined(Args args) throws Exception {
        ZooKeeper zk = rawClient(args.connect());
        try {
            String node = createNode(zk, args.path() + "/node");
            Window window = new Window(args);
            Stats stats = new Stats(window);
            Semaphore slots = new Semaphore(PIPELINE_DEPTH);
            Acks acks = new Acks();
            AsyncCallback.StatCallback done = (rc, path, ctx, stat) -> {
                long finished = System.nanoTime();
                if (rc == 0) {
                    stats.record("set", (Long) ctx, finished);
                    acks.acked++;
                    acks.versionSum += stat.getVersion();
                } else if (acks.errors++ == 0) {
                    acks.firstError = rc;
                }
                slots.release();
            };
            byte[] payload = "xxxxxxxxxxxxxxxx".getBytes(StandardCharsets.US_ASCII);
            while (!window.over()) {
                slots.acquire();
                zk.setData(node, payload, -1, done, System.nanoTime());
            }
            if (!slots.tryAcquire(PIPELINE_DEPTH, STOP_GRACE_MS, TimeUnit.MILLISECONDS)) {
                throw new TimeoutException("replies still outstanding long after the window");
            }
            long version = zk.exists(node, false).getVersion();
            String violation = null;
            if (acks.errors > 0) {
                violation = acks.errors + " sets failed (first code " + acks.firstError + ")";
            } else if (version != acks.acked || acks.versionSum != acks.acked * (acks.acked + 1) / 2) {
                violation = acks.acked + " sets acknowledged but the node is at version " + version;
            }
            return result(args, window, List.of(stats), violation,
                    "\"depth\": " + PIPELINE_DEPTH + ", \"acked\": " + acks.acked);
        } finally {
            zk.close();
        }
    }

    /** Single round trips: set, then read back, one request at a time. */
    static String rawLatency(Args args) throws Exception {
        ZooKeeper zk = rawClient(args.connect());
        try {
            String node = createNode(zk, args.path() + "/node");
            Window window = new Window(args);
            Stats stats = new Stats(window);
            String violation = null;
            long sequence = 0;
            while (!window.over()) {
                byte[] data = Long.toString(++sequence).getBytes(StandardCharsets.US_ASCII);
                long started = System.nanoTime();
                zk.setData(node, data, -1);
                long written = System.nanoTime();
                byte[] read = zk.getData(node, false, null);
                long finished = System.nanoTime();
                stats.record("set", started, written);
                stats.record("get", written, finished);
                if (!Arrays.equals(read, data) && violation == null) {
                    violation = "read " + new String(read, StandardCharsets.US_ASCII)
                            + " right after writing " + sequence;
                }
            }
            return result(args, window, List.of(stats), violation, "");
        } finally {
            zk.close();
        }
    }

    // --- running and reporting -------------------------------------------------------

    static void runThreads(Window window, List<Body> bodies) throws Exception {
        List<Throwable> errors = java.util.Collections.synchronizedList(new ArrayList<>());
        List<Thread> threads = new ArrayList<>();
        for (Body body : bodies) {
            Thread thread = new Thread(() -> {
                try {
                    body.run();
                } catch (Throwable error) {
                    errors.add(error);
                }
            });
            thread.setDaemon(true);
            thread.start();
            threads.add(thread);
        }
        long deadline = window.end + STOP_GRACE_MS * 1_000_000L;
        for (Thread thread : threads) {
            long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000L);
            thread.join(left);
            if (thread.isAlive()) {
                throw new TimeoutException("contenders still running long after the window");
            }
        }
        if (!errors.isEmpty()) {
            throw new RuntimeException(errors.get(0));
        }
    }

    static String result(Args args, Window window, List<Stats> tallies, String violation,
                         String extra) {
        long ops = 0;
        long conflicts = 0;
        long failures = 0;
        Map<String, long[]> merged = new LinkedHashMap<>();
        Map<String, Integer> sizes = new LinkedHashMap<>();
        for (Stats stats : tallies) {
            ops += stats.ops;
            conflicts += stats.conflicts;
            failures += stats.failures;
            for (Map.Entry<String, long[]> entry : stats.samples.entrySet()) {
                int n = stats.counts.get(entry.getKey());
                long[] into = merged.getOrDefault(entry.getKey(), new long[0]);
                int have = sizes.getOrDefault(entry.getKey(), 0);
                into = Arrays.copyOf(into, have + n);
                System.arraycopy(entry.getValue(), 0, into, have, n);
                merged.put(entry.getKey(), into);
                sizes.put(entry.getKey(), have + n);
            }
        }
        StringBuilder latency = new StringBuilder();
        for (Map.Entry<String, long[]> entry : merged.entrySet()) {
            if (latency.length() > 0) {
                latency.append(", ");
            }
            latency.append(quote(entry.getKey())).append(": ").append(percentiles(entry.getValue()));
        }
        return "{\"library\": " + quote(args.library())
                + ", \"variant\": " + quote(args.variant())
                + ", \"scenario\": " + quote(args.scenario())
                + ", \"contenders\": " + args.contenders()
                + ", \"window_s\": " + number(window.seconds())
                + ", \"ops\": " + ops
                + ", \"rate\": " + number(ops / window.seconds())
                + ", \"latency_ms\": {" + latency + "}"
                + ", \"conflicts\": " + conflicts
                + ", \"failures\": " + failures
                + ", \"violation\": " + (violation == null ? "null" : quote(violation))
                + ", \"extra\": {" + extra + "}}";
    }

    /** Nearest-rank p50/p90/p99/max of latencies in nanoseconds, in milliseconds. */
    static String percentiles(long[] nanos) {
        long[] sorted = nanos.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        if (n == 0) {
            return "{\"n\": 0}";
        }
        return "{\"n\": " + n + ", \"p50\": " + rank(sorted, 50) + ", \"p90\": " + rank(sorted, 90)
                + ", \"p99\": " + rank(sorted, 99) + ", \"max\": " + number(sorted[n - 1] / 1e6) + "}";
    }

    static String rank(long[] sorted, double p) {
        int index = Math.max(0, (int) Math.ceil(p / 100 * sorted.length) - 1);
        return number(sorted[index] / 1e6);
    }

    static String number(double value) {
        return String.format(Locale.ROOT, "%.6f", value);
    }

    static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }
}
