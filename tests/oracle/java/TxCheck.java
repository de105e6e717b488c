import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * TxCheck NAMESRV TOPIC GROUP WAIT_MS: a TransactionMQProducer of GROUP sends four
 * transactional messages to TOPIC; its local transaction answers by the body's prefix
 * (commit-: COMMIT, rollback-: ROLLBACK, check- and checkroll-: UNKNOW), its check-back
 * answers COMMIT for check- and ROLLBACK for checkroll-. A push consumer of GROUP + "_c"
 * reads TOPIC from the first offset. It waits until both check-backs came and the
 * committed bodies were consumed, or WAIT_MS, then 2 s more for strays, and prints:
 *   sent BODY STATUS LOCAL       one line per send
 *   consumed B1,B2,...           the distinct bodies consumed, sorted
 *   checked BODY=TIMES,...       each checked body with its TRANSACTION_CHECK_TIMES values
 */
public class TxCheck {
    public static void main(String[] a) {
        try {
            run(a);
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    static void run(String[] a) throws Exception {
        String ns = a[0], topic = a[1], group = a[2];
        long waitMs = Long.parseLong(a[3]);
        Map<String, Set<String>> checked = new ConcurrentHashMap<>();
        Set<String> consumed = ConcurrentHashMap.newKeySet();
        TransactionMQProducer p = new TransactionMQProducer(group);
        p.setNamesrvAddr(ns);
        p.setSendMsgTimeout(20000);  // a cold JVM on a loaded 2-core machine
        p.setMqClientApiTimeout(15000);
        p.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message m, Object arg) {
                String b = new String(m.getBody());
                if (b.startsWith("commit-")) return LocalTransactionState.COMMIT_MESSAGE;
                if (b.startsWith("rollback-")) return LocalTransactionState.ROLLBACK_MESSAGE;
                return LocalTransactionState.UNKNOW;
            }
            public LocalTransactionState checkLocalTransaction(MessageExt m) {
                String b = new String(m.getBody());
                checked.computeIfAbsent(b, k -> ConcurrentHashMap.newKeySet())
                    .add(String.valueOf(m.getProperty("TRANSACTION_CHECK_TIMES")));
                return b.startsWith("check-") ? LocalTransactionState.COMMIT_MESSAGE
                    : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        p.start();
        // the broker checks back only a producer it heard a heartbeat from: route the topic
        // and announce the group now, not at the client's first 30 s heartbeat
        boolean routed = false;
        for (int i = 0; i < 60 && !routed; i++) {
            try {
                routed = p.getDefaultMQProducerImpl().getmQClientFactory()
                    .updateTopicRouteInfoFromNameServer(topic);
            } catch (IllegalStateException e) {
                Thread.sleep(500);
            }
        }
        p.getDefaultMQProducerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group + "_c");
        c.setNamesrvAddr(ns);
        c.setMqClientApiTimeout(15000);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) consumed.add(new String(m.getBody()));
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        for (String b : new String[] {"commit-1", "rollback-1", "check-1", "checkroll-1"}) {
            TransactionSendResult r = p.sendMessageInTransaction(new Message(topic, "tx", b.getBytes()), null);
            System.out.println("sent " + b + " " + r.getSendStatus() + " " + r.getLocalTransactionState());
        }
        c.start();
        long end = System.currentTimeMillis() + waitMs;
        while (System.currentTimeMillis() < end && !(checked.containsKey("check-1")
                && checked.containsKey("checkroll-1") && consumed.contains("check-1")
                && consumed.contains("commit-1"))) {
            Thread.sleep(200);
        }
        Thread.sleep(2000);
        System.out.println("consumed " + String.join(",", new TreeSet<>(consumed)));
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<String, Set<String>> e : new TreeMap<>(checked).entrySet()) {
            if (sb.length() > 0) sb.append(',');
            sb.append(e.getKey()).append('=').append(String.join("/", new TreeSet<>(e.getValue())));
        }
        System.out.println("checked " + sb);
        c.shutdown();
        p.shutdown();
    }
}
