// Drives Apache Curator's recipes against the same znodes as aiocoord, for the
// interoperability tests. Compiled and run by tests/integration/test_interop.py.
//
//   java CuratorHarness mutex   <connect> <lockPath> <markerPath> <counterPath> <iterations>
//   java CuratorHarness counter <connect> <counterPath> <iterations>
//   java CuratorHarness writer  <connect> <lockPath> <markerPath> <iterations>
//   java CuratorHarness lease   <connect> <semPath> <maxLeases> <insidePath> <iterations>
//   java CuratorHarness revocable-holder <connect> <lockPath>
//   java CuratorHarness revoke  <connect> <lockNodePath>
//   java CuratorHarness versions    (no server: where Curator's classes and the client come from)
//
// Prints "READY" once connected and "DONE <n>" at the end; "VIOLATION ..." and
// exit code 2 if mutual exclusion was broken. revocable-holder prints "HELD" once
// it holds and "REVOKED" once asked to let go (exit code 3 if nobody asks).

import java.nio.ByteBuffer;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

public class CuratorHarness {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("versions")) {
            System.out.println("curator " + InterProcessMutex.class.getProtectionDomain()
                .getCodeSource().getLocation());
            System.out.println("framework " + CuratorFramework.class.getProtectionDomain()
                .getCodeSource().getLocation());
            System.out.println("zookeeper " + org.apache.zookeeper.Version.getFullVersion());
            return;
        }
        CuratorFramework client = CuratorFrameworkFactory.newClient(
            args[1], 10000, 10000, new ExponentialBackoffRetry(10, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.out.println("NOCONNECT");
            System.exit(3);
        }
        System.out.println("READY");
        System.out.flush();
        int done;
        switch (args[0]) {
            case "mutex": done = mutex(client, args[2], args[3], args[4], Integer.parseInt(args[5])); break;
            case "counter": done = counter(client, args[2], Integer.parseInt(args[3])); break;
            case "writer": done = writer(client, args[2], args[3], Integer.parseInt(args[4])); break;
            case "lease":
                done = lease(client, args[2], Integer.parseInt(args[3]), args[4],
                             Integer.parseInt(args[5]));
                break;
            case "revocable-holder": done = revocableHolder(client, args[2]); break;
            case "revoke": Revoker.attemptRevoke(client, args[2]); done = 1; break;
            default: throw new IllegalArgumentException(args[0]);
        }
        System.out.println("DONE " + done);
        client.close();
    }

    static int mutex(CuratorFramework client, String lockPath, String marker, String counter,
                     int iterations) throws Exception {
        InterProcessMutex lock = new InterProcessMutex(client, lockPath);
        for (int i = 0; i < iterations; i++) {
            lock.acquire();
            try {
                try {
                    client.create().withMode(CreateMode.EPHEMERAL).forPath(marker);
                } catch (KeeperException.NodeExistsException e) {
                    System.out.println("VIOLATION another holder is inside");
                    System.exit(2);
                }
                long value = ByteBuffer.wrap(client.getData().forPath(counter)).getLong();
                Thread.sleep(1);
                client.setData().forPath(counter, ByteBuffer.allocate(8).putLong(value + 1).array());
                client.delete().forPath(marker);
            } finally {
                lock.release();
            }
        }
        return iterations;
    }

    static int counter(CuratorFramework client, String path, int iterations) throws Exception {
        DistributedAtomicLong value = new DistributedAtomicLong(client, path, new RetryNTimes(1000, 1));
        int ok = 0;
        for (int i = 0; i < iterations; i++) {
            AtomicValue<Long> result = value.increment();
            if (result.succeeded()) ok++;
        }
        return ok;
    }

    // The write side of a read-write lock: alone inside, marked by an ephemeral node
    // that readers (on the Python side) must never see while they read.
    static int writer(CuratorFramework client, String lockPath, String marker, int iterations)
            throws Exception {
        InterProcessReadWriteLock lock = new InterProcessReadWriteLock(client, lockPath);
        for (int i = 0; i < iterations; i++) {
            lock.writeLock().acquire();
            try {
                try {
                    client.create().withMode(CreateMode.EPHEMERAL).forPath(marker);
                } catch (KeeperException.NodeExistsException e) {
                    System.out.println("VIOLATION another writer is inside");
                    System.exit(2);
                }
                Thread.sleep(2);
                client.delete().forPath(marker);
            } finally {
                lock.writeLock().release();
            }
        }
        return iterations;
    }

    // One lease at a time from a semaphore: while held, at most maxLeases markers exist.
    static int lease(CuratorFramework client, String semPath, int maxLeases, String inside,
                     int iterations) throws Exception {
        InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, semPath, maxLeases);
        for (int i = 0; i < iterations; i++) {
            Lease lease = semaphore.acquire();
            try {
                String mine = client.create().creatingParentsIfNeeded()
                    .withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(inside + "/java-");
                if (client.getChildren().forPath(inside).size() > maxLeases) {
                    System.out.println("VIOLATION more holders than leases");
                    System.exit(2);
                }
                Thread.sleep(2);
                client.delete().forPath(mine);
            } finally {
                semaphore.returnLease(lease);
            }
        }
        return iterations;
    }

    // Holds a revocable mutex until someone asks for it back (Revoker's message).
    static int revocableHolder(CuratorFramework client, String lockPath) throws Exception {
        InterProcessMutex lock = new InterProcessMutex(client, lockPath);
        CountDownLatch asked = new CountDownLatch(1);
        lock.makeRevocable(forLock -> asked.countDown());
        lock.acquire();
        System.out.println("HELD");
        System.out.flush();
        if (!asked.await(60, TimeUnit.SECONDS)) {
            System.out.println("NO REQUEST");
            System.exit(3);
        }
        System.out.println("REVOKED");
        System.out.flush();
        lock.release();
        return 1;
    }
}
