import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Group NAMESRV TOPIC GROUP CONSUMERS: a producer and CONSUMERS push consumers of GROUP (each its
 * own client instance, as separate processes would be; consuming from the first offset), driven
 * by commands on stdin, one per line, each answered by one line on stdout:
 *   warm        send one body to TOPIC + "_warm" and consume it with a consumer of GROUP + "_warm",
 *               then stop that consumer (loads the client's classes, so the timings that
 *               follow are not a cold JVM's)                 -> "warmed"
 *   start       start the consumers                          -> "started"
 *   send N      N sync sends of bodies "m-<seq>"             -> "sent ACKED FAILED" (totals)
 *   wait N MS   until N distinct bodies consumed, or MS ms   -> "got DISTINCT DELIVERIES FIRST_MS"
 *               (FIRST_MS: from the first send to the first consumption, -1 if none yet)
 *   quit        stop everything                              -> "summary ACKED DISTINCT REDELIVERED LOST STORED_TWICE"
 *               (REDELIVERED: deliveries of a stored message (broker, queue, queue offset)
 *               beyond its first; LOST: acked bodies never consumed; STORED_TWICE: bodies
 *               consumed from more than one stored message, a producer retry of a send
 *               whose answer the kill of a broker cut off)
 * A message counts as consumed when a listener returns CONSUME_SUCCESS for it.
 */
public class Group {
    static final Map<String, AtomicInteger> deliveries = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> stored = new ConcurrentHashMap<>();
    static final Map<String, Set<String>> copies = new ConcurrentHashMap<>();
    static final Set<String> acked = ConcurrentHashMap.newKeySet();
    static final AtomicLong firstSend = new AtomicLong(0), firstConsume = new AtomicLong(0);
    static final AtomicInteger total = new AtomicInteger();

    static void warm(DefaultMQProducer p, String ns, String topic, String group) throws Exception {
        Set<String> got = ConcurrentHashMap.newKeySet();
        for (int tries = 0; ; tries++) {  // a cold JVM on a loaded machine can miss 3 s timeouts
            try { p.send(new Message(topic, "T", "warm".getBytes())); break; }
            catch (Exception e) { if (tries == 10) throw e; Thread.sleep(500); }
        }
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns); c.setVipChannelEnabled(false); c.setInstanceName("w-" + group);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            got.add("warm");
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        for (long until = System.currentTimeMillis() + 60000; got.isEmpty() && System.currentTimeMillis() < until; ) Thread.sleep(10);
        c.shutdown();
    }

    static DefaultMQPushConsumer consumer(String ns, String topic, String group, int i) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns); c.setVipChannelEnabled(false); c.setInstanceName("c" + i + "-" + group);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                firstConsume.compareAndSet(0, System.nanoTime());  // before the body is counted
                String body = new String(m.getBody());
                String where = m.getBrokerName() + "/" + m.getQueueId() + "/" + m.getQueueOffset();
                deliveries.computeIfAbsent(body, k -> new AtomicInteger()).incrementAndGet();
                stored.computeIfAbsent(where, k -> new AtomicInteger()).incrementAndGet();
                copies.computeIfAbsent(body, k -> ConcurrentHashMap.newKeySet()).add(where);
                total.incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        return c;
    }

    public static void main(String[] a) throws Exception {
        String ns = a[0], topic = a[1], group = a[2]; int n = Integer.parseInt(a[3]);
        DefaultMQProducer p = new DefaultMQProducer(group + "_P");
        p.setNamesrvAddr(ns); p.setVipChannelEnabled(false); p.setInstanceName("p-" + group);
        p.setSendMsgTimeout(15000); p.start();
        List<DefaultMQPushConsumer> cs = new ArrayList<>();
        System.out.println("ready"); System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        int seq = 0, failed = 0;
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("warm")) {
                warm(p, ns, topic + "_warm", group + "_warm");
                System.out.println("warmed");
            } else if (w[0].equals("start")) {
                for (int i = 0; i < n; i++) cs.add(consumer(ns, topic, group, i));
                System.out.println("started");
            } else if (w[0].equals("send")) {
                for (int k = Integer.parseInt(w[1]); k > 0; k--) {
                    String body = "m-" + (seq++);
                    firstSend.compareAndSet(0, System.nanoTime());
                    try {
                        SendResult r = p.send(new Message(topic, "T", body.getBytes()));
                        if (r.getSendStatus() == SendStatus.SEND_OK) acked.add(body); else failed++;
                    } catch (Exception e) { failed++; }
                }
                System.out.println("sent " + acked.size() + " " + failed);
            } else if (w[0].equals("wait")) {
                int want = Integer.parseInt(w[1]); long until = System.currentTimeMillis() + Long.parseLong(w[2]);
                while (deliveries.size() < want && System.currentTimeMillis() < until) Thread.sleep(5);
                long f = firstConsume.get(), s = firstSend.get();
                System.out.println("got " + deliveries.size() + " " + total.get() + " " + (f == 0 ? -1 : (f - s) / 1000000));
            } else if (w[0].equals("quit")) {
                break;
            }
            System.out.flush();
        }
        for (DefaultMQPushConsumer c : cs) c.shutdown();
        p.shutdown();
        int redelivered = 0, lost = 0, twice = 0;
        for (AtomicInteger d : stored.values()) redelivered += d.get() - 1;
        for (String b : acked) if (!deliveries.containsKey(b)) lost++;
        for (Set<String> c : copies.values()) if (c.size() > 1) twice++;
        System.out.println("summary " + acked.size() + " " + deliveries.size() + " " + redelivered + " " + lost + " " + twice);
        System.out.flush();
        System.exit(0);
    }
}
