// Curator GroupMembers in the same group as aiocoord's, for the interoperability
// test in tests/integration/test_group.py.
//
//   java CuratorGroup <connect> <groupPath> <expected> <id>=<data> [<id>=<data> ...]
//
// Prints "READY" once connected, then starts one GroupMember per <id>=<data>. Once
// every one of them sees <expected> members, prints the group as the first one sees
// it: "MEMBERS id=data id=data ..." (sorted by id, data as UTF-8). Then waits for a
// line (or the end) on stdin, leaves the group and prints "DONE".
// Exit code 2 if the members do not all see <expected> members within 60 s.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorGroup {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(
            args[0], 10000, 10000, new ExponentialBackoffRetry(10, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.out.println("NOCONNECT");
            System.exit(3);
        }
        System.out.println("READY");
        System.out.flush();
        String path = args[1];
        int expected = Integer.parseInt(args[2]);
        List<GroupMember> members = new ArrayList<>();
        for (int i = 3; i < args.length; i++) {
            String[] idAndData = args[i].split("=", 2);
            GroupMember member = new GroupMember(
                client, path, idAndData[0], idAndData[1].getBytes(StandardCharsets.UTF_8));
            member.start();
            members.add(member);
        }
        // GroupMember offers no listener: look at its cache until it is complete.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        for (GroupMember member : members) {
            while (member.getCurrentMembers().size() < expected) {
                if (System.nanoTime() > deadline) {
                    System.out.println("TIMEOUT " + describe(member.getCurrentMembers()));
                    System.exit(2);
                }
                Thread.sleep(10);
            }
        }
        System.out.println("MEMBERS " + describe(members.get(0).getCurrentMembers()));
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        for (GroupMember member : members) {
            member.close();
        }
        client.close();
        System.out.println("DONE");
    }

    static String describe(Map<String, byte[]> members) {
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, byte[]> entry : new TreeMap<>(members).entrySet()) {
            if (out.length() > 0) {
                out.append(' ');
            }
            out.append(entry.getKey()).append('=')
                .append(new String(entry.getValue(), StandardCharsets.UTF_8));
        }
        return out.toString();
    }
}
