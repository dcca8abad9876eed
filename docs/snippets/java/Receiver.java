// A hookrelay webhook receiver in Java with the JDK alone (javax.crypto, com.sun.net.httpserver).
// Run: WEBHOOK_SECRET=whsec_… PORT=8000 java Receiver.java
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.ByteArrayOutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Base64;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public class Receiver {
    static final long TOLERANCE_S = 5 * 60;
    static final Set<String> SEEN = ConcurrentHashMap.newKeySet(); // use a unique key in your database instead
    static byte[] key;

    static boolean verify(byte[] raw, String id, String ts, String sigs) throws Exception {
        if (id == null || sigs == null || ts == null || !ts.matches("\\d{1,18}")) return false;
        if (Math.abs(System.currentTimeMillis() / 1000 - Long.parseLong(ts)) > TOLERANCE_S) return false; // a replay
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(key, "HmacSHA256"));
        mac.update((id + "." + ts + ".").getBytes(StandardCharsets.UTF_8));
        byte[] expected = mac.doFinal(raw); // the raw body bytes
        for (String s : sigs.split(" ")) {
            String[] parts = s.split(",", 2);
            if (parts.length != 2 || !parts[0].equals("v1")) continue;
            try {
                if (MessageDigest.isEqual(Base64.getDecoder().decode(parts[1]), expected)) return true;
            } catch (IllegalArgumentException e) {
                // not base64: try the next one
            }
        }
        return false;
    }

    static void handle(HttpExchange ex) throws java.io.IOException {
        try (ex) {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            ex.getRequestBody().transferTo(buf);
            byte[] raw = buf.toByteArray();
            String id = ex.getRequestHeaders().getFirst("webhook-id");
            boolean ok;
            try {
                ok = verify(raw, id, ex.getRequestHeaders().getFirst("webhook-timestamp"),
                        ex.getRequestHeaders().getFirst("webhook-signature"));
            } catch (Exception e) {
                ok = false;
            }
            if (!ok) {
                ex.sendResponseHeaders(400, -1);
                return;
            }
            if (SEEN.add(id)) {
                System.out.println("verified " + id); // parse raw with your JSON library, then queue the work
                System.out.flush();
            }
            ex.sendResponseHeaders(204, -1);
        }
    }

    public static void main(String[] args) throws Exception {
        key = Base64.getDecoder().decode(System.getenv("WEBHOOK_SECRET").replaceFirst("^whsec_", ""));
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", Integer.parseInt(System.getenv("PORT"))), 0);
        server.createContext("/", Receiver::handle);
        server.start();
    }
}
