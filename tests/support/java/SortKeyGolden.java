import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.sort.hilbert.HilbertIndexer;
import org.apache.paimon.sort.zorder.ZIndexer;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypes;
import org.apache.paimon.types.DecimalType;
import org.apache.paimon.types.RowType;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Golden sort keys from Apache Paimon's own ZIndexer and HilbertIndexer (test oracle for
 * paimond.format.binary.sort_keys). One request a line on stdin:
 * {@code zorder|hilbert <TAB> varTypeSize <TAB> TYPE,TYPE,... <TAB> value <TAB> value ...}
 * with types INT BIGINT TINYINT SMALLINT FLOAT DOUBLE BOOLEAN STRING BYTES DATE TIMESTAMP
 * DECIMAL(p;s), values as text ("\N" for null, BYTES as hex); prints the key as hex.
 */
public class SortKeyGolden {
    public static void main(String[] args) throws Exception {
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split("\t", -1);
            String[] typeNames = parts[2].split(",");
            List<DataType> types = new ArrayList<>();
            List<String> names = new ArrayList<>();
            Object[] values = new Object[typeNames.length];
            for (int i = 0; i < typeNames.length; i++) {
                DataType type = type(typeNames[i]);
                types.add(type);
                names.add("c" + i);
                values[i] = value(type, typeNames[i], parts[3 + i]);
            }
            RowType rowType = RowType.of(types.toArray(new DataType[0]),
                    names.toArray(new String[0]));
            GenericRow row = GenericRow.of(values);
            byte[] key;
            if (parts[0].equals("zorder")) {
                ZIndexer indexer = new ZIndexer(rowType, names, Integer.parseInt(parts[1]));
                indexer.open();
                key = indexer.index(row);
            } else {
                HilbertIndexer indexer = new HilbertIndexer(rowType, names);
                indexer.open();
                key = indexer.index(row);
            }
            StringBuilder hex = new StringBuilder();
            for (byte b : key) {
                hex.append(String.format("%02x", b));
            }
            System.out.println(hex);
        }
    }

    static DataType type(String name) {
        if (name.startsWith("DECIMAL(")) {
            String[] ps = name.substring(8, name.length() - 1).split(";");
            return DataTypes.DECIMAL(Integer.parseInt(ps[0]), Integer.parseInt(ps[1]));
        }
        switch (name) {
            case "INT": return DataTypes.INT();
            case "BIGINT": return DataTypes.BIGINT();
            case "TINYINT": return DataTypes.TINYINT();
            case "SMALLINT": return DataTypes.SMALLINT();
            case "FLOAT": return DataTypes.FLOAT();
            case "DOUBLE": return DataTypes.DOUBLE();
            case "BOOLEAN": return DataTypes.BOOLEAN();
            case "STRING": return DataTypes.STRING();
            case "BYTES": return DataTypes.BYTES();
            case "DATE": return DataTypes.DATE();
            case "TIMESTAMP": return DataTypes.TIMESTAMP(3);
            default: throw new IllegalArgumentException(name);
        }
    }

    static Object value(DataType type, String name, String text) {
        if (text.equals("\\N")) {
            return null;
        }
        if (type instanceof DecimalType) {
            DecimalType d = (DecimalType) type;
            return Decimal.fromBigDecimal(new BigDecimal(text), d.getPrecision(), d.getScale());
        }
        switch (name) {
            case "INT": case "DATE": return Integer.parseInt(text);
            case "BIGINT": return Long.parseLong(text);
            case "TINYINT": return Byte.parseByte(text);
            case "SMALLINT": return Short.parseShort(text);
            case "FLOAT": return Float.parseFloat(text);
            case "DOUBLE": return Double.parseDouble(text);
            case "BOOLEAN": return Boolean.parseBoolean(text);
            case "STRING": return BinaryString.fromString(text);
            case "BYTES": {
                byte[] out = new byte[text.length() / 2];
                for (int i = 0; i < out.length; i++) {
                    out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
                }
                return out;
            }
            case "TIMESTAMP": return Timestamp.fromEpochMillis(Long.parseLong(text));
            default: throw new IllegalArgumentException(name);
        }
    }
}
