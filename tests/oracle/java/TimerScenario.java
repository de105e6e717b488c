import java.util.*;
import java.util.concurrent.*;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.*;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.*;

/**
 * Timer messages with the RocketMQ 5.3.3 Java client: setDeliverTimeMs, setDelayTimeSec,
 * setDelayTimeMs, __STARTDELIVERTIME, a past delivery time, a 4.x delay level, and one beyond
 * the 3-day maximum. Args: NAMESRV TOPIC. Prints SENT/REFUSED per message, then one GOT line
 * per delivery (key, due ms, arrival ms, the TIMER_* / REAL_* properties), then DONE.
 */
public class TimerScenario {
    static final String[] PROPS = {"TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS",
        "TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "REAL_TOPIC",
        "REAL_QID", "__STARTDELIVERTIME", "DELAY"};

    public static void main(String[] a) {
        int code = 1;
        try {
            run(a[0], a[1]);
            code = 0;
        } catch (Throwable e) {
            System.out.println("ERROR " + e);
        } finally {
            System.exit(code);  // the client's threads would keep the JVM alive
        }
    }

    static void run(String ns, String topic) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("P_" + topic);
        p.setNamesrvAddr(ns); p.setVipChannelEnabled(false); p.setRetryTimesWhenSendFailed(0);
        p.setSendMsgTimeout(15000);  // a loaded 2-core machine
        p.setMqClientApiTimeout(15000);
        p.start();
        Map<String, Long> due = new ConcurrentHashMap<>();
        CountDownLatch all = new CountDownLatch(6);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("G_" + topic);
        c.setNamesrvAddr(ns); c.setVipChannelEnabled(false);
        c.setMqClientApiTimeout(15000);  // a route lookup that times out fails start()
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET); c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                long now = System.currentTimeMillis();
                StringBuilder sb = new StringBuilder("GOT " + m.getKeys() + " " + due.getOrDefault(m.getKeys(), -1L) + " " + now);
                for (String k : PROPS) sb.append(" ").append(k).append("=").append(m.getProperty(k));
                System.out.println(sb);
                all.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS; });
        c.start();
        Thread.sleep(3000);
        long now = System.currentTimeMillis();
        send(p, due, msg(topic, "deliver2500"), now + 2500, m -> m.setDeliverTimeMs(now + 2500));
        send(p, due, msg(topic, "delaysec2"), System.currentTimeMillis() + 2000, m -> m.setDelayTimeSec(2));
        send(p, due, msg(topic, "delayms1500"), System.currentTimeMillis() + 1500, m -> m.setDelayTimeMs(1500));
        send(p, due, msg(topic, "start2000"), now + 2000,
             m -> m.putUserProperty("__STARTDELIVERTIME", String.valueOf(now + 2000)));
        send(p, due, msg(topic, "past"), now - 5000, m -> m.setDeliverTimeMs(now - 5000));
        send(p, due, msg(topic, "level1"), System.currentTimeMillis() + 1000, m -> m.setDelayTimeLevel(1));
        send(p, due, msg(topic, "toofar"), now + 3L * 86400_000 + 60_000,
             m -> m.setDeliverTimeMs(now + 3L * 86400_000 + 60_000));
        all.await(60, TimeUnit.SECONDS);
        Thread.sleep(1500);  // anything delivered twice would show up here
        System.out.println("DONE");
    }

    static Message msg(String topic, String key) {
        Message m = new Message(topic, "timer", key, key.getBytes());
        return m;
    }

    interface Setter { void set(Message m); }

    static void send(DefaultMQProducer p, Map<String, Long> due, Message m, long dueMs, Setter s) throws Exception {
        s.set(m);
        due.put(m.getKeys(), dueMs);
        try {
            SendResult r = p.send(m);
            System.out.println("SENT " + m.getKeys() + " " + r.getSendStatus());
        } catch (MQBrokerException e) {
            System.out.println("REFUSED " + m.getKeys() + " " + e.getResponseCode() + " " + e.getErrorMessage());
        }
    }
}
