import java.util.*;
import java.util.concurrent.*;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.*;
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.*;

/**
 * SQL92 subscriptions and a 4.x delay level with the RocketMQ Java client (4.9.8 or 5.3.3,
 * whichever java-run compiles it against). Args: NAMESRV TOPIC (COUNT EXPR)...
 *
 * One push consumer per EXPR (group G{j}_TOPIC, MessageSelector.bySql(EXPR), from the first
 * offset) and one on TOPIC_d ("*") start; then 42 messages go to TOPIC (key k{i}: TAGS
 * TagA, TagB or none by i % 3; a = i % 7 unless i % 5 == 4; s = x, y or z by i % 3 unless
 * i % 4 == 3; n = i; k40 has a = "five", k41 has a = " 3 ") and one message with delay level
 * 1 to TOPIC_d (key delayed, property u = 1). It waits until each consumer j has COUNT
 * keys and the delayed message came (at most 150 s), then 3 s more for strays, and prints:
 *   GOT j k1,k2,...       the distinct keys consumer j received, sorted
 *   DELAYED name=value... the properties of the delayed message as delivered, sorted
 */
public class SqlSelect {
    public static void main(String[] a) {
        int code = 1;
        try {
            int n = (a.length - 2) / 2;
            int[] counts = new int[n];
            String[] exprs = new String[n];
            for (int j = 0; j < n; j++) {
                counts[j] = Integer.parseInt(a[2 + 2 * j]);
                exprs[j] = a[3 + 2 * j];
            }
            run(a[0], a[1], counts, exprs);
            code = 0;
        } catch (Throwable e) {
            e.printStackTrace();
            System.out.println("ERROR " + e);
        } finally {
            System.exit(code);  // the client's threads would keep the JVM alive
        }
    }

    static void run(String ns, String topic, int[] counts, String[] exprs) throws Exception {
        List<Set<String>> got = new ArrayList<>();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        for (int j = 0; j < exprs.length; j++) {
            Set<String> keys = new ConcurrentSkipListSet<>();
            got.add(keys);
            DefaultMQPushConsumer c = consumer(ns, "G" + j + "_" + topic);
            c.subscribe(topic, MessageSelector.bySql(exprs[j]));
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) keys.add(m.getKeys());
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS; });
            consumers.add(c);
        }
        Map<String, String> delayed = new ConcurrentHashMap<>();
        DefaultMQPushConsumer d = consumer(ns, "GD_" + topic);
        d.subscribe(topic + "_d", "*");
        d.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) delayed.putAll(m.getProperties());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS; });
        consumers.add(d);
        for (DefaultMQPushConsumer c : consumers) c.start();

        DefaultMQProducer p = new DefaultMQProducer("P_" + topic);
        p.setNamesrvAddr(ns); p.setVipChannelEnabled(false);
        p.setSendMsgTimeout(15000);  // a loaded 2-core machine
        p.setMqClientApiTimeout(15000);
        p.start();
        String[] tags = {"TagA", "TagB", ""};
        String[] s = {"x", "y", "z"};
        for (int i = 0; i < 42; i++) {
            Message m = new Message(topic, tags[i % 3], "k" + i, ("body" + i).getBytes());
            if (i % 5 != 4) m.putUserProperty("a", String.valueOf(i % 7));
            if (i % 4 != 3) m.putUserProperty("s", s[i % 3]);
            m.putUserProperty("n", String.valueOf(i));
            if (i == 40) m.putUserProperty("a", "five");
            if (i == 41) m.putUserProperty("a", " 3 ");
            p.send(m);
        }
        Message m = new Message(topic + "_d", "TagD", "delayed", "later".getBytes());
        m.putUserProperty("u", "1");
        m.setDelayTimeLevel(1);
        p.send(m);
        long sent = System.currentTimeMillis();
        while (System.currentTimeMillis() - sent < 150_000) {
            Thread.sleep(500);
            boolean all = !delayed.isEmpty();
            for (int j = 0; j < exprs.length; j++) all &= got.get(j).size() >= counts[j];
            if (all) break;
        }
        Thread.sleep(3000);  // anything more (a wrong delivery) shows up here
        for (int j = 0; j < exprs.length; j++) System.out.println("GOT " + j + " " + String.join(",", got.get(j)));
        StringBuilder sb = new StringBuilder("DELAYED");
        for (Map.Entry<String, String> e : new TreeMap<>(delayed).entrySet()) sb.append(" ").append(e.getKey()).append("=").append(e.getValue());
        System.out.println(sb);
        p.shutdown();
        for (DefaultMQPushConsumer c : consumers) c.shutdown();
    }

    static DefaultMQPushConsumer consumer(String ns, String group) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns); c.setVipChannelEnabled(false);
        c.setMqClientApiTimeout(15000);  // a route lookup that times out fails start()
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        return c;
    }
}
