// Curator's barriers on the same znodes as aiocoord's, for the interoperability
// tests in tests/integration/test_barriers.py.
//
//   java CuratorBarriers double <connect> <path> <members>
//       DistributedDoubleBarrier: enter, print ENTERED, wait for a "leave" line
//       on stdin, leave, print LEFT.
//   java CuratorBarriers wait <connect> <path>
//       DistributedBarrier: wait on it, print PASSED.
//   java CuratorBarriers set <connect> <path>
//       DistributedBarrier: set it, print SET, wait for a "remove" line on
//       stdin, remove it, print REMOVED.
//
// Prints "READY" once connected and "DONE" at the end.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorBarriers {
    static final BufferedReader STDIN = new BufferedReader(new InputStreamReader(System.in));

    static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static void expect(String command) throws Exception {
        String line = STDIN.readLine();
        if (!command.equals(line)) {
            say("UNEXPECTED " + line);
            System.exit(2);
        }
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(
            args[1], 10000, 10000, new ExponentialBackoffRetry(10, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            say("NOCONNECT");
            System.exit(3);
        }
        say("READY");
        switch (args[0]) {
            case "double": {
                DistributedDoubleBarrier barrier =
                    new DistributedDoubleBarrier(client, args[2], Integer.parseInt(args[3]));
                barrier.enter();
                say("ENTERED");
                expect("leave");
                barrier.leave();
                say("LEFT");
                break;
            }
            case "wait": {
                new DistributedBarrier(client, args[2]).waitOnBarrier();
                say("PASSED");
                break;
            }
            case "set": {
                DistributedBarrier barrier = new DistributedBarrier(client, args[2]);
                barrier.setBarrier();
                say("SET");
                expect("remove");
                barrier.removeBarrier();
                say("REMOVED");
                break;
            }
            default:
                throw new IllegalArgumentException(args[0]);
        }
        say("DONE");
        client.close();
    }
}
