// Curator's DistributedPriorityQueue, DistributedDelayQueue, DistributedIdQueue and
// DistributedQueue (built by QueueBuilder) on the same queue as aiocoord's
// PriorityQueue, DelayQueue and IdQueue, for tests/integration/test_queue_interop.py.
//
//   java CuratorDistributedQueues <kind> <connect> <queuePath> [lock=<lockPath>]
//        [inwork=<path>] [hold]
//
// <kind> is priority (buildPriorityQueue(0)), delay (buildDelayQueue()), id
// (buildIdQueue()) or plain (buildQueue()). Items are UTF-8 strings without spaces.
// With lock=, every queue is built with lockPath(<lockPath>). Puts are in the
// foreground (putInBackground(false)), so a PUT line means the node is there.
//
// Prints "READY" once connected, with a producer-only queue of that kind started.
// Then reads commands from stdin, one a line, and answers each:
//   put <item> [<key>]  puts <item>: <key> is the priority (int) for priority,
//                       the due time (epoch ms) for delay, the id for id; none for
//                       plain. Prints "PUT <item>", or "ERROR <exception>" if the
//                       put failed.
//   remove <id>         (id) DistributedIdQueue.remove(<id>): "REMOVED <id> <count>".
//   consume             builds and starts a consuming queue of that kind (same
//                       options); prints "CONSUMING" once started. Its consumer
//                       prints "GOT <item> <epoch ms when it began>" per item.
//   release             lets a held item go (see hold).
// At the end of stdin it closes the queues and prints "DONE".
//
// With hold, the consumer keeps the first item it consumes until a "release"
// command: it prints "HOLD <item>" and waits (with lock=, the item stays marked
// under the lock path all that time). With inwork=<path>, the consumer creates the
// ephemeral node <path>/<item> while it works on an item; if that node exists
// already (someone else is working on the same item), it prints "OVERLAP <item>"
// and exits with code 2.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.queue.DistributedDelayQueue;
import org.apache.curator.framework.recipes.queue.DistributedIdQueue;
import org.apache.curator.framework.recipes.queue.DistributedPriorityQueue;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.QueueBase;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

public class CuratorDistributedQueues {
    static final QueueSerializer<String> UTF8 = new QueueSerializer<String>() {
        @Override
        public byte[] serialize(String item) {
            return item.getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public String deserialize(byte[] bytes) {
            return new String(bytes, StandardCharsets.UTF_8);
        }
    };

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** Prints what it consumes; optionally holds the first item, and checks that
     *  nobody else works on the same item at the same time. */
    static final class Printer implements QueueConsumer<String> {
        final CuratorFramework client;
        final String inwork;
        final AtomicBoolean holdNext;
        final CountDownLatch released = new CountDownLatch(1);

        Printer(CuratorFramework client, String inwork, boolean hold) {
            this.client = client;
            this.inwork = inwork;
            this.holdNext = new AtomicBoolean(hold);
        }

        @Override
        public void consumeMessage(String item) throws Exception {
            long began = System.currentTimeMillis();
            String mine = inwork == null ? null : inwork + "/" + item;
            if (mine != null) {
                try {
                    client.create().creatingParentsIfNeeded().withMode(CreateMode.EPHEMERAL)
                        .forPath(mine);
                } catch (KeeperException.NodeExistsException e) {
                    say("OVERLAP " + item);
                    System.exit(2);
                }
            }
            if (holdNext.compareAndSet(true, false)) {
                say("HOLD " + item);
                released.await();
            }
            if (mine != null) {
                client.delete().forPath(mine);
            }
            say("GOT " + item + " " + began);
        }

        @Override
        public void stateChanged(CuratorFramework client, ConnectionState newState) {
        }
    }

    public static void main(String[] args) throws Exception {
        String kind = args[0];
        CuratorFramework client = CuratorFrameworkFactory.newClient(
            args[1], 10000, 10000, new ExponentialBackoffRetry(10, 10));
        String path = args[2];
        String lockPath = null;
        String inwork = null;
        boolean hold = false;
        for (int i = 3; i < args.length; i++) {
            if (args[i].startsWith("lock=")) {
                lockPath = args[i].substring(5);
            } else if (args[i].startsWith("inwork=")) {
                inwork = args[i].substring(7);
            } else if (args[i].equals("hold")) {
                hold = true;
            } else {
                throw new IllegalArgumentException(args[i]);
            }
        }
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            say("NOCONNECT");
            System.exit(3);
        }
        QueueBase<String> producer = build(kind, client, null, path, lockPath);
        producer.start();
        say("READY");

        Printer printer = new Printer(client, inwork, hold);
        QueueBase<String> consumer = null;
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] words = line.trim().split(" ");
            switch (words[0]) {
                case "put":
                    try {
                        put(kind, producer, words);
                        say("PUT " + words[1]);
                    } catch (Exception e) {
                        say("ERROR " + e.getClass().getName());
                    }
                    break;
                case "remove":
                    int removed = ((DistributedIdQueue<String>) producer).remove(words[1]);
                    say("REMOVED " + words[1] + " " + removed);
                    break;
                case "consume":
                    consumer = build(kind, client, printer, path, lockPath);
                    consumer.start();
                    say("CONSUMING");
                    break;
                case "release":
                    printer.released.countDown();
                    break;
                default:
                    throw new IllegalArgumentException(line);
            }
        }
        printer.released.countDown();
        if (consumer != null) {
            consumer.close();
        }
        producer.close();
        client.close();
        say("DONE");
    }

    static QueueBase<String> build(
            String kind, CuratorFramework client, QueueConsumer<String> consumer, String path,
            String lockPath) {
        QueueBuilder<String> builder = QueueBuilder.builder(client, consumer, UTF8, path)
            .putInBackground(false);
        if (lockPath != null) {
            builder = builder.lockPath(lockPath);
        }
        switch (kind) {
            case "priority":
                return builder.buildPriorityQueue(0);
            case "delay":
                return builder.buildDelayQueue();
            case "id":
                return builder.buildIdQueue();
            case "plain":
                return builder.buildQueue();
            default:
                throw new IllegalArgumentException(kind);
        }
    }

    static void put(String kind, QueueBase<String> queue, String[] words) throws Exception {
        String item = words[1];
        switch (kind) {
            case "priority":
                ((DistributedPriorityQueue<String>) queue).put(item, Integer.parseInt(words[2]));
                break;
            case "delay":
                ((DistributedDelayQueue<String>) queue).put(item, Long.parseLong(words[2]));
                break;
            case "id":
                ((DistributedIdQueue<String>) queue).put(item, words[2]);
                break;
            default:
                ((DistributedQueue<String>) queue).put(item);
        }
    }
}
