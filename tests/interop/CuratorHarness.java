// Drives Apache Curator's recipes against the same znodes as aiocoord, for the
// interoperability tests. Compiled and run by tests/integration/test_interop.py.
//
//   java CuratorHarness mutex   <connect> <lockPath> <markerPath> <counterPath> <iterations>
//   java CuratorHarness counter <connect> <counterPath> <iterations>
//
// Prints "READY" once connected and "DONE <n>" at the end; "VIOLATION ..." and
// exit code 2 if mutual exclusion was broken.

import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

public class CuratorHarness {
    public static void main(String[] args) throws Exception {
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
}
