// The topics and records of the Kafka tests, through Kafka's own clients (kafka-clients of the
// broker's jars): compiled by tests/kafka_broker.py once per broker and run with
// `java -cp <classes>:<broker jars> KafkaTopics BOOTSTRAP COMMAND TOPIC [N]`.
//
//   create TOPIC PARTITIONS       a topic (replication factor 1)
//   partitions TOPIC PARTITIONS   grow a topic to PARTITIONS
//   produce TOPIC                 one record per stdin line KEY<TAB>VALUE, each acknowledged by the
//                                 broker (acks=all, idempotent producer) before the exit; then
//                                 prints the topic's end offsets, as `offsets` does
//   offsets TOPIC                 prints "PARTITION<TAB>END OFFSET" lines
//
// Any failure exits non-zero with the exception on stderr.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

public class KafkaTopics {
  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      throw new IllegalArgumentException(
          "usage: BOOTSTRAP create|partitions|produce|offsets TOPIC [N]");
    }
    String bootstrap = args[0], command = args[1], topic = args[2];
    Properties props = new Properties();
    props.put("bootstrap.servers", bootstrap);
    switch (command) {
      case "create":
        try (Admin admin = Admin.create(props)) {
          NewTopic t = new NewTopic(topic, Integer.parseInt(args[3]), (short) 1);
          admin.createTopics(List.of(t)).all().get();
        }
        break;
      case "partitions":
        try (Admin admin = Admin.create(props)) {
          NewPartitions p = NewPartitions.increaseTo(Integer.parseInt(args[3]));
          admin.createPartitions(Map.of(topic, p)).all().get();
        }
        break;
      case "produce":
        produce(props, topic);
        printEndOffsets(props, topic);
        break;
      case "offsets":
        printEndOffsets(props, topic);
        break;
      default:
        throw new IllegalArgumentException("unknown command " + command);
    }
  }

  static void printEndOffsets(Properties props, String topic) throws Exception {
    try (Admin admin = Admin.create(props)) {
      int partitions = admin.describeTopics(List.of(topic)).allTopicNames().get()
          .get(topic).partitions().size();
      Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
      for (int p = 0; p < partitions; p++) {
        latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
      }
      var ends = admin.listOffsets(latest).all().get();
      for (int p = 0; p < partitions; p++) {
        System.out.println(p + "\t" + ends.get(new TopicPartition(topic, p)).offset());
      }
    }
  }

  static void produce(Properties baseProps, String topic) throws Exception {
    Properties props = new Properties();
    props.putAll(baseProps);
    props.put("acks", "all");
    props.put("enable.idempotence", "true");
    props.put("linger.ms", "5");
    props.put("key.serializer", StringSerializer.class.getName());
    props.put("value.serializer", StringSerializer.class.getName());
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    List<Future<RecordMetadata>> sent = new ArrayList<>();
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
      String line;
      while ((line = in.readLine()) != null) {
        if (line.isEmpty()) {
          continue;
        }
        int tab = line.indexOf('\t');
        if (tab < 0) {
          throw new IllegalArgumentException("a record line is KEY<TAB>VALUE: " + line);
        }
        String key = line.substring(0, tab), value = line.substring(tab + 1);
        sent.add(producer.send(new ProducerRecord<>(topic, key, value)));
      }
      producer.flush();
      for (Future<RecordMetadata> f : sent) {
        f.get();  // a record the broker did not take fails the run
      }
    }
  }
}
