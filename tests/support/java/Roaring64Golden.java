import java.io.BufferedReader;
import java.io.InputStreamReader;

import org.apache.paimon.mergetree.compact.aggregate.FieldRoaringBitmap64Agg;
import org.apache.paimon.types.VarBinaryType;
import org.apache.paimon.utils.RoaringBitmap64;

/**
 * Golden bytes of Paimon's rbm64 for tests/format/test_roaring64.py, one request a line on
 * stdin, one hex answer a line on stdout: "make v1 v2 ..." gives RoaringBitmap64.bitmapOf(v1,
 * v2, ...).serialize() ("make" alone: the empty bitmap); "or HEX HEX" gives
 * FieldRoaringBitmap64Agg.agg of the two.
 */
public class Roaring64Golden {
    public static void main(String[] args) throws Exception {
        FieldRoaringBitmap64Agg agg = new FieldRoaringBitmap64Agg(new VarBinaryType());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.trim().split(" ");
            byte[] answer;
            if (parts[0].equals("make")) {
                long[] values = new long[parts.length - 1];
                for (int i = 1; i < parts.length; i++) {
                    values[i - 1] = Long.parseUnsignedLong(parts[i]);
                }
                answer = RoaringBitmap64.bitmapOf(values).serialize();
            } else {
                answer = (byte[]) agg.agg(unhex(parts[1]), unhex(parts[2]));
            }
            out.append(hex(answer)).append('\n');
        }
        System.out.print(out);
    }

    private static byte[] unhex(String text) {
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    private static String hex(byte[] data) {
        StringBuilder out = new StringBuilder();
        for (byte b : data) {
            out.append(String.format("%02x", b));
        }
        return out.toString();
    }
}
