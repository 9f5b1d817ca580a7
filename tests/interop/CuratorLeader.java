// One Curator leader-election participant, driven line by line, for the leader
// interoperability tests (tests/integration/test_leader.py).
//
//   java CuratorLeader selector|latch <connect> <leaderPath> <insidePath> <id>
//
// Joins a LeaderSelector (or a LeaderLatch) on <leaderPath> with participant id
// <id>, and prints:
//   READY                 once connected (it then joins)
//   LEADER <id>           when it starts leading (after creating the ephemeral
//                         <insidePath>; if that exists, another leader is inside:
//                         it prints "VIOLATION ..." and exits with code 2)
//   RELEASED <id>         when it stops leading (after deleting <insidePath>)
//   PARTICIPANTS <ids..>  in queue order, on the command "participants"
//   DONE                  after the command "quit" (or end of input): it gives up
//                         leadership if it leads, leaves the election and exits 0.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

public class CuratorLeader {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static void enter(CuratorFramework client, String inside, String id, CountDownLatch led)
            throws Exception {
        try {
            client.create().withMode(CreateMode.EPHEMERAL).forPath(inside);
        } catch (KeeperException.NodeExistsException e) {
            say("VIOLATION " + id + " leads while another leader is inside");
            System.exit(2);
        }
        // Counted before LEADER is printed: once the test reads LEADER and sends
        // "quit", the main thread must know there is a term to wait for.
        led.countDown();
        say("LEADER " + id);
    }

    static void leave(CuratorFramework client, String inside, String id) throws Exception {
        client.delete().forPath(inside);
        say("RELEASED " + id);
    }

    static String ids(Collection<Participant> participants) {
        List<String> out = new ArrayList<>();
        for (Participant p : participants) out.add(p.getId());
        return String.join(" ", out);
    }

    public static void main(String[] args) throws Exception {
        String kind = args[0], path = args[2], inside = args[3], id = args[4];
        CuratorFramework client = CuratorFrameworkFactory.newClient(
            args[1], 10000, 10000, new ExponentialBackoffRetry(10, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            say("NOCONNECT");
            System.exit(3);
        }
        say("READY");
        CountDownLatch quit = new CountDownLatch(1);
        CountDownLatch led = new CountDownLatch(1);
        CountDownLatch released = new CountDownLatch(1);
        LeaderSelector selector = null;
        LeaderLatch latch = null;
        if (kind.equals("selector")) {
            selector = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
                @Override
                public void takeLeadership(CuratorFramework c) throws Exception {
                    enter(c, inside, id, led);
                    try {
                        quit.await();
                        leave(c, inside, id);
                    } finally {
                        released.countDown();
                    }
                }
            });
            selector.setId(id);
            selector.start();
        } else if (kind.equals("latch")) {
            latch = new LeaderLatch(client, path, id);
            latch.addListener(new LeaderLatchListener() {
                @Override
                public void isLeader() {
                    try {
                        enter(client, inside, id, led);
                    } catch (Exception e) {
                        say("ERROR " + e);
                    }
                }

                @Override
                public void notLeader() {
                }
            }, Executors.newSingleThreadExecutor(r -> {
                Thread thread = new Thread(r, "latch-listener");
                thread.setDaemon(true);
                return thread;
            }));
            latch.start();
        } else {
            throw new IllegalArgumentException(kind);
        }

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.equals("participants")) {
                Collection<Participant> people =
                    selector != null ? selector.getParticipants() : latch.getParticipants();
                say("PARTICIPANTS " + ids(people));
            } else if (line.equals("quit")) {
                break;
            }
        }
        quit.countDown();
        if (led.getCount() == 0) {
            if (selector != null) {
                released.await();  // takeLeadership returns; the selector then deletes its node
            } else {
                leave(client, inside, id);  // before the latch's node goes
            }
        }
        if (selector != null) selector.close();
        if (latch != null) latch.close();
        client.close();
        say("DONE");
    }
}
