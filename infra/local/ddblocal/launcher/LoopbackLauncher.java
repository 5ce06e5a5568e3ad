import java.lang.reflect.Field;

/**
 * Starts DynamoDB Local as its own ServerRunner does, but with its Jetty
 * connector bound to 127.0.0.1: DynamoDB Local has no bind-address option and
 * otherwise listens on every interface. It also exits when its standard input
 * ends: the stack holds the other end of that pipe, and the operating system
 * closes it when the stack dies in any way, on every OS (Linux's parent-death
 * signal has no macOS equivalent).
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
        proxy.getClass().getMethod("start").invoke(proxy);
        proxy.getClass().getMethod("join").invoke(proxy);
    }
}
