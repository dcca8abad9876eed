package example;

import io.cloudevents.CloudEvent;
import io.cloudevents.core.builder.CloudEventBuilder;
import io.cloudevents.core.message.Encoding;
import io.cloudevents.jackson.JsonFormat;
import io.cloudevents.kafka.CloudEventSerializer;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/** Produces one CloudEvent (structured JSON) to hookrelay's events topic inside a Kafka transaction. */
public class Producer {
    public static void main(String[] args) throws Exception {
        String brokers = System.getProperty("BROKERS", "127.0.0.1:9092");
        String topic = System.getProperty("TOPIC", "hookrelay.events");
        String tenant = System.getProperty("TENANT", "");

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true); // the default since Kafka 3.0; acks=all with it
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "billing-" + UUID.randomUUID()); // stable per instance in a real service
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, CloudEventSerializer.class);
        p.put(CloudEventSerializer.ENCODING_CONFIG, Encoding.STRUCTURED); // or Encoding.BINARY (ce_ headers)
        p.put(CloudEventSerializer.EVENT_FORMAT_CONFIG, JsonFormat.CONTENT_TYPE);

        String id = "evt_" + UUID.randomUUID(); // with source, it makes the webhook-id: reuse it on a retry
        CloudEventBuilder b = CloudEventBuilder.v1()
                .withId(id)
                .withSource(URI.create("/billing"))
                .withType("invoice.paid")
                .withTime(OffsetDateTime.now(ZoneOffset.UTC))
                .withData("application/json",
                        "{\"invoice\":\"in_1\",\"total\":4200,\"note\":\"Grüße <b>&amp;</b>\"}".getBytes(StandardCharsets.UTF_8));
        if (!tenant.isEmpty()) b.withExtension("tenantid", tenant);
        CloudEvent event = b.build();

        try (KafkaProducer<String, CloudEvent> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "in_1", event)); // key: the entity, for per-entity fan-out order
            // ... the rest of the transaction: other records, or sendOffsetsToTransaction(...)
            producer.commitTransaction();
        }
        System.out.println("published " + id);
    }
}
