import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * AdminBatch NAMESRV TOPIC GROUP N [FILE]: many mqadmin command lines in one JVM (a JVM start costs
 * seconds on a loaded machine, a command a fraction of one), with a live producer and consumer.
 *
 * First, when N > 0: producer group GROUP_P sends N messages to TOPIC (which must exist),
 * message i to queue i % 2 with key "k<i>" and tag "tag<i % 2>"; push consumer GROUP (from the
 * first offset) consumes them all and commits. Both stay online while the commands run, so the
 * connection, status and progress views have something to show.
 *
 * FILE (else stdin): mqadmin command lines, one per line, arguments separated by tabs; those before a
 * line "=start" run before the producer and consumer start (to create the topic), the rest
 * after. @MSGID@ and @OFFSETMSGID@ stand for the first message's unique and offset ids. Each line runs through
 * MQAdminStartup.main0 exactly as bin/mqadmin would; what it wrote to stdout and stderr is
 * printed between "### BEGIN n" and "### END n" (n counts from 0). The name server address
 * a previous line set with -n is cleared before each line. A command whose output names a
 * remoting timeout or send failure runs again, 2 s later (RETRIES), and a first, unprinted clusterList loads
 * the classes: on a loaded 2-core machine a JVM's first call can outlast its 3 s timeout.
 */
public class AdminBatch {
    /** A command that timed out runs again, up to this many times (a loaded machine). */
    static final int RETRIES = 4;

    public static void main(String[] a) {
        int status = 0;
        try {
            session(a);
        } catch (Throwable t) {
            t.printStackTrace();
            status = 1;
        }
        System.exit(status);  // the clients' threads would keep the JVM alive
    }

    static void session(String[] a) throws Exception {
        String ns = a[0], topic = a[1], group = a[2];
        int n = Integer.parseInt(a[3]);
        List<String> lines = new ArrayList<>();
        if (a.length > 4) {
            lines.addAll(Files.readAllLines(Paths.get(a[4]), StandardCharsets.UTF_8));
        } else {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) { lines.add(line); }
        }
        int split = lines.indexOf("=start");
        List<String> setup = split < 0 ? new ArrayList<>() : lines.subList(0, split);
        List<String> commands = split < 0 ? lines : lines.subList(split + 1, lines.size());
        admin(List.of("clusterList", "-n", ns));  // warm-up: class loading outlasts the first call's timeout
        int seq = run(setup, 0, "-", "-");
        String msgId = "-", offsetMsgId = "-";
        DefaultMQProducer p = null;
        DefaultMQPushConsumer c = null;
        if (n > 0) {
            p = new DefaultMQProducer(group + "_P");
            p.setNamesrvAddr(ns); p.setVipChannelEnabled(false); p.setInstanceName("adminbatch-p");
            p.setSendMsgTimeout(20000);  // a loaded machine
            p.start();
            MessageQueueSelector byArg = (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size());
            for (int i = 0; i < n; i++) {
                Message m = new Message(topic, "tag" + (i % 2), "k" + i, ("body-" + i).getBytes(StandardCharsets.UTF_8));
                SendResult r = p.send(m, byArg, i % 2);
                if (i == 0) { msgId = r.getMsgId(); offsetMsgId = r.getOffsetMsgId(); }
            }
            Set<String> seen = ConcurrentHashMap.newKeySet();
            c = new DefaultMQPushConsumer(group);
            c.setNamesrvAddr(ns); c.setVipChannelEnabled(false); c.setInstanceName("adminbatch-c");
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            c.setPersistConsumerOffsetInterval(200);
            c.subscribe(topic, "*");
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) { seen.add(m.getKeys()); }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            long deadline = System.currentTimeMillis() + 60000;
            while (seen.size() < n && System.currentTimeMillis() < deadline) { Thread.sleep(50); }
            // the client's first offset persist runs 10 s after its start (MQClientInstance's
            // persistAllConsumerOffset schedule), then every 200 ms: wait for it on both sides
            Thread.sleep(11000);
            System.out.println("### CONSUMED " + seen.size());
        }
        run(commands, seq, msgId, offsetMsgId);
        if (c != null) { c.shutdown(); }
        if (p != null) { p.shutdown(); }
    }

    /** Whether the output names a remoting failure of a loaded machine, worth one more try. */
    static boolean retryable(String text) {
        return text.contains("RemotingTimeoutException") || text.contains("RemotingSendRequestException")
            || text.contains("RemotingConnectException") || text.contains("RemotingTooMuchRequestException");
    }

    /** Runs one command as bin/mqadmin would; returns what it printed (stdout and stderr). */
    static String admin(List<String> args) throws Exception {
        PrintStream out = System.out, err = System.err;
        System.clearProperty(MixAll.NAMESRV_ADDR_PROPERTY);
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream cap = new PrintStream(buf, true, "UTF-8");
        System.setOut(cap);
        System.setErr(cap);
        try {
            MQAdminStartup.main0(args.toArray(new String[0]), null);
        } catch (Throwable t) {
            t.printStackTrace(cap);
        } finally {
            cap.flush();
            System.setOut(out);
            System.setErr(err);
        }
        return buf.toString("UTF-8");
    }

    /** Runs each line as one mqadmin command, numbering them from n; returns the next number. */
    static int run(List<String> lines, int n, String msgId, String offsetMsgId) throws Exception {
        PrintStream out = System.out;
        for (String line : lines) {
            List<String> args = new ArrayList<>();
            for (String f : line.split("\t")) {
                if (!f.isEmpty()) { args.add(f.replace("@MSGID@", msgId).replace("@OFFSETMSGID@", offsetMsgId)); }
            }
            String text = admin(args);
            for (int retry = 0; retry < RETRIES && retryable(text); retry++) {
                Thread.sleep(2000);
                text = admin(args);
            }
            out.println("### BEGIN " + n);
            out.print(text.isEmpty() || text.endsWith("\n") ? text : text + "\n");
            out.println("### END " + n);
            out.flush();
            n++;
        }
        return n;
    }
}
