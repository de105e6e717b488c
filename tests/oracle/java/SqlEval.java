import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.HashMap;
import java.util.Map;

import org.apache.rocketmq.filter.expression.EvaluationContext;
import org.apache.rocketmq.filter.expression.Expression;
import org.apache.rocketmq.filter.parser.SelectorParser;

/**
 * Evaluates SQL92 filter expressions with the real RocketMQ filter module, for the
 * differential test of mqstore.sql92. Reads one case a line on stdin:
 * hex(UTF-8 expression) then, tab-separated, hex(name)=hex(value) per property.
 * Writes one answer a line: P (the expression does not compile), E (evaluation threw),
 * N (null), T or F (the Boolean), or X (some other value).
 */
public class SqlEval {
    private static String dec(String s) {
        return new String(HexFormat.of().parseHex(s), StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split("\t", -1);
            final Map<String, Object> props = new HashMap<>();
            for (int i = 1; i < parts.length; i++) {
                if (parts[i].isEmpty()) {
                    continue;
                }
                int eq = parts[i].indexOf('=');
                props.put(dec(parts[i].substring(0, eq)), dec(parts[i].substring(eq + 1)));
            }
            Expression e;
            try {
                e = SelectorParser.parse(dec(parts[0]));
            } catch (Throwable t) {
                out.append("P\n");
                continue;
            }
            EvaluationContext ctx = new EvaluationContext() {
                public Object get(String name) {
                    return props.get(name);
                }

                public Map<String, Object> keyValues() {
                    return props;
                }
            };
            Object r;
            try {
                r = e.evaluate(ctx);
            } catch (Throwable t) {
                out.append("E\n");
                continue;
            }
            if (r == null) {
                out.append("N\n");
            } else if (r == Boolean.TRUE) {
                out.append("T\n");
            } else if (r == Boolean.FALSE) {
                out.append("F\n");
            } else {
                out.append("X\n");
            }
        }
        System.out.print(out);
        System.out.flush();
    }
}
