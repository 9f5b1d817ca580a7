// Curator's SimpleDistributedQueue on the same queue as aiocoord's Queue, for the
// interoperability tests in tests/integration/test_queues.py.
//
//   java CuratorQueues offer <connect> <queuePath> <item> [<item> ...]
//   java CuratorQueues take <connect> <queuePath> <count>
//   java CuratorQueues drain <connect> <queuePath>
//
// Prints "READY" once connected. "offer" puts each item (UTF-8) in order and
// prints "PUT <n>". "take" takes <count> items and prints "TOOK <item> <item> ...".
// "drain" takes items until it takes one that is "STOP", then prints the others
// as "TOOK ...". Each ends with "DONE". Items hold no spaces.
// Exit code 2 if no item comes within 30 s while one is expected.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.queue.SimpleDistributedQueue;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorQueues {
    public static void main(String[] args) throws Exception {
        String mode = args[0];
        CuratorFramework client = CuratorFrameworkFactory.newClient(
            args[1], 10000, 10000, new ExponentialBackoffRetry(10, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.out.println("NOCONNECT");
            System.exit(3);
        }
        System.out.println("READY");
        System.out.flush();
        SimpleDistributedQueue queue = new SimpleDistributedQueue(client, args[2]);
        if (mode.equals("offer")) {
            for (int i = 3; i < args.length; i++) {
                queue.offer(args[i].getBytes(StandardCharsets.UTF_8));
            }
            System.out.println("PUT " + (args.length - 3));
        } else {
            int count = mode.equals("take") ? Integer.parseInt(args[3]) : Integer.MAX_VALUE;
            List<String> taken = new ArrayList<>();
            while (taken.size() < count) {
                byte[] item = queue.poll(30, TimeUnit.SECONDS);
                if (item == null) {
                    System.out.println("TIMEOUT after " + String.join(" ", taken));
                    System.exit(2);
                }
                String text = new String(item, StandardCharsets.UTF_8);
                if (mode.equals("drain") && text.equals("STOP")) {
                    break;
                }
                taken.add(text);
            }
            System.out.println("TOOK " + String.join(" ", taken));
        }
        client.close();
        System.out.println("DONE");
    }
}
