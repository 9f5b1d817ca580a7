/*
 * The Java side of aiocoord's benchmark: Curator's recipes, and the plain ZooKeeper
 * client as the raw limit. Compiled by bench/run.py at bench time against Debian's
 * jars and run as a subprocess, speaking the same protocol as the Python runners:
 *
 *   java Bench LIBRARY SCENARIO CONTENDERS SECONDS CONNECT PATH [--variant V] [--warmup S]
 *        [--apart yes]
 *   java Bench LIBRARY --list
 *
 * LIBRARY is "curator" (InterProcessMutex, DistributedAtomicLong, LeaderSelector,
 * DistributedDoubleBarrier, SimpleDistributedQueue, DistributedQueue, CuratorCache; service
 * discovery's ServiceCache and ServiceProvider in BenchDiscovery.java) or "java" (the
 * plain client: pipelined async setData, sequential round trips). The result is
 * one JSON line on stdout. PATH exists already; everything goes below it.
 */

import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BiConsumer;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicStats;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.cache.CuratorCacheListenerBuilder;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.recipes.queue.SimpleDistributedQueue;
import org.apache.curator.framework.state.ConnectionState;
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
    // Queues and caches: the same numbers as bench/runners/_common.py.
    /** The queue producer keeps at most this many items put but not yet taken. */
    static final int QUEUE_BACKLOG = 200;
    /** Puts the producer keeps outstanding (threads sharing its one session). */
    static final int PRODUCER_CONCURRENCY = 8;
    static final int DRAIN_ITEMS = 10_000;
    static final long DRAIN_LIMIT_MS = 600_000;
    static final long QUEUE_GRACE_MS = 60_000;
    /** How often a waiting consumer looks whether it should stop. */
    static final long POLL_MS = 100;
    static final int[] TREE_SHAPE = {10, 10, 100};
    static final int[] SMALL_TREE_SHAPE = {10, 10, 10};
    static final int VALUE_SIZE = 100;
    static final int WARM_ALONE = 3000;
    static final int SET_RATE = 1000;
    static final int CREATE_DEPTH = 1000;
    static final long CONVERGE_MS = 30_000;

    /** One run as the driver asks for it. */
    record Args(String library, String scenario, int contenders, double seconds,
                String connect, String path, String variant, double warmup, boolean apart) {
        static Args parse(String[] argv) {
            if (argv.length < 6 || argv.length % 2 != 0) {
                throw new IllegalArgumentException("usage: Bench LIBRARY SCENARIO CONTENDERS"
                        + " SECONDS CONNECT PATH [--variant V] [--warmup S] [--apart yes]"
                        + " | Bench LIBRARY --list");
            }
            String variant = "";
            double warmup = 1.0;
            boolean apart = false;
            for (int i = 6; i < argv.length; i += 2) {
                switch (argv[i]) {
                    case "--variant" -> variant = argv[i + 1];
                    case "--warmup" -> warmup = Double.parseDouble(argv[i + 1]);
                    case "--apart" -> apart = argv[i + 1].equals("yes");
                    default -> throw new IllegalArgumentException("unknown option " + argv[i]);
                }
            }
            return new Args(argv[0], argv[1], Integer.parseInt(argv[2]),
                    Double.parseDouble(argv[3]), argv[4], argv[5], variant, warmup, apart);
        }
    }

    /** The measured interval: operations finishing inside it count. */
    static final class Window {
        final long start;
        final long end;

        Window(Args args) {
            this(args.seconds(), args.warmup());
        }

        Window(double seconds, double warmup) {
            start = System.nanoTime() + (long) (warmup * 1e9);
            end = start + (long) (seconds * 1e9);
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

        /** Count an operation without a latency, if it finished in the window. */
        void count(long finished) {
            if (window.counts(finished)) {
                ops++;
            }
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
                    + ", " + offer("barrier", "", "8, 32")
                    + ", " + offer("queue", "simple", "1, 4, 8") + ", " + offer("queue", "distributed", "1, 4, 8")
                    + ", " + offer("drain", "simple", "1") + ", " + offer("drain", "distributed", "1")
                    + ", " + offer("cache_build", "", "1") + ", " + offer("cache_events", "", "1")
                    + ", " + offer("discovery_events", "", "1, 8, 32")
                    + ", " + offer("discovery_pick", "round_robin", "1")
                    + ", " + offer("discovery_pick", "random", "1");
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
        if (args.apart() && !key.startsWith("curator counter")) {
            throw new IllegalArgumentException("--apart is for the curator counter only");
        }
        return switch (key.trim()) {
            case "curator mutex" -> curatorMutex(args);
            case "curator counter" -> curatorCounter(args, false);
            case "curator counter promoted" -> curatorCounter(args, true);
            case "curator election" -> curatorElection(args);
            case "curator barrier" -> curatorBarrier(args);
            case "curator queue simple" -> curatorQueue(args, false);
            case "curator queue distributed" -> curatorQueue(args, true);
            case "curator drain simple" -> curatorDrain(args, false);
            case "curator drain distributed" -> curatorDrain(args, true);
            case "curator cache_build" -> curatorCacheBuild(args);
            case "curator cache_events" -> curatorCacheEvents(args);
            case "curator discovery_events" -> BenchDiscovery.events(args);
            case "curator discovery_pick round_robin", "curator discovery_pick random" ->
                    BenchDiscovery.pick(args);
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

    /**
     * One of several processes measured together: say "ready" once connected, and
     * wait for the wall-clock instant (epoch seconds) the driver answers with, so
     * that every process's window is the same interval however long each took to
     * start (a JVM's start-up on a shared core takes seconds).
     */
    static void startTogether() throws Exception {
        System.out.println("ready");
        System.out.flush();
        String line = new java.io.BufferedReader(new java.io.InputStreamReader(System.in,
                StandardCharsets.UTF_8)).readLine();
        if (line == null) {
            throw new IllegalStateException("no start instant on stdin");
        }
        long wait = (long) (Double.parseDouble(line.trim()) * 1000) - System.currentTimeMillis();
        if (wait > 0) {
            Thread.sleep(wait);
        }
    }

    /**
     * Increments on a counter of this process's own before the run: a JVM's
     * compilers take thousands of calls to reach their steady code, and 32
     * JVMs sharing one core, contending, do a few hundred each in a minute.
     * Alone, each does its share in seconds, so the window measures Curator as
     * a long-running service runs it, not its interpreter.
     */
    static void warmAlone(CuratorFramework client, String path) throws Exception {
        String own = path + "/warm-" + ProcessHandle.current().pid();
        DistributedAtomicLong counter = new DistributedAtomicLong(client, own, casRetry());
        for (int i = 0; i < WARM_ALONE; i++) {
            counter.increment();
        }
    }

    /** Every latency of one kind recorded in the window, in nanoseconds, as a JSON list. */
    static String rawLatencies(List<Stats> tallies, String kind) {
        StringBuilder out = new StringBuilder("[");
        for (Stats stats : tallies) {
            long[] values = stats.samples.get(kind);
            int n = stats.counts.getOrDefault(kind, 0);
            for (int i = 0; i < n; i++) {
                if (out.length() > 1) {
                    out.append(',');
                }
                out.append(values[i]);
            }
        }
        return out.append(']').toString();
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
            if (args.apart()) {
                warmAlone(clients.get(0), args.path());
                startTogether();
            }
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
            String retry = ", \"retry\": " + quote("RetryNTimes(" + CAS_RETRIES + ", " + CAS_SLEEP_MS + ")");
            if (args.apart()) {
                // Other processes add too: the driver checks the sum of everyone's
                // applied increments against the final value, and merges latencies.
                return result(args, window, tallies, null, "\"applied\": " + applied.get()
                        + ", \"latencies_ns\": " + rawLatencies(tallies, "increment") + retry);
            }
            String violation = value == applied.get() ? null
                    : "counter reads " + value + " after " + applied.get() + " successful increments";
            return result(args, window, tallies, violation, "\"final_value\": " + value
                    + ", \"promotions\": " + promotions.get() + retry);
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

    // --- Curator queues ------------------------------------------------------------

    /**
     * The exactly-once check of a queue: the producer puts unique items and records
     * each acknowledged put; consumers record what they take. Every acknowledged
     * item must be taken exactly once.
     */
    static final class Ledger {
        final AtomicLong numbers = new AtomicLong();
        final Set<Long> acked = ConcurrentHashMap.newKeySet();
        final Set<Long> taken = ConcurrentHashMap.newKeySet();
        final AtomicLong duplicates = new AtomicLong();
        final AtomicLong foreign = new AtomicLong();

        long next() {
            return numbers.getAndIncrement();
        }

        static byte[] bytes(long number) {
            return Long.toString(number).getBytes(StandardCharsets.US_ASCII);
        }

        void putDone(long number) {
            acked.add(number);
        }

        void took(byte[] data) {
            long number;
            try {
                number = Long.parseLong(new String(data, StandardCharsets.US_ASCII));
            } catch (NumberFormatException error) {
                foreign.incrementAndGet();
                return;
            }
            if (!taken.add(number)) {
                duplicates.incrementAndGet();
            }
        }

        boolean complete() {
            return taken.size() >= acked.size() && taken.containsAll(acked);
        }

        long lost() {
            return acked.stream().filter(n -> !taken.contains(n)).count();
        }

        String violation(boolean finished) {
            List<String> problems = new ArrayList<>();
            if (duplicates.get() > 0) {
                problems.add(duplicates.get() + " items taken twice");
            }
            if (finished && lost() > 0) {
                problems.add(lost() + " acknowledged items never taken");
            }
            if (foreign.get() > 0) {
                problems.add(foreign.get() + " items taken that no producer put");
            }
            return problems.isEmpty() ? null : String.join("; ", problems);
        }

        String extra() {
            long unacked = taken.stream().filter(n -> !acked.contains(n)).count();
            return "\"items\": " + taken.size() + ", \"acked\": " + acked.size()
                    + ", \"duplicates\": " + duplicates.get() + ", \"lost\": " + lost()
                    + ", \"taken_unacknowledged\": " + unacked;
        }
    }

    interface Put {
        void put(byte[] item) throws Exception;
    }

    /** Where a consumer hands what it took: the item, and when its take call began (0: pushed). */
    interface Sink {
        void take(byte[] item, long started);
    }

    /** A consumer in its own session: pulls (SimpleDistributedQueue) or is pushed to. */
    interface Taker {
        void start(Sink sink) throws Exception;

        boolean failed();

        void stop() throws Exception;
    }

    static final QueueSerializer<byte[]> BYTES = new QueueSerializer<>() {
        @Override
        public byte[] serialize(byte[] item) {
            return item;
        }

        @Override
        public byte[] deserialize(byte[] bytes) {
            return bytes;
        }
    };

    /** SimpleDistributedQueue: a thread polling (it waits on a children watch). */
    static final class SimpleTaker implements Taker {
        final SimpleDistributedQueue queue;
        volatile boolean stopped;
        volatile Throwable error;
        Thread thread;

        SimpleTaker(CuratorFramework client, String path) {
            queue = new SimpleDistributedQueue(client, path);
        }

        @Override
        public void start(Sink sink) {
            thread = new Thread(() -> {
                try {
                    while (!stopped) {
                        long started = System.nanoTime();
                        byte[] item = queue.poll(POLL_MS, TimeUnit.MILLISECONDS);
                        if (item != null) {
                            sink.take(item, started);
                        }
                    }
                } catch (Throwable failure) {
                    error = failure;
                }
            });
            thread.setDaemon(true);
            thread.start();
        }

        @Override
        public boolean failed() {
            return error != null;
        }

        @Override
        public void stop() throws Exception {
            stopped = true;
            if (thread == null) {
                return;
            }
            thread.join(STOP_GRACE_MS);
            if (error != null) {
                throw new RuntimeException("a consumer failed", error);
            }
            if (thread.isAlive()) {
                throw new TimeoutException("a consumer still running after it was stopped");
            }
        }
    }

    /** DistributedQueue with a QueueConsumer: Curator pushes every item it takes. */
    static final class DistributedTaker implements Taker {
        final CuratorFramework client;
        final String path;
        DistributedQueue<byte[]> queue;

        DistributedTaker(CuratorFramework client, String path) {
            this.client = client;
            this.path = path;
        }

        @Override
        public void start(Sink sink) throws Exception {
            QueueConsumer<byte[]> consumer = new QueueConsumer<>() {
                @Override
                public void consumeMessage(byte[] item) {
                    sink.take(item, 0);
                }

                @Override
                public void stateChanged(CuratorFramework client, ConnectionState state) {
                }
            };
            queue = QueueBuilder.builder(client, consumer, BYTES, path).buildQueue();
            queue.start();
        }

        @Override
        public boolean failed() {
            return false;
        }

        @Override
        public void stop() throws Exception {
            if (queue != null) {
                queue.close();
            }
        }
    }

    static Taker taker(CuratorFramework client, String path, boolean distributed) {
        return distributed ? new DistributedTaker(client, path) : new SimpleTaker(client, path);
    }

    /** The producer's put; a DistributedQueue it opens goes into closers. */
    static Put producer(CuratorFramework client, String path, boolean distributed,
                        List<DistributedQueue<byte[]>> closers) throws Exception {
        if (!distributed) {
            SimpleDistributedQueue queue = new SimpleDistributedQueue(client, path);
            return queue::offer;
        }
        // Synchronous puts, so that "acknowledged" means the item node exists.
        DistributedQueue<byte[]> queue = QueueBuilder.builder(client, null, BYTES, path)
                .putInBackground(false).buildQueue();
        queue.start();
        closers.add(queue);
        return queue::put;
    }

    static void closeQueues(List<DistributedQueue<byte[]>> queues) {
        for (DistributedQueue<byte[]> queue : queues) {
            try {
                queue.close();
            } catch (Exception ignored) {
                // closing is best effort
            }
        }
    }

    /**
     * One producer (PRODUCER_CONCURRENCY threads sharing its session, at most
     * QUEUE_BACKLOG items put but not taken) and the takers until the window ends;
     * then the takers take what is left. True if every acknowledged item was taken.
     */
    static boolean flow(Window window, Ledger ledger, Put put, List<Taker> takers,
                        List<Stats> tallies) throws Exception {
        Semaphore permits = new Semaphore(QUEUE_BACKLOG);
        boolean complete = false;
        try {
            for (int i = 0; i < takers.size(); i++) {
                Stats stats = tallies.get(i);
                takers.get(i).start((item, started) -> {
                    long now = System.nanoTime();
                    synchronized (stats) {
                        if (started != 0) {
                            stats.record("take", started, now);
                        } else {
                            stats.count(now);
                        }
                    }
                    ledger.took(item);
                    permits.release();
                });
            }
            List<Body> producers = new ArrayList<>();
            for (int i = 0; i < PRODUCER_CONCURRENCY; i++) {
                producers.add(() -> {
                    while (!window.over()) {
                        if (!permits.tryAcquire(POLL_MS, TimeUnit.MILLISECONDS)) {
                            continue;
                        }
                        long number = ledger.next();
                        put.put(Ledger.bytes(number));
                        ledger.putDone(number);
                    }
                });
            }
            runThreads(window, producers);
            long deadline = System.nanoTime() + QUEUE_GRACE_MS * 1_000_000L;
            while (!(complete = ledger.complete()) && System.nanoTime() < deadline
                    && takers.stream().noneMatch(Taker::failed)) {
                Thread.sleep(10);
            }
        } finally {
            for (Taker taker : takers) {
                taker.stop();
            }
        }
        return complete;
    }

    /** Items/s through one queue: one producer, CONTENDERS consumers, each in its own session. */
    static String curatorQueue(Args args, boolean distributed) throws Exception {
        String path = args.path() + "/queue";
        List<CuratorFramework> clients = curatorClients(args.connect(), 1 + args.contenders());
        List<DistributedQueue<byte[]>> queues = new ArrayList<>();
        try {
            Put put = producer(clients.get(0), path, distributed, queues);
            List<Taker> takers = new ArrayList<>();
            List<Stats> tallies = new ArrayList<>();
            Window window = new Window(args);
            for (CuratorFramework client : clients.subList(1, clients.size())) {
                takers.add(taker(client, path, distributed));
                tallies.add(new Stats(window));
            }
            Ledger ledger = new Ledger();
            boolean complete = flow(window, ledger, put, takers, tallies);
            String violation = ledger.violation(true);
            if (!complete && violation == null) {
                violation = "items still missing " + QUEUE_GRACE_MS / 1000 + " s after the window";
            }
            return result(args, window, tallies, violation, ledger.extra()
                    + ", \"backlog\": " + QUEUE_BACKLOG
                    + ", \"producer_concurrency\": " + PRODUCER_CONCURRENCY);
        } finally {
            closeQueues(queues);
            closeAll(clients);
        }
    }

    /**
     * Put DRAIN_ITEMS items (PRODUCER_CONCURRENCY threads), then take them all with
     * one consumer in another session; the rate is the drain's. The warm-up runs
     * the producer and a consumer on another queue.
     */
    static String curatorDrain(Args args, boolean distributed) throws Exception {
        List<CuratorFramework> clients = curatorClients(args.connect(), 2);
        List<DistributedQueue<byte[]>> queues = new ArrayList<>();
        try {
            CuratorFramework producing = clients.get(0);
            CuratorFramework consuming = clients.get(1);
            Ledger warmLedger = new Ledger();
            if (args.warmup() > 0) {
                String warmPath = args.path() + "/warm";
                Window warm = new Window(args.warmup(), 0);
                flow(warm, warmLedger, producer(producing, warmPath, distributed, queues),
                        List.of(taker(consuming, warmPath, distributed)), List.of(new Stats(warm)));
            }
            String path = args.path() + "/queue";
            Put put = producer(producing, path, distributed, queues);
            Ledger ledger = new Ledger();
            List<Body> producers = new ArrayList<>();
            for (int i = 0; i < PRODUCER_CONCURRENCY; i++) {
                producers.add(() -> {
                    long number;
                    while ((number = ledger.next()) < DRAIN_ITEMS) {
                        put.put(Ledger.bytes(number));
                        ledger.putDone(number);
                    }
                });
            }
            long started = System.nanoTime();
            runThreads(new Window(DRAIN_LIMIT_MS / 1000.0, 0), producers);
            double produceSeconds = (System.nanoTime() - started) / 1e9;
            Stats stats = new Stats(new Window((DRAIN_LIMIT_MS + STOP_GRACE_MS) / 1000.0, 0));
            CountDownLatch all = new CountDownLatch(DRAIN_ITEMS);
            Taker taker = taker(consuming, path, distributed);
            started = System.nanoTime();
            boolean done;
            try {
                taker.start((item, began) -> {
                    long now = System.nanoTime();
                    synchronized (stats) {
                        if (began != 0) {
                            stats.record("take", began, now);
                        } else {
                            stats.count(now);
                        }
                    }
                    ledger.took(item);
                    all.countDown();
                });
                done = all.await(DRAIN_LIMIT_MS, TimeUnit.MILLISECONDS);
            } finally {
                taker.stop();
            }
            double drainSeconds = (System.nanoTime() - started) / 1e9;
            String extra = ledger.extra()
                    + ", \"produce_s\": " + number(produceSeconds)
                    + ", \"produce_rate\": " + number(DRAIN_ITEMS / produceSeconds)
                    + ", \"drain_s\": " + number(drainSeconds)
                    + ", \"producer_concurrency\": " + PRODUCER_CONCURRENCY
                    + ", \"warm_items\": " + warmLedger.taken.size();
            if (!done) {
                extra += ", \"gave_up_after_s\": " + number(DRAIN_LIMIT_MS / 1000.0);
            }
            synchronized (stats) {
                // Slow, not wrong: an unfinished drain is only checked for duplicates.
                return result(args, drainSeconds, List.of(stats), ledger.violation(done), extra);
            }
        } finally {
            closeQueues(queues);
            closeAll(clients);
        }
    }

    // --- Curator caches ------------------------------------------------------------

    /** Every node below root of a tree with shape[i] children per node at depth i,
     *  parents first. */
    static List<String> treePaths(String root, int[] shape) {
        List<String> all = new ArrayList<>();
        List<String> level = List.of(root);
        for (int fanOut : shape) {
            List<String> next = new ArrayList<>();
            for (String parent : level) {
                for (int i = 0; i < fanOut; i++) {
                    next.add(parent + String.format(Locale.ROOT, "/n%03d", i));
                }
            }
            all.addAll(next);
            level = next;
        }
        return all;
    }

    static int treeSize(int[] shape) {
        return 1 + treePaths("", shape).size();
    }

    /** A node's value: its path, padded with dots to VALUE_SIZE bytes. */
    static byte[] nodeValue(String path) {
        byte[] value = new byte[VALUE_SIZE];
        Arrays.fill(value, (byte) '.');
        byte[] name = path.getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(name, 0, value, 0, Math.min(name.length, VALUE_SIZE));
        return value;
    }

    static byte[] stamp(long nanos) {
        byte[] value = nodeValue("");
        byte[] digits = String.format(Locale.ROOT, "%020d", nanos).getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(digits, 0, value, 0, 20);
        return value;
    }

    static Long readStamp(byte[] data) {
        if (data == null || data.length < 20) {
            return null;
        }
        for (int i = 0; i < 20; i++) {
            if (data[i] < '0' || data[i] > '9') {
                return null;
            }
        }
        return Long.parseLong(new String(data, 0, 20, StandardCharsets.US_ASCII));
    }

    /** Create root and the tree below it with background creates, CREATE_DEPTH outstanding. */
    static void makeTree(CuratorFramework client, String root, int[] shape) throws Exception {
        List<String> paths = new ArrayList<>();
        paths.add(root);
        paths.addAll(treePaths(root, shape));
        Semaphore slots = new Semaphore(CREATE_DEPTH);
        AtomicReference<String> error = new AtomicReference<>();
        for (String path : paths) {
            slots.acquire();
            client.create().inBackground((c, event) -> {
                if (event.getResultCode() != 0) {
                    error.compareAndSet(null, event.getPath() + ": code " + event.getResultCode());
                }
                slots.release();
            }).forPath(path, nodeValue(path));
        }
        if (!slots.tryAcquire(CREATE_DEPTH, STOP_GRACE_MS, TimeUnit.MILLISECONDS)) {
            throw new TimeoutException("creates still outstanding");
        }
        if (error.get() != null) {
            throw new IllegalStateException("creating the tree failed: " + error.get());
        }
    }

    /** A CuratorCache whose start returns once it is initialized. */
    static final class Cache {
        final CuratorCache cache;
        final CountDownLatch initialized = new CountDownLatch(1);

        Cache(CuratorFramework client, String path, BiConsumer<String, byte[]> onUpdate) {
            cache = CuratorCache.build(client, path);
            CuratorCacheListenerBuilder listener = CuratorCacheListener.builder()
                    .forInitialized(initialized::countDown);
            if (onUpdate != null) {
                listener = listener.forChanges((before, after) -> onUpdate.accept(after.getPath(), after.getData()));
            }
            cache.listenable().addListener(listener.build());
        }

        void start() throws Exception {
            cache.start();
            if (!initialized.await(DRAIN_LIMIT_MS, TimeUnit.MILLISECONDS)) {
                throw new TimeoutException("CuratorCache not initialized");
            }
        }

        byte[] value(String path) {
            return cache.get(path).map(ChildData::getData).orElse(null);
        }

        void close() {
            cache.close();
        }
    }

    static long rssKib() throws Exception {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.split("\\s+")[1]);
            }
        }
        throw new IllegalStateException("no VmRSS in /proc/self/status");
    }

    static long heapAfterGc() {
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    /**
     * Seconds until a CuratorCache of a TREE_SHAPE tree (made beforehand) is
     * initialized, and the memory it costs per node: RSS growth and used heap
     * after a GC. The warm-up builds and closes caches of a smaller tree.
     */
    static String curatorCacheBuild(Args args) throws Exception {
        String root = args.path() + "/tree";
        String warmRoot = args.path() + "/warm";
        List<CuratorFramework> clients = curatorClients(args.connect(), 2);
        try {
            CuratorFramework writer = clients.get(0);
            CuratorFramework reader = clients.get(1);
            makeTree(writer, root, TREE_SHAPE);
            int builds = 0;
            if (args.warmup() > 0) {
                makeTree(writer, warmRoot, SMALL_TREE_SHAPE);
                long deadline = System.nanoTime() + (long) (args.warmup() * 1e9);
                while (builds == 0 || System.nanoTime() < deadline) {
                    Cache warm = new Cache(reader, warmRoot, null);
                    warm.start();
                    warm.close();
                    builds++;
                }
            }
            long heapBefore = heapAfterGc();
            long rssBefore = rssKib();
            Cache cache = new Cache(reader, root, null);
            long started = System.nanoTime();
            cache.start();
            double buildSeconds = (System.nanoTime() - started) / 1e9;
            String violation = null;
            long heapAfter;
            long rssAfter;
            try {
                heapAfter = heapAfterGc();
                rssAfter = rssKib();
                List<String> expected = new ArrayList<>();
                expected.add(root);
                expected.addAll(treePaths(root, TREE_SHAPE));
                if (cache.cache.size() != expected.size()) {
                    violation = "the cache holds " + cache.cache.size() + " nodes, the tree has "
                            + expected.size();
                } else {
                    long wrong = expected.stream()
                            .filter(p -> !Arrays.equals(cache.value(p), nodeValue(p))).count();
                    if (wrong > 0) {
                        violation = wrong + " nodes missing or with the wrong value";
                    }
                }
            } finally {
                cache.close();
            }
            int nodes = treeSize(TREE_SHAPE);
            String extra = "\"rss_before_kib\": " + rssBefore + ", \"rss_after_kib\": " + rssAfter
                    + ", \"heap_before_bytes\": " + heapBefore + ", \"heap_after_bytes\": " + heapAfter
                    + ", \"warm_builds\": " + builds + ", \"nodes\": " + nodes
                    + ", \"build_s\": " + number(buildSeconds)
                    + ", \"rss_per_node_bytes\": " + number((rssAfter - rssBefore) * 1024.0 / nodes)
                    + ", \"heap_per_node_bytes\": " + number((heapAfter - heapBefore) / (double) nodes);
            Stats built = new Stats(new Window(buildSeconds, 0));
            built.ops = nodes; // ops and rate: the nodes, per second of the build
            return result(args, buildSeconds, List.of(built), violation, extra);
        } finally {
            closeAll(clients);
        }
    }

    /**
     * Event latency of a CuratorCache of a SMALL_TREE_SHAPE tree while another
     * client (its own session) sets SET_RATE leaves per second in the background,
     * each value carrying its send time (System.nanoTime): from the set being sent
     * to the cache's listener seeing it. Afterwards the view must equal the last
     * value set on every leaf.
     */
    static String curatorCacheEvents(Args args) throws Exception {
        String root = args.path() + "/tree";
        List<CuratorFramework> clients = curatorClients(args.connect(), 2);
        try {
            CuratorFramework writer = clients.get(0);
            CuratorFramework reader = clients.get(1);
            makeTree(writer, root, SMALL_TREE_SHAPE);
            List<String> all = treePaths(root, SMALL_TREE_SHAPE);
            int leafCount = SMALL_TREE_SHAPE[0] * SMALL_TREE_SHAPE[1] * SMALL_TREE_SHAPE[2];
            List<String> leaves = all.subList(all.size() - leafCount, all.size());
            AtomicReference<Stats> holder = new AtomicReference<>();
            Set<Long> received = ConcurrentHashMap.newKeySet();
            Cache cache = new Cache(reader, root, (path, data) -> {
                long arrived = System.nanoTime();
                Long sent = readStamp(data);
                Stats stats = holder.get();
                if (sent == null || stats == null) {
                    return;
                }
                received.add(sent);
                synchronized (stats) {
                    stats.record("event", sent, arrived);
                }
            });
            cache.start();
            Window window = new Window(args);
            Stats stats = new Stats(window);
            holder.set(stats);
            Map<String, byte[]> last = new HashMap<>();
            List<Long> sentAt = new ArrayList<>();
            List<String> stale;
            try {
                Semaphore slots = new Semaphore(PIPELINE_DEPTH);
                AtomicReference<String> error = new AtomicReference<>();
                double period = 1e9 / SET_RATE;
                double due = System.nanoTime();
                long count = 0;
                while (!window.over()) {
                    long now = System.nanoTime();
                    while (due <= now) {
                        String path = leaves.get((int) (count % leaves.size()));
                        slots.acquire();
                        long sent = System.nanoTime();
                        byte[] data = stamp(sent);
                        last.put(path, data);
                        sentAt.add(sent);
                        writer.setData().inBackground((c, event) -> {
                            if (event.getResultCode() != 0) {
                                error.compareAndSet(null, event.getPath() + ": code " + event.getResultCode());
                            }
                            slots.release();
                        }).forPath(path, data);
                        count++;
                        due += period;
                    }
                    LockSupport.parkNanos(Math.max(0, (long) due - System.nanoTime()));
                }
                if (!slots.tryAcquire(PIPELINE_DEPTH, STOP_GRACE_MS, TimeUnit.MILLISECONDS)) {
                    throw new TimeoutException("sets still outstanding long after the window");
                }
                if (error.get() != null) {
                    throw new IllegalStateException("a set failed: " + error.get());
                }
                long deadline = System.nanoTime() + CONVERGE_MS * 1_000_000L;
                stale = new ArrayList<>(last.keySet());
                while (true) {
                    stale.removeIf(p -> Arrays.equals(cache.value(p), last.get(p)));
                    if (stale.isEmpty() || System.nanoTime() > deadline) {
                        break;
                    }
                    Thread.sleep(50);
                }
            } finally {
                cache.close();
            }
            String violation = stale.isEmpty() ? null : stale.size()
                    + " leaves still stale in the cache " + CONVERGE_MS / 1000 + " s after the last set";
            long inWindow = sentAt.stream().filter(window::counts).count();
            long missed = sentAt.stream().filter(ns -> !received.contains(ns)).count();
            synchronized (stats) {
                return result(args, window, List.of(stats), violation, "\"sets\": " + sentAt.size()
                        + ", \"sets_per_s\": " + number(inWindow / window.seconds())
                        + ", \"missed_events\": " + missed + ", \"leaves\": " + leaves.size());
            }
        } finally {
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
        return result(args, window.seconds(), tallies, violation, extra);
    }

    static String result(Args args, double seconds, List<Stats> tallies, String violation,
                         String extra) {
        long ops = 0;
        long conflicts = 0;
        long failures = 0;
        long[] perContender = new long[tallies.size()];
        Map<String, long[]> merged = new LinkedHashMap<>();
        Map<String, Integer> sizes = new LinkedHashMap<>();
        for (int i = 0; i < tallies.size(); i++) {
            Stats stats = tallies.get(i);
            perContender[i] = stats.ops;
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
                + ", \"window_s\": " + number(seconds)
                + ", \"ops\": " + ops
                + ", \"ops_per_contender\": " + Arrays.toString(sortedCopy(perContender))
                + ", \"rate\": " + number(ops / seconds)
                + ", \"latency_ms\": {" + latency + "}"
                + ", \"conflicts\": " + conflicts
                + ", \"failures\": " + failures
                + ", \"violation\": " + (violation == null ? "null" : quote(violation))
                + ", \"extra\": {" + extra + "}}";
    }

    static long[] sortedCopy(long[] values) {
        long[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted;
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
