package stateglass.dynamo;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.StateSchemaProvider;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.types.StructType;
import scala.Option;

/**
 * A state store kept in two DynamoDB tables (the published DynamoDB state store design, on
 * Spark 4.3's API; docs/formats.md "DynamoDB state store" names every item and setting).
 *
 * <p>The in-memory map holds each live key's last version; a value is read from the state
 * table's {@code StateKey_QueryVersion} item when asked for. Changes queue up and are flushed
 * in BatchWriteItem requests of 25; commit flushes the rest, writes the version's manifest and,
 * at the last version of a snapshot group, the snapshot table.
 */
public final class DynamoStateStoreProvider implements StateStoreProvider {
  static final String PREFIX = "spark.sql.streaming.stateStore.dynamodb.";
  static final int BATCH = 25;

  private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
  private boolean unloaded;
  StateStoreId id;
  StructType keySchema;
  StructType valueSchema;
  DynamoClient client;
  String stateTable;
  String snapshotTable;
  String storePrefix;
  int groupSize;
  int buckets;
  // The newest committed version this instance holds, its keys' last versions, and each
  // key's changes in the current snapshot group (deletions as negative versions).
  long loadedVersion = -1;
  HashMap<Key, Long> last = new HashMap<>();
  HashMap<Key, List<Long>> history = new HashMap<>();

  @Override
  public void init(StateStoreId stateStoreId, StructType keySchema, StructType valueSchema,
      KeyStateEncoderSpec keyStateEncoderSpec, boolean useColumnFamilies,
      StateStoreConf storeConfs, Configuration hadoopConf, boolean useMultipleValuesPerKey,
      Option<StateSchemaProvider> stateSchemaProvider) {
    if (useColumnFamilies || useMultipleValuesPerKey) {
      throw new UnsupportedOperationException("the DynamoDB store has the default column family only");
    }
    this.id = stateStoreId;
    this.keySchema = keySchema;
    this.valueSchema = valueSchema;
    scala.collection.immutable.Map<String, String> confs = storeConfs.sqlConfs();
    String prefix = confs.getOrElse(PREFIX + "tablePrefix", () -> "spark_state");
    this.groupSize = Integer.parseInt(confs.getOrElse(PREFIX + "snapshotGroupSize", () -> "10"));
    this.buckets = Integer.parseInt(confs.getOrElse(PREFIX + "snapshotBuckets", () -> "4"));
    String region = confs.getOrElse(PREFIX + "region", () -> firstOf(
        System.getenv("AWS_REGION"), System.getenv("AWS_DEFAULT_REGION"), "us-east-1"));
    String endpoint = confs.getOrElse(PREFIX + "endpoint", () -> firstOf(
        System.getenv("AWS_ENDPOINT_URL"), System.getProperty("aws.endpointUrl"), ""));
    this.stateTable = prefix + "_state";
    this.snapshotTable = prefix + "_snapshot";
    this.storePrefix = stateStoreId.operatorId() + "#" + stateStoreId.partitionId() + "#"
        + stateStoreId.storeName() + "#";
    this.client = new DynamoClient(endpoint, region);
    if (Boolean.parseBoolean(confs.getOrElse(PREFIX + "createTables", () -> "true"))) {
      Tables.create(client, stateTable, snapshotTable);
    }
    writeMarker(hadoopConf, prefix, region);
  }

  private static String firstOf(String... values) {
    for (String v : values) {
      if (v != null && !v.isEmpty()) {
        return v;
      }
    }
    return "";
  }

  /** The store directory's {@code _dynamodb.json}: where this store's state lives, so a reader
   * of the checkpoint can find the tables (no endpoint, no credentials). */
  private void writeMarker(Configuration hadoopConf, String prefix, String region) {
    Path dir = id.storeCheckpointLocation();
    Path marker = new Path(dir, "_dynamodb.json");
    ObjectNode body = DynamoClient.JSON.createObjectNode();
    body.put("provider", getClass().getName());
    body.put("tablePrefix", prefix);
    body.put("snapshotGroupSize", groupSize);
    body.put("snapshotBuckets", buckets);
    body.put("storePrefix", storePrefix);
    body.put("region", region);
    try {
      FileSystem fs = dir.getFileSystem(hadoopConf);
      if (fs.exists(marker)) {
        return;
      }
      fs.mkdirs(dir);
      Path tmp = new Path(dir, "._dynamodb.json." + java.util.UUID.randomUUID() + ".tmp");
      try (FSDataOutputStream out = fs.create(tmp, false)) {
        out.write(DynamoClient.JSON.writeValueAsBytes(body));
      }
      if (!fs.rename(tmp, marker)) {
        fs.delete(tmp, false);
      }
    } catch (IOException e) {
      throw new IllegalStateException("cannot write " + marker + ": " + e, e);
    }
  }

  @Override
  public StateStoreId stateStoreId() {
    return id;
  }

  @Override
  public void close() {}

  @Override
  public boolean unloaded() {
    return unloaded;
  }

  @Override
  public void unloaded_$eq(boolean value) {
    unloaded = value;
  }

  @Override
  public ReentrantReadWriteLock maintenanceLock() {
    return lock;
  }

  @Override
  public void org$apache$spark$sql$execution$streaming$state$StateStoreProvider$_setter_$maintenanceLock_$eq(
      ReentrantReadWriteLock value) {}

  @Override
  public synchronized StateStore getStore(long version, Option<String> uniqueId, boolean readOnly,
      boolean forceSnapshotOnCommit) {
    if (version < 0) {
      throw new IllegalArgumentException("version cannot be less than 0");
    }
    if (version != loadedVersion) {
      recover(version);
    }
    return new DynamoStateStore(this, version);
  }

  // ---- keys and items -------------------------------------------------------------------

  String stateKey(Key key) {
    return storePrefix + Base64.getEncoder().encodeToString(key.bytes);
  }

  int bucket(Key key) {
    return Math.floorMod(java.util.Arrays.hashCode(key.bytes), buckets);
  }

  static ObjectNode s(String value) {
    ObjectNode n = DynamoClient.JSON.createObjectNode();
    n.put("S", value);
    return n;
  }

  static ObjectNode n(long value) {
    ObjectNode n = DynamoClient.JSON.createObjectNode();
    n.put("N", Long.toString(value));
    return n;
  }

  /** One change in the HDFS provider's record layout, GZIP-compressed. */
  static byte[] record(byte[] key, byte[] value) {
    try {
      ByteArrayOutputStream buf = new ByteArrayOutputStream();
      try (DataOutputStream out = new DataOutputStream(new GZIPOutputStream(buf))) {
        out.writeInt(key.length);
        out.write(key);
        if (value == null) {
          out.writeInt(-1);
        } else {
          out.writeInt(value.length);
          out.write(value);
        }
      }
      return buf.toByteArray();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The value of a record written by {@link #record}; null for a removal. */
  static byte[] recordValue(byte[] data) {
    try (DataInputStream in = new DataInputStream(new GZIPInputStream(new ByteArrayInputStream(data)))) {
      in.skipNBytes(in.readInt());
      int size = in.readInt();
      return size < 0 ? null : in.readNBytes(size);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Values of ``wanted`` (state-table keys) by BatchGetItem, 100 keys a request. */
  Map<String, byte[]> fetch(List<String> wanted) {
    Map<String, byte[]> out = new HashMap<>();
    for (int i = 0; i < wanted.size(); i += 100) {
      ArrayNode keys = DynamoClient.JSON.createArrayNode();
      for (String k : wanted.subList(i, Math.min(wanted.size(), i + 100))) {
        keys.addObject().set("StateKey_QueryVersion", s(k));
      }
      ObjectNode body = DynamoClient.JSON.createObjectNode();
      body.putObject("RequestItems").putObject(stateTable).set("Keys", keys);
      while (true) {
        JsonNode answer = client.call("BatchGetItem", body);
        for (JsonNode item : answer.path("Responses").path(stateTable)) {
          out.put(item.path("StateKey_QueryVersion").path("S").asText(),
              Base64.getDecoder().decode(item.path("State").path("B").asText()));
        }
        JsonNode rest = answer.path("UnprocessedKeys");
        if (rest.size() == 0) {
          break;
        }
        body = DynamoClient.JSON.createObjectNode();
        body.set("RequestItems", rest);
      }
    }
    return out;
  }

  /** The value of ``key`` as of its last version ``version``. */
  byte[] valueAt(Key key, long version) {
    String pk = stateKey(key) + "_" + version;
    ObjectNode body = DynamoClient.JSON.createObjectNode();
    body.put("TableName", stateTable);
    body.putObject("Key").set("StateKey_QueryVersion", s(pk));
    body.put("ConsistentRead", true);
    JsonNode item = client.call("GetItem", body).path("Item");
    if (item.isMissingNode()) {
      throw new IllegalStateException("state item " + pk + " is missing from " + stateTable);
    }
    return recordValue(Base64.getDecoder().decode(item.path("State").path("B").asText()));
  }

  /** Sends ``requests`` (PutRequest/DeleteRequest nodes) to ``table`` until all are done. */
  void write(String table, List<ObjectNode> requests) {
    for (int i = 0; i < requests.size(); i += BATCH) {
      ArrayNode batch = DynamoClient.JSON.createArrayNode();
      batch.addAll(requests.subList(i, Math.min(requests.size(), i + BATCH)));
      ObjectNode body = DynamoClient.JSON.createObjectNode();
      body.putObject("RequestItems").set(table, batch);
      while (true) {
        JsonNode rest = client.call("BatchWriteItem", body).path("UnprocessedItems");
        if (rest.size() == 0) {
          break;
        }
        body = DynamoClient.JSON.createObjectNode();
        body.set("RequestItems", rest);
      }
    }
  }

  // ---- recovery ---------------------------------------------------------------------------

  /** Rebuild the map of ``version``: the newest snapshot group at or below it, then the
   * manifests of the versions after it. */
  void recover(long version) {
    HashMap<Key, Long> map = new HashMap<>();
    HashMap<Key, List<Long>> hist = new HashMap<>();
    long group = version / groupSize;
    long from = group * groupSize;
    if (group > 0) {
      for (int b = 0; b < buckets; b++) {
        for (JsonNode item : querySnapshot(storePrefix + "G" + group + "_" + b)) {
          if (item.has("DeleteVersion")) {
            continue;
          }
          String sk = item.path("StateKey").path("S").asText();
          Key key = new Key(Base64.getDecoder().decode(sk.substring(storePrefix.length())));
          long lastVersion = 0;
          for (JsonNode v : item.path("DeltaVersions").path("L")) {
            lastVersion = Math.max(lastVersion, v.path("N").asLong());
          }
          map.put(key, lastVersion);
        }
      }
    }
    for (long v = from + 1; v <= version; v++) {
      JsonNode manifest = manifest(v);
      if (manifest == null) {
        throw new IllegalStateException("version " + v + " of " + storePrefix + " is not in " + stateTable);
      }
      for (JsonNode k : manifest.path("Puts").path("L")) {
        Key key = new Key(Base64.getDecoder().decode(k.path("S").asText()));
        map.put(key, v);
        hist.computeIfAbsent(key, x -> new ArrayList<>()).add(v);
      }
      for (JsonNode k : manifest.path("Removes").path("L")) {
        Key key = new Key(Base64.getDecoder().decode(k.path("S").asText()));
        map.remove(key);
        hist.computeIfAbsent(key, x -> new ArrayList<>()).add(-v);
      }
    }
    last = map;
    history = hist;
    loadedVersion = version;
  }

  JsonNode manifest(long version) {
    ObjectNode body = DynamoClient.JSON.createObjectNode();
    body.put("TableName", stateTable);
    body.putObject("Key").set("StateKey_QueryVersion", s(storePrefix + "@" + version));
    body.put("ConsistentRead", true);
    JsonNode item = client.call("GetItem", body).path("Item");
    return item.isMissingNode() ? null : item;
  }

  List<JsonNode> querySnapshot(String partitionKey) {
    List<JsonNode> out = new ArrayList<>();
    JsonNode start = null;
    do {
      ObjectNode body = DynamoClient.JSON.createObjectNode();
      body.put("TableName", snapshotTable);
      body.put("KeyConditionExpression", "#p = :p");
      body.putObject("ExpressionAttributeNames").put("#p", "SnapshotGroup_Partition");
      body.putObject("ExpressionAttributeValues").set(":p", s(partitionKey));
      body.put("ConsistentRead", true);
      if (start != null) {
        body.set("ExclusiveStartKey", start);
      }
      JsonNode answer = client.call("Query", body);
      answer.path("Items").forEach(out::add);
      start = answer.get("LastEvaluatedKey");
    } while (start != null && start.size() > 0);
    return out;
  }

  /** At the last version of a snapshot group: the group's items; returns their bytes
   * (StateKey text plus 8 per version number), which the version's manifest records. */
  long writeSnapshot(long version, Map<Key, Long> map, Map<Key, List<Long>> hist) {
    long group = version / groupSize;
    TreeMap<Key, ObjectNode> items = new TreeMap<>();
    for (Map.Entry<Key, Long> e : map.entrySet()) {
      ObjectNode item = snapshotItem(group, e.getKey());
      ArrayNode deltas = item.putObject("DeltaVersions").putArray("L");
      List<Long> changes = hist.get(e.getKey());
      if (changes == null) {
        deltas.add(n(e.getValue()));
      } else {
        changes.stream().filter(v -> v > 0).forEach(v -> deltas.add(n(v)));
      }
      items.put(e.getKey(), item);
    }
    for (Map.Entry<Key, List<Long>> e : hist.entrySet()) {
      if (map.containsKey(e.getKey())) {
        continue;
      }
      ObjectNode item = snapshotItem(group, e.getKey());
      ArrayNode deltas = item.putObject("DeltaVersions").putArray("L");
      e.getValue().stream().filter(v -> v > 0).forEach(v -> deltas.add(n(v)));
      long deleted = e.getValue().stream().filter(v -> v < 0).mapToLong(v -> -v).max().orElse(0);
      item.set("DeleteVersion", n(deleted));
      items.put(e.getKey(), item);
    }
    List<ObjectNode> requests = new ArrayList<>();
    long bytes = 0;
    for (ObjectNode item : items.values()) {
      bytes += item.path("StateKey").path("S").asText().length()
          + 8L * item.path("DeltaVersions").path("L").size() + (item.has("DeleteVersion") ? 8 : 0);
      ObjectNode request = DynamoClient.JSON.createObjectNode();
      request.putObject("PutRequest").set("Item", item);
      requests.add(request);
    }
    write(snapshotTable, requests);
    return bytes;
  }

  private ObjectNode snapshotItem(long group, Key key) {
    ObjectNode item = DynamoClient.JSON.createObjectNode();
    item.set("SnapshotGroup_Partition", s(storePrefix + "G" + group + "_" + bucket(key)));
    item.set("StateKey", s(stateKey(key)));
    return item;
  }

  /** Key bytes with value equality, ordered as unsigned bytes. */
  static final class Key implements Comparable<Key> {
    final byte[] bytes;
    private final int hash;

    Key(byte[] bytes) {
      this.bytes = bytes;
      this.hash = java.util.Arrays.hashCode(bytes);
    }

    // getBytes() may hand out the row's own buffer, which Spark reuses for the next row.
    static Key of(UnsafeRow row) {
      return new Key(row.getBytes().clone());
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Key && java.util.Arrays.equals(bytes, ((Key) o).bytes);
    }

    @Override
    public int hashCode() {
      return hash;
    }

    @Override
    public int compareTo(Key o) {
      return java.util.Arrays.compareUnsigned(bytes, o.bytes);
    }
  }
}
