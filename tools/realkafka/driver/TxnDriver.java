// The scenario client of the real-broker harness: Kafka's own Java client, compiled with javac
// against the kafka-clients jar of the release under test (2.8 to 4.x; only APIs present in all
// of them are used).
//
//   java -cp <jars>:<classes> TxnDriver <bootstrap> <mode> [key=value ...]
//
// Every mode prints one JSON object per event on stdout ("{"event": ...}"), which the harness
// reads; errors go to stderr and give exit code 1. Modes:
//
//   txn         N transactions of a transactional producer, some aborted (after a flush, so that
//               ABORT markers exist): id, topic, partitions, count, records, abort_every,
//               compression, timeout_ms, pause_ms (a pause after each transaction)
//   idempotent  N records of an idempotent, non-transactional producer: topic, count, compression,
//               partition (default: by key)
//   plain       N records of a plain producer (acks=1, no idempotence): topic, count, compression
//   open        begin a transaction, write to the partitions, flush, say "open", then wait on
//               stdin: "commit", "abort" or end of input (the harness kills the process); with
//               then_partitions, a second transaction there, committed at once, or with
//               then_wait=true flushed, "open_again", and ended as the next stdin line says
//   zombie      two producers with one transactional.id: the first writes and flushes, the second
//               initialises (fencing it) and commits; the first then tries to write again
//   eos         consume-transform-produce: read `source`, write `sink` in transactions that commit
//               the group's offsets with sendOffsetsToTransaction; with hang=true the last
//               transaction is left open (waits on stdin like `open`; "sent" events first give
//               its first offset on each partition); Streams-shaped with changelog=<topics>:
//               each record also updates a store key ("store-<n>", `keys` of them) on each
//               changelog topic's partition of the record's input partition; abort_every=N
//               aborts every Nth transaction after a flush (the consumer rewinds and the records
//               are processed again); pause_ms pauses after each transaction; with own_key=true
//               each transaction also writes, on each changelog partition it touched, a key of
//               its own ("txn-<input partition>@<first input offset>") that nothing overwrites
//   many        `ids` transactional producers (`prefix`-<i>), `threads` at a time, each running
//               `count` transactions of `records` records on partition i % `partition_count`
//               of `topic` and closing cleanly; the ids in `abort_ids` abort their first one
//   configs     the non-default (topic-level) configs of `topics`, as describeConfigs gives them
//   elect       an unclean leader election for `topic` partition `partition` (electLeaders UNCLEAN,
//               as kafka-leader-election.sh --election-type unclean asks for it)
//   epochs      `count` small committed transactions as fast as possible (epoch exhaustion)
//   create      create `topics` (name:partitions[:replication], comma-separated) with `configs`
//               (key=value;key=value) and wait until every partition has a leader
//   delete      delete the records of `topic` partition `partition` before offset `before`
//               (DeleteRecords: the log start offset moves up, older segments go)
//   alter       set `configs` (key=value;key=value) on `topic` (incrementalAlterConfigs)
//   consume     read `topic` from its first offset up to its end (isolation: `isolation`,
//               read_committed by default) with no group; the records read per partition
//   group       a consumer of group `group` (isolation: `isolation`, read_committed by default)
//               assigned every partition of `topic`, reading from its first offset up to the end
//               its isolation level sees (the LSO for read_committed, the HW otherwise) or up to
//               `stop_at` where lower, then committing that position per partition
//               (commitSync); the committed offset per partition; with delete=true the group is
//               then deleted (Admin deleteConsumerGroups: tombstones for its offsets)
//   offsets     high watermark (read_uncommitted), last stable offset (read_committed) and log
//               start offset of every partition of `topics` (and of the internal topics with
//               internal=true); with state_only=true, each partition's leader and ISR only; with
//               tiered=true, also each partition's earliest local, latest tiered and earliest
//               pending upload offsets (OffsetSpec.earliestLocal() etc., where the release has them)
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnDriver {
    private final String bootstrap;
    private final Map<String, String> opts;

    private TxnDriver(String bootstrap, Map<String, String> opts) {
        this.bootstrap = bootstrap;
        this.opts = opts;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: TxnDriver <bootstrap> <mode> [key=value ...]");
            System.exit(2);
        }
        Map<String, String> opts = new HashMap<>();
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 0) {
                System.err.println("not key=value: " + args[i]);
                System.exit(2);
            }
            opts.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        TxnDriver d = new TxnDriver(args[0], opts);
        try {
            switch (args[1]) {
                case "txn": d.transactions(); break;
                case "idempotent": d.nonTransactional(true); break;
                case "plain": d.nonTransactional(false); break;
                case "open": d.open(); break;
                case "zombie": d.zombie(); break;
                case "eos": d.eos(); break;
                case "epochs": d.epochs(); break;
                case "many": d.many(); break;
                case "configs": d.topicConfigs(); break;
                case "elect": d.electUnclean(); break;
                case "offsets": d.offsets(); break;
                case "create": d.create(); break;
                case "delete": d.deleteRecords(); break;
                case "alter": d.alterTopic(); break;
                case "consume": d.consume(); break;
                case "group": d.group(); break;
                default:
                    System.err.println("unknown mode " + args[1]);
                    System.exit(2);
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    // -- options ------------------------------------------------------------------------------

    private String str(String key, String dflt) {
        String v = opts.get(key);
        if (v == null && dflt == null) {
            throw new IllegalArgumentException("missing option " + key);
        }
        return v == null ? dflt : v;
    }

    private int integer(String key, int dflt) {
        return Integer.parseInt(str(key, Integer.toString(dflt)));
    }

    private List<Integer> partitions() {
        List<Integer> out = new ArrayList<>();
        for (String p : str("partitions", "0").split(",")) {
            out.add(Integer.parseInt(p.trim()));
        }
        return out;
    }

    // -- output -------------------------------------------------------------------------------

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\');
            }
            b.append(c);
        }
        return b.append('"').toString();
    }

    private static void emit(Object... kv) {
        StringBuilder b = new StringBuilder("{");
        for (int i = 0; i < kv.length; i += 2) {
            if (i > 0) {
                b.append(", ");
            }
            b.append(quote(String.valueOf(kv[i]))).append(": ");
            Object v = kv[i + 1];
            b.append(v instanceof Number || v instanceof Boolean ? String.valueOf(v) : quote(String.valueOf(v)));
        }
        System.out.println(b.append('}'));
        System.out.flush();
    }

    private static void emitSent(String event, RecordMetadata m, long createTime) {
        emit("event", event, "topic", m.topic(), "partition", m.partition(), "offset", m.offset(),
             "create_time", createTime);
    }

    // -- clients ------------------------------------------------------------------------------

    private Properties producerProps(String compression) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        return p;
    }

    private KafkaProducer<String, String> transactional(String id) {
        Properties p = producerProps(str("compression", "none"));
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, str("timeout_ms", "60000"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    private static String value(String tag, int n) {
        return tag + "-" + n + "|lorem ipsum";
    }

    /** Write `records` records to each partition in the current transaction; returns the futures. */
    private static List<Future<RecordMetadata>> write(KafkaProducer<String, String> producer, String topic,
                                                      List<Integer> partitions, int records, String tag, int n) {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int p : partitions) {
            for (int r = 0; r < records; r++) {
                sent.add(producer.send(new ProducerRecord<>(topic, p, "k" + (n * records + r), value(tag, n))));
            }
        }
        return sent;
    }

    // -- modes --------------------------------------------------------------------------------

    private void transactions() throws Exception {
        String id = str("id", null);
        String topic = str("topic", null);
        List<Integer> partitions = partitions();
        int count = integer("count", 10);
        int records = integer("records", 3);
        int abortEvery = integer("abort_every", 0);
        int pauseMs = integer("pause_ms", 0);
        int commits = 0;
        int aborts = 0;
        try (KafkaProducer<String, String> producer = transactional(id)) {
            for (int n = 0; n < count; n++) {
                if (pauseMs > 0 && n > 0) {
                    Thread.sleep(pauseMs);
                }
                producer.beginTransaction();
                List<Future<RecordMetadata>> sent = write(producer, topic, partitions, records, id, n);
                if (abortEvery > 0 && n % abortEvery == abortEvery - 1) {
                    producer.flush();
                    for (Future<RecordMetadata> f : sent) {
                        f.get();
                    }
                    producer.abortTransaction();
                    aborts++;
                } else {
                    producer.commitTransaction();
                    commits++;
                }
            }
        }
        emit("event", "done", "id", id, "commits", commits, "aborts", aborts);
    }

    private void nonTransactional(boolean idempotent) throws Exception {
        String topic = str("topic", null);
        int count = integer("count", 100);
        Properties p = producerProps(str("compression", "none"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(idempotent));
        p.put(ProducerConfig.ACKS_CONFIG, idempotent ? "all" : "1");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            String partition = opts.get("partition");
            for (int n = 0; n < count; n++) {
                String v = value(idempotent ? "idem" : "plain", n);
                producer.send(partition == null ? new ProducerRecord<>(topic, "k" + n, v)
                              : new ProducerRecord<>(topic, Integer.parseInt(partition), "k" + n, v));
            }
            producer.flush();
        }
        emit("event", "done", "records", count);
    }

    /** Block until the harness writes a line; null at end of input. */
    private static String waitForHarness() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line = in.readLine();
        return line == null ? null : line.trim();
    }

    private void open() throws Exception {
        String id = str("id", null);
        String topic = str("topic", null);
        int records = integer("records", 10);
        KafkaProducer<String, String> producer = transactional(id);
        producer.beginTransaction();
        for (Future<RecordMetadata> f : write(producer, topic, partitions(), records, id, 0)) {
            emitSent("sent", f.get(), System.currentTimeMillis());
        }
        producer.flush();
        emit("event", "open", "id", id);
        endAsOrdered(producer, waitForHarness(), id);
        // a further transaction on other partitions, when asked for
        String after = opts.get("then_partitions");
        if (after != null) {
            List<Integer> next = new ArrayList<>();
            for (String p : after.split(",")) {
                next.add(Integer.parseInt(p.trim()));
            }
            producer.beginTransaction();
            write(producer, topic, next, records, id, 1);
            String second = "commit";
            if ("true".equals(opts.get("then_wait"))) {
                // leave it open too, until the harness says how to end it
                producer.flush();
                emit("event", "open_again", "id", id);
                second = waitForHarness();
            }
            endAsOrdered(producer, second, id);
        }
        producer.close(Duration.ofSeconds(10));
    }

    // Ends the open transaction as the harness ordered: "commit", "abort", or, at the end of its
    // input without an order, not at all: the transaction stays open and the process stops at once.
    private static void endAsOrdered(KafkaProducer<String, String> producer, String order, String id) {
        if ("commit".equals(order)) {
            producer.commitTransaction();
            emit("event", "committed", "id", id);
        } else if ("abort".equals(order)) {
            producer.abortTransaction();
            emit("event", "aborted", "id", id);
        } else {
            Runtime.getRuntime().halt(0);
        }
    }

    private void zombie() throws Exception {
        String id = str("id", null);
        String topic = str("topic", null);
        List<Integer> partitions = partitions();
        KafkaProducer<String, String> first = transactional(id);
        first.beginTransaction();
        for (Future<RecordMetadata> f : write(first, topic, partitions, 5, "first", 0)) {
            f.get();
        }
        first.flush();
        emit("event", "first_open", "id", id);
        KafkaProducer<String, String> second = transactional(id);  // fences the first
        emit("event", "second_initialised", "id", id);
        second.beginTransaction();
        write(second, topic, partitions, 5, "second", 0);
        second.commitTransaction();
        emit("event", "second_committed", "id", id);
        String outcome;
        try {
            for (Future<RecordMetadata> f : write(first, topic, partitions, 5, "first", 1)) {
                f.get();
            }
            first.commitTransaction();
            outcome = "committed";
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            outcome = cause.getClass().getSimpleName();
        }
        emit("event", "first_after_fence", "outcome", outcome);
        first.close(Duration.ofSeconds(5));
        second.close(Duration.ofSeconds(10));
    }

    private void eos() throws Exception {
        String id = str("id", null);
        String source = str("source", null);
        String sink = str("sink", null);
        String group = str("group", null);
        int batches = integer("count", 5);
        boolean hang = Boolean.parseBoolean(str("hang", "false"));
        String[] changelogs = opts.containsKey("changelog") ? str("changelog", null).split(",") : new String[0];
        int keys = integer("keys", 4);
        int abortEvery = integer("abort_every", 0);
        int pauseMs = integer("pause_ms", 0);
        boolean ownKey = Boolean.parseBoolean(str("own_key", "false"));
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, str("max_poll", "20"));
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        KafkaProducer<String, String> producer = transactional(id);
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
        consumer.subscribe(Collections.singletonList(source));
        int done = 0;
        int started = 0;
        int aborts = 0;
        long deadline = System.currentTimeMillis() + 120_000;
        while (done < batches && System.currentTimeMillis() < deadline) {
            ConsumerRecords<String, String> polled = consumer.poll(Duration.ofMillis(500));
            if (polled.isEmpty()) {
                continue;
            }
            producer.beginTransaction();
            started++;
            Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
            Map<TopicPartition, Long> first = new HashMap<>();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (ConsumerRecord<String, String> r : polled) {
                sent.add(producer.send(new ProducerRecord<>(sink, r.key(), r.value().toUpperCase())));
                String key = "store-" + Math.floorMod(r.key() == null ? (int) r.offset() : r.key().hashCode(), keys);
                for (String changelog : changelogs) {
                    sent.add(producer.send(new ProducerRecord<>(changelog, r.partition(), key, "t" + started + "@" + r.offset())));
                }
                TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                next.put(tp, new OffsetAndMetadata(r.offset() + 1));
                first.putIfAbsent(tp, r.offset());
            }
            if (ownKey) {
                // a key of this transaction's own, never written again: the first input offset it
                // read on the partition (a committed transaction's offsets are never read again)
                for (Map.Entry<TopicPartition, Long> e : first.entrySet()) {
                    for (String changelog : changelogs) {
                        sent.add(producer.send(new ProducerRecord<>(changelog, e.getKey().partition(),
                            "txn-" + e.getKey().partition() + "@" + e.getValue(), "t" + started)));
                    }
                }
            }
            producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
            if (hang && done + 1 == batches) {
                producer.flush();
                Map<String, RecordMetadata> firsts = new LinkedHashMap<>();
                for (Future<RecordMetadata> f : sent) {
                    RecordMetadata m = f.get();
                    String tp = m.topic() + "-" + m.partition();
                    if (!firsts.containsKey(tp) || firsts.get(tp).offset() > m.offset()) {
                        firsts.put(tp, m);
                    }
                }
                for (RecordMetadata m : firsts.values()) {
                    emitSent("sent", m, System.currentTimeMillis());
                }
                emit("event", "open", "id", id, "group", group);
                waitForHarness();
                Runtime.getRuntime().halt(0);
            }
            if (abortEvery > 0 && started % abortEvery == 0) {
                producer.flush();
                for (Future<RecordMetadata> f : sent) {
                    f.get();
                }
                producer.abortTransaction();
                aborts++;
                // as Kafka Streams does after an abort: back to the last committed position
                for (Map.Entry<TopicPartition, Long> e : first.entrySet()) {
                    consumer.seek(e.getKey(), e.getValue());
                }
                emit("event", "aborted", "id", id, "records", polled.count());
            } else {
                producer.commitTransaction();
                done++;
                emit("event", "committed", "id", id, "records", polled.count());
            }
            if (pauseMs > 0) {
                Thread.sleep(pauseMs);
            }
        }
        consumer.close(Duration.ofSeconds(10));
        producer.close(Duration.ofSeconds(10));
        emit("event", "done", "id", id, "transactions", done, "aborted", aborts);
    }

    private void many() throws Exception {
        String prefix = str("prefix", null);
        String topic = str("topic", null);
        int ids = integer("ids", 300);
        int count = integer("count", 3);
        int records = integer("records", 1);
        int partitionCount = integer("partition_count", 1);
        java.util.Set<Integer> abortIds = new java.util.HashSet<>();
        for (String i : str("abort_ids", "").split(",")) {
            if (!i.trim().isEmpty()) {
                abortIds.add(Integer.parseInt(i.trim()));
            }
        }
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(integer("threads", 4));
        List<java.util.concurrent.Future<int[]>> results = new ArrayList<>();
        for (int i = 0; i < ids; i++) {
            final int n = i;
            results.add(pool.submit(() -> {
                String id = prefix + "-" + n;
                int commits = 0;
                int aborted = 0;
                try (KafkaProducer<String, String> producer = transactional(id)) {
                    for (int t = 0; t < count; t++) {
                        producer.beginTransaction();
                        List<Future<RecordMetadata>> sent = write(producer, topic,
                            Collections.singletonList(n % partitionCount), records, id, t);
                        if (t == 0 && abortIds.contains(n)) {
                            producer.flush();
                            for (Future<RecordMetadata> f : sent) {
                                f.get();
                            }
                            producer.abortTransaction();
                            aborted++;
                        } else {
                            producer.commitTransaction();
                            commits++;
                        }
                    }
                }
                return new int[] {commits, aborted};
            }));
        }
        int commits = 0;
        int aborts = 0;
        for (java.util.concurrent.Future<int[]> r : results) {
            int[] got = r.get();
            commits += got[0];
            aborts += got[1];
        }
        pool.shutdown();
        emit("event", "done", "ids", ids, "commits", commits, "aborts", aborts);
    }

    private void electUnclean() throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        TopicPartition tp = new TopicPartition(str("topic", null), integer("partition", 0));
        try (Admin admin = Admin.create(p)) {
            String outcome = "elected";
            try {
                admin.electLeaders(org.apache.kafka.common.ElectionType.UNCLEAN, Collections.singleton(tp)).all().get();
            } catch (Exception e) {
                Throwable cause = e.getCause() != null ? e.getCause() : e;
                outcome = cause.getClass().getSimpleName() + ": " + cause.getMessage();
            }
            emit("event", "elect", "topic", tp.topic(), "partition", tp.partition(), "outcome", outcome);
        }
    }

    private void topicConfigs() throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        List<org.apache.kafka.common.config.ConfigResource> resources = new ArrayList<>();
        for (String t : str("topics", null).split(",")) {
            resources.add(new org.apache.kafka.common.config.ConfigResource(
                org.apache.kafka.common.config.ConfigResource.Type.TOPIC, t.trim()));
        }
        try (Admin admin = Admin.create(p)) {
            Map<org.apache.kafka.common.config.ConfigResource, org.apache.kafka.clients.admin.Config> got =
                admin.describeConfigs(resources).all().get();
            for (org.apache.kafka.common.config.ConfigResource r : resources) {
                for (org.apache.kafka.clients.admin.ConfigEntry e : got.get(r).entries()) {
                    if (e.source() == org.apache.kafka.clients.admin.ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG) {
                        emit("event", "config", "topic", r.name(), "name", e.name(), "value", e.value());
                    }
                }
            }
        }
    }

    private void epochs() throws Exception {
        String id = str("id", null);
        String topic = str("topic", null);
        int count = integer("count", 100);
        int partition = partitions().get(0);
        long start = System.currentTimeMillis();
        try (KafkaProducer<String, String> producer = transactional(id)) {
            for (int n = 0; n < count; n++) {
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, partition, "e", Integer.toString(n)));
                producer.commitTransaction();
                if (n % 1000 == 999) {
                    emit("event", "progress", "transactions", n + 1, "ms", System.currentTimeMillis() - start);
                }
            }
        }
        emit("event", "done", "id", id, "transactions", count);
    }

    private void create() throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        Map<String, String> configs = new HashMap<>();
        for (String kv : str("configs", "").split(";")) {
            if (!kv.isEmpty()) {
                configs.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
            }
        }
        try (Admin admin = Admin.create(p)) {
            List<org.apache.kafka.clients.admin.NewTopic> topics = new ArrayList<>();
            List<String> names = new ArrayList<>();
            for (String spec : str("topics", null).split(",")) {
                String[] parts = spec.split(":");
                short rf = parts.length > 2 ? Short.parseShort(parts[2]) : 1;
                if (parts.length > 3) {
                    // name:partitions:rf:b1/b2/...: every partition's replicas on these brokers, in this order
                    List<Integer> replicas = new ArrayList<>();
                    for (String b : parts[3].split("/")) {
                        replicas.add(Integer.parseInt(b));
                    }
                    Map<Integer, List<Integer>> assignment = new HashMap<>();
                    for (int i = 0; i < Integer.parseInt(parts[1]); i++) {
                        assignment.put(i, replicas);
                    }
                    topics.add(new org.apache.kafka.clients.admin.NewTopic(parts[0], assignment).configs(configs));
                } else {
                    topics.add(new org.apache.kafka.clients.admin.NewTopic(parts[0], Integer.parseInt(parts[1]), rf)
                               .configs(configs));
                }
                names.add(parts[0]);
            }
            admin.createTopics(topics).all().get();
            long deadline = System.currentTimeMillis() + 60_000;
            while (true) {
                boolean ready = true;
                try {
                    for (TopicDescription d : describe(admin, names).values()) {
                        for (TopicPartitionInfo info : d.partitions()) {
                            ready &= info.leader() != null && info.isr().size() == info.replicas().size();
                        }
                    }
                } catch (Exception e) {
                    ready = false;
                }
                if (ready) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("topics have no leader after 60 s: " + names);
                }
                Thread.sleep(200);
            }
            emit("event", "created", "topics", String.join(",", names));
        }
    }

    private void alterTopic() throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        org.apache.kafka.common.config.ConfigResource topic = new org.apache.kafka.common.config.ConfigResource(
            org.apache.kafka.common.config.ConfigResource.Type.TOPIC, str("topic", null));
        List<org.apache.kafka.clients.admin.AlterConfigOp> ops = new ArrayList<>();
        for (String kv : str("configs", null).split(";")) {
            ops.add(new org.apache.kafka.clients.admin.AlterConfigOp(
                new org.apache.kafka.clients.admin.ConfigEntry(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1)),
                org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET));
        }
        try (Admin admin = Admin.create(p)) {
            admin.incrementalAlterConfigs(Collections.singletonMap(topic, ops)).all().get();
        }
        emit("event", "altered", "topic", topic.name());
    }

    private void deleteRecords() throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        TopicPartition tp = new TopicPartition(str("topic", null), integer("partition", 0));
        long before = Long.parseLong(str("before", null));
        try (Admin admin = Admin.create(p)) {
            admin.deleteRecords(Collections.singletonMap(
                tp, org.apache.kafka.clients.admin.RecordsToDelete.beforeOffset(before))).all().get();
            emit("event", "deleted", "topic", tp.topic(), "partition", tp.partition(), "before", before);
        }
    }

    /** A consumer at the command's isolation level (read_committed unless told), of the group (null: none), committing nothing by itself. */
    private KafkaConsumer<String, String> newConsumer(String group) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) {
            c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            c.put(ConsumerConfig.CLIENT_ID_CONFIG, group + "-client");
        }
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, str("isolation", "read_committed"));
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(c);
    }

    /** Every partition of the topic assigned to the consumer, each read from its beginning. */
    private static List<TopicPartition> assignedFromStart(KafkaConsumer<String, String> consumer, String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (org.apache.kafka.common.PartitionInfo info : consumer.partitionsFor(topic)) {
            tps.add(new TopicPartition(topic, info.partition()));
        }
        consumer.assign(tps);
        consumer.seekToBeginning(tps);
        return tps;
    }

    private void consume() throws Exception {
        String topic = str("topic", null);
        try (KafkaConsumer<String, String> consumer = newConsumer(null)) {
            List<TopicPartition> tps = assignedFromStart(consumer, topic);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            Map<TopicPartition, Integer> read = new HashMap<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    read.merge(new TopicPartition(r.topic(), r.partition()), 1, Integer::sum);
                }
                boolean done = true;
                for (TopicPartition tp : tps) {
                    done &= consumer.position(tp) >= end.get(tp);
                }
                if (done) {
                    break;
                }
            }
            for (TopicPartition tp : tps) {
                emit("event", "consumed", "topic", topic, "partition", tp.partition(), "records",
                     read.getOrDefault(tp, 0), "position", consumer.position(tp), "end", end.get(tp));
            }
        }
    }

    private void group() throws Exception {
        String topic = str("topic", null);
        String group = str("group", null);
        long stopAt = Long.parseLong(str("stop_at", Long.toString(Long.MAX_VALUE)));
        try (KafkaConsumer<String, String> consumer = newConsumer(group)) {
            List<TopicPartition> tps = assignedFromStart(consumer, topic);
            // the end this consumer's isolation level sees: the LSO for read_committed
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            Map<TopicPartition, Long> target = new HashMap<>();
            for (TopicPartition tp : tps) {
                target.put(tp, Math.min(end.get(tp), stopAt));
            }
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (consumer.position(tp) >= target.get(tp)) {
                        consumer.pause(Collections.singletonList(tp));
                    } else {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
                consumer.poll(Duration.ofMillis(500));
            }
            Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
            for (TopicPartition tp : tps) {
                commit.put(tp, new OffsetAndMetadata(Math.min(consumer.position(tp), target.get(tp))));
            }
            consumer.commitSync(commit);
            for (TopicPartition tp : tps) {
                emit("event", "committed", "group", group, "topic", topic, "partition", tp.partition(),
                     "offset", commit.get(tp).offset(), "end", end.get(tp),
                     "isolation", str("isolation", "read_committed"));
            }
        }
        if (Boolean.parseBoolean(str("delete", "false"))) {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            try (Admin admin = Admin.create(p)) {
                admin.deleteConsumerGroups(Collections.singletonList(group)).all().get();
            }
            emit("event", "deleted_group", "group", group);
        }
    }

    private void offsets() throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            List<String> topics = new ArrayList<>();
            for (String t : str("topics", null).split(",")) {
                topics.add(t.trim());
            }
            if (Boolean.parseBoolean(str("internal", "false"))) {
                // the internal topics that exist: __consumer_offsets, __transaction_state
                for (String t : admin.listTopics(new org.apache.kafka.clients.admin.ListTopicsOptions().listInternal(true))
                                     .names().get()) {
                    if (t.startsWith("__") && !topics.contains(t)) {
                        topics.add(t);
                    }
                }
            }
            Map<String, TopicDescription> described = describe(admin, topics);
            List<TopicPartition> tps = new ArrayList<>();
            Map<TopicPartition, Integer> leaders = new HashMap<>();
            Map<TopicPartition, String> isrs = new HashMap<>();
            for (TopicDescription d : described.values()) {
                for (TopicPartitionInfo info : d.partitions()) {
                    TopicPartition tp = new TopicPartition(d.name(), info.partition());
                    leaders.put(tp, info.leader() == null ? -1 : info.leader().id());
                    List<String> isr = new ArrayList<>();
                    for (org.apache.kafka.common.Node n : info.isr()) {
                        isr.add(Integer.toString(n.id()));
                    }
                    isrs.put(tp, String.join(",", isr));
                    if (Boolean.parseBoolean(str("state_only", "false"))) {
                        // leader and ISR only (no ListOffsets: the leader may be down)
                        emit("event", "state", "topic", tp.topic(), "partition", tp.partition(),
                             "leader", leaders.get(tp), "isr", isrs.get(tp));
                        continue;
                    }
                    tps.add(tp);
                }
            }
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> hw = list(admin, tps, OffsetSpec.latest(),
                                                                                     IsolationLevel.READ_UNCOMMITTED);
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> lso = list(admin, tps, OffsetSpec.latest(),
                                                                                      IsolationLevel.READ_COMMITTED);
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> start = list(admin, tps, OffsetSpec.earliest(),
                                                                                        IsolationLevel.READ_UNCOMMITTED);
            for (TopicPartition tp : tps) {
                emit("event", "offsets", "topic", tp.topic(), "partition", tp.partition(),
                     "high_watermark", hw.get(tp).offset(), "last_stable_offset", lso.get(tp).offset(),
                     "log_start_offset", start.get(tp).offset(), "leader", leaders.get(tp), "isr", isrs.get(tp));
            }
            if (Boolean.parseBoolean(str("tiered", "false"))) {
                // tiered storage (KIP-405): the local log start (KIP-1005, 3.9+), the last offset in
                // the remote store, the first offset not uploaded yet (4.x); -2: not in this release
                String[] specs = {"earliestLocal", "latestTiered", "earliestPendingUpload"};
                Map<String, Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo>> got = new LinkedHashMap<>();
                for (String spec : specs) {
                    try {
                        OffsetSpec s = (OffsetSpec) OffsetSpec.class.getMethod(spec).invoke(null);
                        got.put(spec, list(admin, tps, s, IsolationLevel.READ_UNCOMMITTED));
                    } catch (NoSuchMethodException e) {
                        got.put(spec, null);
                    }
                }
                for (TopicPartition tp : tps) {
                    Object[] kv = {"event", "tiered_offsets", "topic", tp.topic(), "partition", tp.partition(),
                                   "earliest_local", -2L, "latest_tiered", -2L, "earliest_pending_upload", -2L};
                    for (int i = 0; i < specs.length; i++) {
                        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> m = got.get(specs[i]);
                        kv[7 + 2 * i] = m == null ? -2L : m.get(tp).offset();
                    }
                    emit(kv);
                }
            }
        }
    }

    /** Topic descriptions: ``allTopicNames()`` from 3.1, ``all()`` before (removed in 4.0). */
    @SuppressWarnings("unchecked")
    private static Map<String, TopicDescription> describe(Admin admin, List<String> topics) throws Exception {
        Object result = admin.describeTopics(topics);
        java.lang.reflect.Method all;
        try {
            all = result.getClass().getMethod("allTopicNames");
        } catch (NoSuchMethodException e) {
            all = result.getClass().getMethod("all");
        }
        return ((org.apache.kafka.common.KafkaFuture<Map<String, TopicDescription>>) all.invoke(result)).get();
    }

    private static Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> list(
            Admin admin, List<TopicPartition> tps, OffsetSpec spec, IsolationLevel level) throws Exception {
        Map<TopicPartition, OffsetSpec> request = new LinkedHashMap<>();
        for (TopicPartition tp : tps) {
            request.put(tp, spec);
        }
        return admin.listOffsets(request, new ListOffsetsOptions(level)).all().get();
    }
}
