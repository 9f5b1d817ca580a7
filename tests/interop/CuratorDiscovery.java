// Apache Curator's service discovery (curator-x-discovery) on the same base path as
// aiocoord's ServiceDiscovery, for tests/integration/test_discovery_interop.py.
//
//   java CuratorDiscovery <connect> <basePath> [compatible|full]
//
// Instances carry a java.util.Map payload through JsonInstanceSerializer<Map>, so
// their JSON has Jackson's "@class" marker. compatible (the default) is what
// ServiceDiscoveryBuilder.builder(Map.class) uses: JsonInstanceSerializer(Map.class),
// which writes Curator's older layout, without "enabled". full is
// JsonInstanceSerializer(Map.class, false), which writes "enabled" too.
//
// Prints "READY" once connected and its ServiceDiscovery is started. Then reads
// commands from stdin, one JSON object a line, and answers each with one line
// "<KIND> <json>":
//   {"op":"register", <instance>}       registerService      -> REGISTERED "<id>"
//   {"op":"update", <instance>}         updateService        -> UPDATED "<id>"
//   {"op":"unregister","name","id"}     unregisterService    -> UNREGISTERED "<id>"
//   {"op":"names"}                      queryForNames        -> NAMES [names, sorted]
//   {"op":"instances","name"}           queryForInstances    -> INSTANCES [<seen>...] by id
//   {"op":"instance","name","id"}       queryForInstance     -> INSTANCE <seen> or null
//   {"op":"provider","name","strategy"} builds and starts a ServiceProvider with
//                                       round-robin, random or sticky -> PROVIDER "<name>"
//   {"op":"pick","name","count"}        getInstance() count times -> PICKS [id or null...]
//   {"op":"noteError","name","id"}      provider.noteError   -> NOTED "<id>"
//   {"op":"cache","name"}               builds and starts a ServiceCache: CACHING [<seen>...]
//                                       once started, then CACHE [<seen>...] (by id) on every
//                                       cacheChanged
//   {"op":"raw","path","extra":{..}, <instance>}
//                                       a node as a newer Curator might write it: this
//                                       Curator's JSON for <instance> plus the fields of
//                                       "extra", created at path (ephemeral for DYNAMIC,
//                                       else persistent) -> RAW "<path>"
// <instance> is "name", "id", "address", "port", optional "sslPort", "payload" (a JSON
// object or null), "uriSpec" (a template string or null), "serviceType" (DYNAMIC,
// STATIC or PERMANENT), "enabled" (default true), "registrationTimeUTC".
// <seen> is how Curator reads an instance: those fields, "uriSpec" as the template it
// parsed, "uri" as buildUriSpec(), and "payloadClass", the payload's Java class.
// A command that throws answers "ERROR <message>". At the end of stdin it closes its
// providers, caches and ServiceDiscovery and prints "DONE".

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.Closeable;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.x.discovery.ProviderStrategy;
import org.apache.curator.x.discovery.ServiceCache;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceInstanceBuilder;
import org.apache.curator.x.discovery.ServiceProvider;
import org.apache.curator.x.discovery.ServiceType;
import org.apache.curator.x.discovery.UriSpec;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;
import org.apache.curator.x.discovery.details.ServiceCacheListener;
import org.apache.curator.x.discovery.strategies.RandomStrategy;
import org.apache.curator.x.discovery.strategies.RoundRobinStrategy;
import org.apache.curator.x.discovery.strategies.StickyStrategy;
import org.apache.zookeeper.CreateMode;

@SuppressWarnings({"rawtypes", "unchecked"})
public class CuratorDiscovery {
    static final ObjectMapper JSON = new ObjectMapper();

    static synchronized void say(String kind, Object value) throws Exception {
        System.out.println(kind + " " + JSON.writeValueAsString(value));
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(
            args[0], 10000, 10000, new ExponentialBackoffRetry(10, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.out.println("NOCONNECT");
            System.exit(3);
        }
        boolean full = args.length > 2 && args[2].equals("full");
        JsonInstanceSerializer<Map> serializer = full
            ? new JsonInstanceSerializer<>(Map.class, false)
            : new JsonInstanceSerializer<>(Map.class);
        ServiceDiscovery<Map> discovery = ServiceDiscoveryBuilder.builder(Map.class)
            .client(client).basePath(args[1]).serializer(serializer).build();
        discovery.start();
        System.out.println("READY");
        System.out.flush();

        Map<String, ServiceProvider<Map>> providers = new HashMap<>();
        List<Closeable> closing = new ArrayList<>();
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode command = JSON.readTree(line);
            try {
                run(client, discovery, serializer, providers, closing, command);
            } catch (Exception e) {
                say("ERROR", e.toString());
            }
        }
        for (int i = closing.size() - 1; i >= 0; i--) {
            closing.get(i).close();
        }
        discovery.close();
        client.close();
        System.out.println("DONE");
    }

    static void run(CuratorFramework client, ServiceDiscovery<Map> discovery,
                    JsonInstanceSerializer<Map> serializer,
                    Map<String, ServiceProvider<Map>> providers, List<Closeable> closing,
                    JsonNode command) throws Exception {
        String name = command.path("name").asText();
        switch (command.get("op").asText()) {
            case "register": {
                ServiceInstance<Map> instance = instance(command);
                discovery.registerService(instance);
                say("REGISTERED", instance.getId());
                break;
            }
            case "update": {
                ServiceInstance<Map> instance = instance(command);
                discovery.updateService(instance);
                say("UPDATED", instance.getId());
                break;
            }
            case "unregister": {
                ServiceInstance<Map> instance = discovery.queryForInstance(
                    name, command.get("id").asText());
                discovery.unregisterService(instance);
                say("UNREGISTERED", command.get("id").asText());
                break;
            }
            case "names":
                say("NAMES", new TreeSet<>(discovery.queryForNames()));
                break;
            case "instances":
                say("INSTANCES", seen(discovery.queryForInstances(name)));
                break;
            case "instance": {
                ServiceInstance<Map> instance = discovery.queryForInstance(
                    name, command.get("id").asText());
                say("INSTANCE", instance == null ? null : seen(instance));
                break;
            }
            case "provider": {
                ServiceProvider<Map> provider = discovery.serviceProviderBuilder()
                    .serviceName(name).providerStrategy(strategy(command.get("strategy").asText()))
                    .build();
                provider.start();
                providers.put(name, provider);
                closing.add(provider);
                say("PROVIDER", name);
                break;
            }
            case "pick": {
                ServiceProvider<Map> provider = providers.get(name);
                List<String> ids = new ArrayList<>();
                for (int i = 0; i < command.get("count").asInt(); i++) {
                    ServiceInstance<Map> picked = provider.getInstance();
                    ids.add(picked == null ? null : picked.getId());
                }
                say("PICKS", ids);
                break;
            }
            case "noteError": {
                ServiceProvider<Map> provider = providers.get(name);
                String id = command.get("id").asText();
                for (ServiceInstance<Map> instance : provider.getAllInstances()) {
                    if (instance.getId().equals(id)) {
                        provider.noteError(instance);
                    }
                }
                say("NOTED", id);
                break;
            }
            case "cache": {
                ServiceCache<Map> cache = discovery.serviceCacheBuilder().name(name).build();
                cache.addListener(new ServiceCacheListener() {
                    @Override
                    public void cacheChanged() {
                        try {
                            say("CACHE", seen(cache.getInstances()));
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                    }

                    @Override
                    public void stateChanged(CuratorFramework c, ConnectionState state) {
                    }
                });
                cache.start();
                closing.add(cache);
                say("CACHING", seen(cache.getInstances()));
                break;
            }
            case "raw": {
                ServiceInstance<Map> instance = instance(command);
                ObjectNode node = (ObjectNode) JSON.readTree(serializer.serialize(instance));
                node.setAll((ObjectNode) command.get("extra"));
                CreateMode mode = instance.getServiceType() == ServiceType.DYNAMIC
                    ? CreateMode.EPHEMERAL : CreateMode.PERSISTENT;
                client.create().creatingParentContainersIfNeeded().withMode(mode)
                    .forPath(command.get("path").asText(), JSON.writeValueAsBytes(node));
                say("RAW", command.get("path").asText());
                break;
            }
            default:
                throw new IllegalArgumentException(command.toString());
        }
    }

    static ProviderStrategy<Map> strategy(String name) {
        switch (name) {
            case "round-robin": return new RoundRobinStrategy<>();
            case "random": return new RandomStrategy<>();
            case "sticky": return new StickyStrategy<>(new RoundRobinStrategy<>());
            default: throw new IllegalArgumentException(name);
        }
    }

    static ServiceInstance<Map> instance(JsonNode c) throws Exception {
        ServiceInstanceBuilder<Map> builder = ServiceInstance.<Map>builder()
            .name(c.get("name").asText())
            .id(c.get("id").asText())
            .address(c.get("address").asText())
            .port(c.get("port").asInt())
            .serviceType(ServiceType.valueOf(c.path("serviceType").asText("DYNAMIC")))
            .enabled(c.path("enabled").asBoolean(true));
        if (c.hasNonNull("sslPort")) {
            builder.sslPort(c.get("sslPort").asInt());
        }
        if (c.hasNonNull("payload")) {
            builder.payload(JSON.convertValue(c.get("payload"), LinkedHashMap.class));
        }
        if (c.hasNonNull("uriSpec")) {
            builder.uriSpec(new UriSpec(c.get("uriSpec").asText()));
        }
        if (c.hasNonNull("registrationTimeUTC")) {
            builder.registrationTimeUTC(c.get("registrationTimeUTC").asLong());
        }
        return builder.build();
    }

    static List<Map<String, Object>> seen(Collection<ServiceInstance<Map>> instances) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (ServiceInstance<Map> instance : instances) {
            out.add(seen(instance));
        }
        out.sort(Comparator.comparing(m -> (String) m.get("id")));
        return out;
    }

    static Map<String, Object> seen(ServiceInstance<Map> instance) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("name", instance.getName());
        out.put("id", instance.getId());
        out.put("address", instance.getAddress());
        out.put("port", instance.getPort());
        out.put("sslPort", instance.getSslPort());
        out.put("payload", instance.getPayload());
        out.put("payloadClass",
            instance.getPayload() == null ? null : instance.getPayload().getClass().getName());
        out.put("registrationTimeUTC", instance.getRegistrationTimeUTC());
        out.put("serviceType", instance.getServiceType().name());
        out.put("enabled", instance.isEnabled());
        if (instance.getUriSpec() == null) {
            out.put("uriSpec", null);
            out.put("uri", null);
        } else {
            StringBuilder template = new StringBuilder();
            for (UriSpec.Part part : instance.getUriSpec()) {
                template.append(part.isVariable() ? "{" + part.getValue() + "}" : part.getValue());
            }
            out.put("uriSpec", template.toString());
            out.put("uri", instance.buildUriSpec());
        }
        return out;
    }
}
