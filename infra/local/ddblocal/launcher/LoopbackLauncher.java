import com.almworks.sqlite4java.SQLiteConnection;
import com.almworks.sqlite4java.SQLiteJob;
import com.almworks.sqlite4java.SQLiteQueue;
import java.lang.reflect.Field;
import java.net.InetAddress;
import java.lang.reflect.Modifier;
import java.util.ArrayDeque;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Locale;
import java.util.Set;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.util.Callback;

/**
 * Starts DynamoDB Local as its own ServerRunner does, but with its Jetty
 * connector bound to 127.0.0.1: DynamoDB Local has no bind-address option and
 * otherwise listens on every interface. It also exits when its standard input
 * ends: the stack holds the other end of that pipe, and the operating system
 * closes it when the stack dies in any way, on every OS (Linux's parent-death
 * signal has no macOS equivalent).
 *
 * It refuses, with 403, what a browser sends for a web page: a Host that does
 * not name the loopback interface (a name a page rebound to 127.0.0.1), an
 * Origin header, a cross-site Sec-Fetch-Site, a CORS preflight. Only the
 * stack's front calls DynamoDB Local, and sends none of these; without the
 * check, a page that found this port could read and write the tables past
 * the front's own guard.
 *
 * Before it serves, it indexes the table that holds every stream's records by
 * stream and by shard. DynamoDB Local keys that table by sequence number alone
 * and, on every write to a table with a stream, looks up the stream's oldest
 * record with a scan of all streams' records: each write costs time in
 * proportion to every record of the last 24 hours, of all tables, and a load
 * slows as it goes. DynamoDB Streams has no such cost, so the index makes the
 * emulation more like AWS, not kinder; it changes no answer.
 */
public class LoopbackLauncher {
    public static void main(String[] args) throws Exception {
        Thread watch = new Thread(() -> {
            try {
                while (System.in.read() != -1) {
                    // The stack never writes; any byte is ignored.
                }
            } catch (java.io.IOException e) {
                // A broken pipe is an end too.
            }
            System.exit(0);
        }, "parent-watch");
        watch.setDaemon(true);
        watch.start();
        Class<?> runner = Class.forName("software.amazon.dynamodb.services.local.main.ServerRunner");
        Object proxy = runner.getMethod("createServerFromCommandLineArgs", String[].class).invoke(null, (Object) args);
        Field field = proxy.getClass().getDeclaredField("server");
        field.setAccessible(true);
        Object server = field.get(proxy);
        Object[] connectors = (Object[]) server.getClass().getMethod("getConnectors").invoke(server);
        if (connectors.length == 0) {
            throw new IllegalStateException("DynamoDB Local's server has no connector to bind");
        }
        for (Object connector : connectors) {
            connector.getClass().getMethod("setHost", String.class).invoke(connector, "127.0.0.1");
        }
        Server jetty = (Server) server;
        Handler inner = jetty.getHandler();
        if (inner == null) {
            throw new IllegalStateException("DynamoDB Local's server has no handler to guard");
        }
        jetty.setHandler(new PagesRefused(inner));
        indexStreamRecords(proxy);
        proxy.getClass().getMethod("start").invoke(proxy);
        proxy.getClass().getMethod("join").invoke(proxy);
    }

    /** PagesRefused answers 403 to a request a browser sent for a web page. */
    static final class PagesRefused extends Handler.Wrapper {
        PagesRefused(Handler inner) {
            super(inner);
        }

        @Override
        public boolean handle(Request request, Response response, Callback callback) throws Exception {
            if (!loopbackHost(request.getHeaders().get("Host"))) {
                Response.writeError(request, response, callback, 403, "only requests addressed to 127.0.0.1 or localhost are answered");
                return true;
            }
            if (fromAPage(request)) {
                Response.writeError(request, response, callback, 403, "requests from web pages are refused");
                return true;
            }
            return super.handle(request, response, callback);
        }
    }

    static boolean fromAPage(Request request) {
        var h = request.getHeaders();
        if (h.get("Origin") != null) {
            return true;
        }
        if ("OPTIONS".equals(request.getMethod()) && h.get("Access-Control-Request-Method") != null) {
            return true;
        }
        String site = h.get("Sec-Fetch-Site");
        return site != null && !site.isEmpty() && !site.equals("none") && !site.equals("same-origin");
    }

    /**
     * loopbackHost says whether a Host header names this machine's loopback
     * interface: localhost, a name under it, or a loopback address literal.
     * A name is never looked up.
     */
    static boolean loopbackHost(String host) {
        if (host == null || host.isEmpty()) {
            return false;
        }
        host = host.toLowerCase(Locale.ROOT);
        if (host.startsWith("[")) {
            int end = host.indexOf(']');
            if (end < 0) {
                return false;
            }
            host = host.substring(1, end);
        } else if (host.indexOf(':') == host.lastIndexOf(':') && host.indexOf(':') >= 0) {
            host = host.substring(0, host.indexOf(':'));
        }
        if (host.endsWith(".")) {
            host = host.substring(0, host.length() - 1);
        }
        if (host.equals("localhost") || host.endsWith(".localhost")) {
            return true;
        }
        boolean v4 = host.matches("[0-9]{1,3}(\\.[0-9]{1,3}){3}");
        if (v4) {
            for (String octet : host.split("\\.")) {
                if (Integer.parseInt(octet) > 255) {
                    return false; // not an address: getByName would look it up as a name
                }
            }
        }
        boolean v6 = host.indexOf(':') >= 0 && host.matches("[0-9a-f:.]+");
        if (!v4 && !v6) {
            return false;
        }
        try {
            return InetAddress.getByName(host).isLoopbackAddress();
        } catch (java.net.UnknownHostException e) {
            return false;
        }
    }

    /** The line the stack reads to know the stream records are indexed. */
    static final String INDEXED = "shopstream: stream records indexed";

    static void indexStreamRecords(Object root) {
        // The request handler opens the database on its first request; ask it
        // for its (shared) database now, as a request would.
        Object handler = find(root, o -> o.getClass().getName().endsWith(".LocalDynamoDBRequestHandler"));
        if (handler != null) {
            try {
                java.lang.reflect.Method get = handler.getClass().getDeclaredMethod("getHandler", String.class);
                get.setAccessible(true);
                get.invoke(handler, "shopstream");
            } catch (ReflectiveOperationException | RuntimeException e) {
                System.err.println("shopstream: cannot open the database early: " + e);
            }
        }
        SQLiteQueue queue = (SQLiteQueue) find(handler == null ? root : handler, o -> o instanceof SQLiteQueue);
        if (queue == null) {
            System.err.println("shopstream: no SQLite queue found; stream records left unindexed");
            return;
        }
        try {
            queue.execute(new SQLiteJob<Object>() {
                @Override
                protected Object job(SQLiteConnection db) throws Throwable {
                    db.exec("CREATE INDEX IF NOT EXISTS \"us*stream\" ON us (StreamID, SequenceNumber)");
                    db.exec("CREATE INDEX IF NOT EXISTS \"us*shard\" ON us (ShardID, SequenceNumber)");
                    return null;
                }
            }).complete();
            System.out.println(INDEXED);
        } catch (RuntimeException e) {
            System.err.println("shopstream: stream records left unindexed: " + e);
        }
    }

    /** find walks the server's objects, outside the JDK's, to the first that is wanted. */
    static Object find(Object root, java.util.function.Predicate<Object> wanted) {
        Set<Object> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        ArrayDeque<Object> todo = new ArrayDeque<>();
        todo.add(root);
        while (!todo.isEmpty()) {
            Object o = todo.poll();
            if (wanted.test(o)) {
                return o;
            }
            if (!seen.add(o) || seen.size() > 100000) {
                continue;
            }
            for (Class<?> c = o.getClass(); c != null && !jdk(c); c = c.getSuperclass()) {
                for (Field f : c.getDeclaredFields()) {
                    if (Modifier.isStatic(f.getModifiers()) || f.getType().isPrimitive()) {
                        continue;
                    }
                    try {
                        f.setAccessible(true);
                        Object v = f.get(o);
                        if (v != null && (v instanceof SQLiteQueue || !jdk(v.getClass()))) {
                            todo.add(v);
                        } else if (v instanceof Iterable) {
                            for (Object e : (Iterable<?>) v) {
                                if (e != null) {
                                    todo.add(e);
                                }
                            }
                        } else if (v instanceof java.util.Map) {
                            for (Object e : ((java.util.Map<?, ?>) v).values()) {
                                if (e != null) {
                                    todo.add(e);
                                }
                            }
                        }
                    } catch (RuntimeException | IllegalAccessException e) {
                        // A field the module system keeps closed: not a way to the queue.
                    }
                }
            }
        }
        return null;
    }

    static boolean jdk(Class<?> c) {
        String n = c.getName();
        return c.isArray() || n.startsWith("java.") || n.startsWith("javax.") || n.startsWith("jdk.") || n.startsWith("sun.");
    }
}
