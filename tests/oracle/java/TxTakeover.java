import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * TxTakeover NAMESRV TOPIC GROUP WAIT_MS: sends nothing; a TransactionMQProducer of GROUP
 * answers check-backs (COMMIT for the body "open-commit", ROLLBACK for any other) and a
 * push consumer reads TOPIC from the first offset, until "open-commit" was consumed and
 * two bodies were checked, or WAIT_MS; then 2 s more for strays. Prints
 *   consumed B1,B2,...   checked B1,B2,...   (distinct, sorted)
 */
public class TxTakeover {
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
        Set<String> consumed = ConcurrentHashMap.newKeySet(), checked = ConcurrentHashMap.newKeySet();
        TransactionMQProducer p = new TransactionMQProducer(group);
        p.setNamesrvAddr(ns);
        p.setMqClientApiTimeout(15000);
        p.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message m, Object arg) {
                return LocalTransactionState.UNKNOW;
            }
            public LocalTransactionState checkLocalTransaction(MessageExt m) {
                String b = new String(m.getBody());
                checked.add(b);
                return b.equals("open-commit") ? LocalTransactionState.COMMIT_MESSAGE
                    : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        p.start();
        boolean routed = false;  // heartbeat to the broker now (see TxCheck.java)
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
        c.start();
        long end = System.currentTimeMillis() + waitMs;
        while (System.currentTimeMillis() < end && !(consumed.contains("open-commit") && checked.size() >= 2)) {
            Thread.sleep(200);
        }
        Thread.sleep(2000);
        System.out.println("consumed " + String.join(",", new TreeSet<>(consumed)));
        System.out.println("checked " + String.join(",", new TreeSet<>(checked)));
        c.shutdown();
        p.shutdown();
    }
}
