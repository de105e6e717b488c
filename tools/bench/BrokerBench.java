import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * BrokerBench NAMESRV: the RocketMQ 4.x Java client's sync sends and pulls, timed, driven by
 * commands on stdin (one per line, each answered by one line on stdout) so that one warm JVM
 * measures several brokers in turn (``mqstore bench java``):
 *   send TOPIC THREADS SECONDS SIZE  THREADS threads share one DefaultMQProducer and send
 *                                    SIZE-byte bodies synchronously for SECONDS
 *                                    -> "sent OK FAILED NANOS" (FAILED: not SEND_OK, or
 *                                    refused by the broker, e.g. its flow control)
 *   pull TOPIC THREADS SECONDS       THREADS threads share one DefaultMQPullConsumer; thread i
 *                                    reads the topic's queues i, i+THREADS, ... from offset 0 to
 *                                    the max offset (asked first), 32 per pull, again from 0
 *                                    when done, for SECONDS -> "pulled MESSAGES PULLS NANOS"
 *   quit
 * A command that fails answers "error MESSAGE".
 * Both clients are started before the first command; the VIP channel is off (the brokers
 * serve one port).
 */
public class BrokerBench {
    interface Work { long[] run(int thread, long deadline) throws Exception; }

    static long[] together(int threads, long seconds_ns, Work work) throws Exception {
        List<Thread> pool = new ArrayList<>();
        long[][] out = new long[threads][];
        Exception[] failed = new Exception[1];
        long start = System.nanoTime();
        long deadline = start + seconds_ns;
        for (int i = 0; i < threads; i++) {
            final int t = i;
            Thread th = new Thread(() -> {
                try { out[t] = work.run(t, deadline); }
                catch (Exception e) { failed[0] = e; out[t] = new long[] {0, 0}; }
            });
            pool.add(th);
            th.start();
        }
        for (Thread th : pool) th.join();
        if (failed[0] != null) throw failed[0];
        long a = 0, b = 0;
        for (long[] r : out) { a += r[0]; b += r[1]; }
        return new long[] {a, b, System.nanoTime() - start};
    }

    public static void main(String[] args) throws Exception {
        String ns = args[0];
        DefaultMQProducer producer = new DefaultMQProducer("bench_producer");
        producer.setNamesrvAddr(ns);
        producer.setVipChannelEnabled(false);
        producer.setSendMsgTimeout(10000);  // a cold JVM on a loaded machine can miss 3 s
        producer.start();
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer("bench_puller");
        consumer.setNamesrvAddr(ns);
        consumer.setVipChannelEnabled(false);
        consumer.start();
        System.out.println("ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split(" ");
            if (w[0].equals("quit")) break;
            try {
                command(w, producer, consumer);
            } catch (Exception e) {
                System.out.println("error " + e.toString().replace('\n', ' '));
            }
        }
        producer.shutdown();
        consumer.shutdown();
        System.exit(0);
    }

    static void command(String[] w, DefaultMQProducer producer, DefaultMQPullConsumer consumer)
            throws Exception {
        {
            String topic = w[1];
            int threads = Integer.parseInt(w[2]);
            long ns_ = (long) (Double.parseDouble(w[3]) * 1e9);
            if (w[0].equals("send")) {
                byte[] body = new byte[Integer.parseInt(w[4])];
                java.util.Arrays.fill(body, (byte) 'x');
                long[] r = together(threads, ns_, (t, deadline) -> {
                    long ok = 0, bad = 0;
                    while (System.nanoTime() < deadline) {
                        try {
                            SendResult res = producer.send(new Message(topic, "TagA", body));
                            if (res.getSendStatus() == SendStatus.SEND_OK) ok++; else bad++;
                        } catch (MQBrokerException e) {  // e.g. the 4.x broker's flow control
                            bad++;
                        }
                    }
                    return new long[] {ok, bad};
                });
                System.out.println("sent " + r[0] + " " + r[1] + " " + r[2]);
            } else if (w[0].equals("pull")) {
                List<MessageQueue> mqs = new ArrayList<>(consumer.fetchSubscribeMessageQueues(topic));
                long[] max = new long[mqs.size()];
                for (int i = 0; i < max.length; i++) max[i] = consumer.maxOffset(mqs.get(i));
                long[] r = together(threads, ns_, (t, deadline) -> {
                    long got = 0, pulls = 0;
                    while (System.nanoTime() < deadline) {
                        for (int q = t; q < mqs.size() && System.nanoTime() < deadline; q += threads) {
                            long off = 0;
                            while (off < max[q] && System.nanoTime() < deadline) {
                                PullResult res = consumer.pull(mqs.get(q), "*", off, 32);
                                pulls++;
                                if (res.getPullStatus() != PullStatus.FOUND) break;
                                got += res.getMsgFoundList().size();
                                off = res.getNextBeginOffset();
                            }
                        }
                    }
                    return new long[] {got, pulls};
                });
                System.out.println("pulled " + r[0] + " " + r[1] + " " + r[2]);
            } else {
                System.out.println("error unknown command " + w[0]);
            }
        }
    }
}
