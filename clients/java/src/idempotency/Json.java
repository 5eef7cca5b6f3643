package idempotency;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small strict JSON reader (RFC 8259) and string escaper: the JDK has
 * none.  Objects become LinkedHashMap (a repeated name: the last wins, as in
 * jsonb), arrays ArrayList, numbers BigDecimal, plus String, Boolean and
 * JSON null as {@link #NULL}.
 */
public final class Json {
    public static final Object NULL = new Object() {
        @Override
        public String toString() { return "null"; }
    };

    public static final class SyntaxError extends Exception {
        SyntaxError(String message) { super(message); }
    }

    private final String s;
    private int i;
    private int depth;

    private Json(String s) { this.s = s; }

    public static Object parse(String text) throws SyntaxError {
        Json p = new Json(text);
        p.ws();
        Object v = p.value();
        p.ws();
        if (p.i != text.length())
            throw new SyntaxError("trailing characters");
        return v;
    }

    private void ws() {
        while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0)
            i++;
    }

    private Object value() throws SyntaxError {
        if (i >= s.length())
            throw new SyntaxError("unexpected end");
        char ch = s.charAt(i);
        if (ch == '{' || ch == '[') {
            if (++depth > 64)
                throw new SyntaxError("nested too deeply");
            Object v = ch == '{' ? object() : array();
            depth--;
            return v;
        }
        if (ch == '"')
            return string();
        if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
        if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
        if (s.startsWith("null", i)) { i += 4; return NULL; }
        return number();
    }

    private Map<String, Object> object() throws SyntaxError {
        Map<String, Object> m = new LinkedHashMap<>();
        i++;
        ws();
        if (i < s.length() && s.charAt(i) == '}') { i++; return m; }
        for (;;) {
            ws();
            if (i >= s.length() || s.charAt(i) != '"')
                throw new SyntaxError("name expected");
            String name = string();
            ws();
            expect(':');
            ws();
            m.put(name, value());
            ws();
            if (i < s.length() && s.charAt(i) == ',') { i++; continue; }
            expect('}');
            return m;
        }
    }

    private List<Object> array() throws SyntaxError {
        List<Object> a = new ArrayList<>();
        i++;
        ws();
        if (i < s.length() && s.charAt(i) == ']') { i++; return a; }
        for (;;) {
            ws();
            a.add(value());
            ws();
            if (i < s.length() && s.charAt(i) == ',') { i++; continue; }
            expect(']');
            return a;
        }
    }

    private void expect(char ch) throws SyntaxError {
        if (i >= s.length() || s.charAt(i) != ch)
            throw new SyntaxError("'" + ch + "' expected");
        i++;
    }

    private String string() throws SyntaxError {
        StringBuilder b = new StringBuilder();
        i++; // the opening quote
        for (;;) {
            if (i >= s.length())
                throw new SyntaxError("unterminated string");
            char ch = s.charAt(i++);
            if (ch == '"')
                return b.toString();
            if (ch < 0x20)
                throw new SyntaxError("control character in string");
            if (ch != '\\') { b.append(ch); continue; }
            if (i >= s.length())
                throw new SyntaxError("unterminated escape");
            char e = s.charAt(i++);
            switch (e) {
                case '"', '\\', '/' -> b.append(e);
                case 'b' -> b.append('\b');
                case 'f' -> b.append('\f');
                case 'n' -> b.append('\n');
                case 'r' -> b.append('\r');
                case 't' -> b.append('\t');
                case 'u' -> {
                    if (i + 4 > s.length())
                        throw new SyntaxError("bad \\u escape");
                    try {
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                    } catch (NumberFormatException x) {
                        throw new SyntaxError("bad \\u escape");
                    }
                    i += 4;
                }
                default -> throw new SyntaxError("bad escape");
            }
        }
    }

    private BigDecimal number() throws SyntaxError {
        int start = i;
        if (i < s.length() && s.charAt(i) == '-') i++;
        if (i < s.length() && s.charAt(i) == '0') i++;
        else if (!digits()) throw new SyntaxError("value expected");
        if (i < s.length() && s.charAt(i) == '.') { i++; if (!digits()) throw new SyntaxError("digit expected"); }
        if (i < s.length() && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
            i++;
            if (i < s.length() && (s.charAt(i) == '+' || s.charAt(i) == '-')) i++;
            if (!digits()) throw new SyntaxError("digit expected");
        }
        try {
            return new BigDecimal(s.substring(start, i));
        } catch (NumberFormatException x) { // exponent out of range
            throw new SyntaxError("number out of range");
        }
    }

    private boolean digits() {
        int start = i;
        while (i < s.length() && Character.isDigit(s.charAt(i)) && s.charAt(i) < 128)
            i++;
        return i > start;
    }

    /** s as a JSON string literal. */
    public static String quote(String v) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : v.toCharArray()) {
            switch (ch) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
                    else b.append(ch);
                }
            }
        }
        return b.append('"').toString();
    }
}
