// Lock revocation between Curator and aiocoord, for tests/integration/test_interop.py.
//
//   java CuratorRevocation holder <connect> <lockPath>
//     takes a revocable InterProcessMutex and prints "HELD"; once someone asks
//     for it back, prints "REVOKED", releases, and ends with "DONE 1".
//   java CuratorRevocation revoke <connect> <nodePath>
//     asks the owner of one lock node to let go (Revoker.attemptRevoke); "DONE 1".
//
// Prints "READY" once connected; exit code 3 if no request came within 60 s.

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorRevocation {
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
        switch (args[0]) {
            case "holder": {
                InterProcessMutex lock = new InterProcessMutex(client, args[2]);
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
                break;
            }
            case "revoke":
                Revoker.attemptRevoke(client, args[2]);
                break;
            default: throw new IllegalArgumentException(args[0]);
        }
        System.out.println("DONE 1");
        client.close();
    }
}
