/*
 * The Java side of the service discovery benchmark (curator-x-discovery), compiled with
 * Bench.java and run through it (`java Bench curator discovery_events|discovery_pick ...`),
 * so it speaks the same protocol and reports through Bench.result.
 *
 * discovery_events: N watchers, each a ServiceCache in a session of its own, follow one
 * service while a registrant (its own session) churns it at CHURN_RATE operations per
 * second: unregister its oldest instance, register a new one, alternately, keeping about
 * POOL instances. The latency of an event is from the registrant's call (registerService
 * or unregisterService) starting to a watcher's cache showing the change; ServiceCache's
 * listener says only "changed", so each watcher compares the ids it now holds with those
 * it held. Afterwards every watcher must hold exactly the registrant's instances.
 *
 * discovery_pick: a ServiceProvider (the variant names its strategy) over PICK_INSTANCES
 * instances, asked for an instance in a loop: the cost of a pick, timed per batch of
 * PICK_BATCH, on the clock and in CPU time. Checked: never null, every instance picked,
 * round-robin fair.
 */

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.x.discovery.ProviderStrategy;
import org.apache.curator.x.discovery.ServiceCache;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceProvider;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;
import org.apache.curator.x.discovery.details.ServiceCacheListener;
import org.apache.curator.x.discovery.strategies.RandomStrategy;
import org.apache.curator.x.discovery.strategies.RoundRobinStrategy;

@SuppressWarnings({"rawtypes", "unchecked"})
final class BenchDiscovery {
    // The same numbers as bench/runners/aiocoord_discovery_runner.py.
    static final String SERVICE = "api";
    static final int CHURN_RATE = 100;
    static final int POOL = 20;
    static final int PICK_INSTANCES = 10;
    static final int PICK_BATCH = 1000;
    static final long CONVERGE_MS = 30_000;

    private BenchDiscovery() {
    }

    static ServiceDiscovery<Map> discovery(CuratorFramework client, String base) throws Exception {
        ServiceDiscovery<Map> discovery = ServiceDiscoveryBuilder.builder(Map.class)
                .client(client).basePath(base)
                .serializer(new JsonInstanceSerializer<>(Map.class)).build();
        discovery.start();
        return discovery;
    }

    static ServiceInstance<Map> instance(String id, int port) throws Exception {
        Map<String, Object> payload = new LinkedHashMap<>();
        payload.put("zone", "z" + (port % 3));
        return ServiceInstance.<Map>builder().name(SERVICE).id(id).address("10.0.0." + (port % 250))
                .port(port).payload(payload).build();
    }

    static Set<String> ids(Collection<ServiceInstance<Map>> instances) {
        Set<String> ids = new HashSet<>();
        for (ServiceInstance<Map> instance : instances) {
            ids.add(instance.getId());
        }
        return ids;
    }

    /** One watcher: its cache, the ids it held at its last change, its tally. */
    static final class Watcher {
        final ServiceDiscovery<Map> discovery;
        final ServiceCache<Map> cache;
        final Bench.Stats stats;
        Set<String> held = new HashSet<>();
        long missed;

        Watcher(CuratorFramework client, String base, Bench.Window window,
                Map<String, Long> sentAt) throws Exception {
            discovery = discovery(client, base);
            cache = discovery.serviceCacheBuilder().name(SERVICE).build();
            stats = new Bench.Stats(window);
            cache.addListener(new ServiceCacheListener() {
                @Override
                public void cacheChanged() {
                    long arrived = System.nanoTime();
                    Set<String> now = ids(cache.getInstances());
                    synchronized (Watcher.this) {
                        for (String id : now) {
                            if (!held.contains(id)) {
                                seen("register", sentAt.get("+" + id), arrived);
                            }
                        }
                        for (String id : held) {
                            if (!now.contains(id)) {
                                seen("unregister", sentAt.get("-" + id), arrived);
                            }
                        }
                        held = now;
                    }
                }

                @Override
                public void stateChanged(CuratorFramework c, ConnectionState state) {
                }
            });
            cache.start();
            synchronized (this) {
                held = ids(cache.getInstances());
            }
        }

        void seen(String kind, Long sent, long arrived) {
            if (sent == null) {
                missed++;
                return;
            }
            stats.record("event", sent, arrived);
            long ops = stats.ops; // ops counts each change once, under "event"
            stats.record(kind, sent, arrived);
            stats.ops = ops;
        }

        void close() throws Exception {
            cache.close();
            discovery.close();
        }
    }

    static String events(Bench.Args args) throws Exception {
        String base = args.path() + "/services";
        List<CuratorFramework> clients = Bench.curatorClients(args.connect(), args.contenders() + 1);
        List<Watcher> watchers = new ArrayList<>();
        ServiceDiscovery<Map> registrant = null;
        try {
            registrant = discovery(clients.get(0), base);
            Map<String, Long> sentAt = new ConcurrentHashMap<>();
            ArrayDeque<ServiceInstance<Map>> live = new ArrayDeque<>();
            int serial = 0;
            for (; serial < POOL; serial++) {
                ServiceInstance<Map> instance = instance("i-" + serial, 1000 + serial);
                registrant.registerService(instance);
                live.add(instance);
            }
            Bench.Window window = new Bench.Window(args);
            for (int i = 1; i <= args.contenders(); i++) {
                watchers.add(new Watcher(clients.get(i), base, window, sentAt));
            }
            long operations = 0;
            double period = 1e9 / CHURN_RATE;
            double due = System.nanoTime();
            while (!window.over()) {
                long now = System.nanoTime();
                if (due > now) {
                    LockSupport.parkNanos((long) due - now);
                    continue;
                }
                if (operations % 2 == 0) {
                    ServiceInstance<Map> oldest = live.removeFirst();
                    sentAt.put("-" + oldest.getId(), System.nanoTime());
                    registrant.unregisterService(oldest);
                } else {
                    ServiceInstance<Map> fresh = instance("i-" + serial, 1000 + serial);
                    serial++;
                    sentAt.put("+" + fresh.getId(), System.nanoTime());
                    registrant.registerService(fresh);
                    live.add(fresh);
                }
                operations++;
                due += period;
            }
            Set<String> expected = ids(live);
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CONVERGE_MS);
            int stale = 0;
            for (Watcher watcher : watchers) {
                while (!ids(watcher.cache.getInstances()).equals(expected)
                        && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                if (!ids(watcher.cache.getInstances()).equals(expected)) {
                    stale++;
                }
            }
            String violation = stale == 0 ? null : stale + " of " + watchers.size()
                    + " watchers did not hold the registrant's instances " + CONVERGE_MS / 1000
                    + " s after the last change";
            List<Bench.Stats> tallies = new ArrayList<>();
            long missed = 0;
            for (Watcher watcher : watchers) {
                synchronized (watcher) {
                    tallies.add(watcher.stats);
                    missed += watcher.missed;
                }
            }
            return Bench.result(args, window, tallies, violation,
                    "\"watchers\": " + watchers.size() + ", \"churn_per_s\": " + CHURN_RATE
                    + ", \"operations\": " + operations + ", \"pool\": " + POOL
                    + ", \"unmatched_changes\": " + missed);
        } finally {
            for (Watcher watcher : watchers) {
                watcher.close();
            }
            if (registrant != null) {
                registrant.close();
            }
            Bench.closeAll(clients);
        }
    }

    static ProviderStrategy<Map> strategy(String variant) {
        return switch (variant) {
            case "round_robin" -> new RoundRobinStrategy<>();
            case "random" -> new RandomStrategy<>();
            default -> throw new IllegalArgumentException("no strategy " + variant);
        };
    }

    static String pick(Bench.Args args) throws Exception {
        String base = args.path() + "/services";
        List<CuratorFramework> clients = Bench.curatorClients(args.connect(), 2);
        ServiceDiscovery<Map> registrant = null;
        ServiceDiscovery<Map> picker = null;
        ServiceProvider<Map> provider = null;
        try {
            registrant = discovery(clients.get(0), base);
            for (int i = 0; i < PICK_INSTANCES; i++) {
                registrant.registerService(instance("i-" + i, 2000 + i));
            }
            picker = discovery(clients.get(1), base);
            provider = picker.serviceProviderBuilder().serviceName(SERVICE)
                    .providerStrategy(strategy(args.variant())).build();
            provider.start();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (provider.getAllInstances().size() < PICK_INSTANCES) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the provider never saw every instance");
                }
                Thread.sleep(10);
            }
            Bench.Window window = new Bench.Window(args);
            Bench.Stats stats = new Bench.Stats(window);
            long nulls = 0;
            // The timed loop only picks (and counts misses); fairness is checked after it.
            // Each batch is timed on the clock and in this thread's CPU time: the latter
            // leaves out the time the thread was preempted (a busy machine).
            ThreadMXBean threads = ManagementFactory.getThreadMXBean();
            while (!window.over()) {
                long cpu = threads.getCurrentThreadCpuTime();
                long started = System.nanoTime();
                for (int i = 0; i < PICK_BATCH; i++) {
                    if (provider.getInstance() == null) {
                        nulls++;
                    }
                }
                long finished = System.nanoTime();
                long cpuUsed = threads.getCurrentThreadCpuTime() - cpu;
                if (window.counts(started) && window.counts(finished)) {
                    stats.record("batch", started, finished);
                    long ops = stats.ops;
                    stats.record("cpu", finished - cpuUsed, finished);
                    stats.ops = ops + PICK_BATCH - 1;
                }
            }
            Map<String, Long> counts = new HashMap<>();
            for (int i = 0; i < PICK_INSTANCES * 100; i++) {
                ServiceInstance<Map> picked = provider.getInstance();
                if (picked == null) {
                    nulls++;
                } else {
                    counts.merge(picked.getId(), 1L, Long::sum);
                }
            }
            String violation = null;
            long most = counts.values().stream().mapToLong(Long::longValue).max().orElse(0);
            long least = counts.values().stream().mapToLong(Long::longValue).min().orElse(0);
            if (nulls > 0) {
                violation = nulls + " picks found no instance";
            } else if (counts.size() != PICK_INSTANCES) {
                violation = "picked " + counts.size() + " of " + PICK_INSTANCES + " instances";
            } else if (args.variant().equals("round_robin") && most - least > 1) {
                violation = "round robin picked one instance " + most + " times, another " + least;
            }
            return Bench.result(args, window, List.of(stats), violation,
                    "\"instances\": " + PICK_INSTANCES + ", \"batch\": " + PICK_BATCH
                    + ", \"ns_per_pick\": " + Bench.number(window.seconds() * 1e9 / Math.max(1, stats.ops))
                    + ", \"most_picked\": " + most + ", \"least_picked\": " + least);
        } finally {
            if (provider != null) {
                provider.close();
            }
            if (picker != null) {
                picker.close();
            }
            if (registrant != null) {
                registrant.close();
            }
            Bench.closeAll(clients);
        }
    }
}
