package stateglass.dynamo;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreCheckpointInfo;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreInstanceMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreIterator;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.BoxedUnit;

/** One version's store: reads through the provider's map, writes queued to DynamoDB. */
final class DynamoStateStore implements StateStore {
  private final DynamoStateStoreProvider provider;
  private final long base;
  private final long version;
  private final HashMap<DynamoStateStoreProvider.Key, Long> last;
  // Values written by this version (null: removed), served before DynamoDB is asked.
  private final HashMap<DynamoStateStoreProvider.Key, byte[]> written = new HashMap<>();
  // Queued state-table puts (by item key: a key written twice is sent once).
  private final LinkedHashMap<String, ObjectNode> queue = new LinkedHashMap<>();
  private final List<String> flushed = new ArrayList<>();
  private boolean committed;
  private boolean aborted;

  DynamoStateStore(DynamoStateStoreProvider provider, long base) {
    this.provider = provider;
    this.base = base;
    this.version = base + 1;
    this.last = new HashMap<>(provider.last);
  }

  @Override
  public StateStoreId id() {
    return provider.id;
  }

  @Override
  public long version() {
    return base;
  }

  private static UnsafeRow row(byte[] bytes, int fields) {
    UnsafeRow row = new UnsafeRow(fields);
    row.pointTo(bytes, bytes.length);
    return row;
  }

  @Override
  public UnsafeRow get(UnsafeRow key, String colFamilyName) {
    DynamoStateStoreProvider.Key k = DynamoStateStoreProvider.Key.of(key);
    if (written.containsKey(k)) {
      byte[] v = written.get(k);
      return v == null ? null : row(v, provider.valueSchema.length());
    }
    Long at = last.get(k);
    return at == null ? null : row(provider.valueAt(k, at), provider.valueSchema.length());
  }

  @Override
  public void put(UnsafeRow key, UnsafeRow value, String colFamilyName) {
    DynamoStateStoreProvider.Key k = DynamoStateStoreProvider.Key.of(key);
    byte[] v = value.getBytes().clone();
    written.put(k, v);
    last.put(k, version);
    enqueue(k, DynamoStateStoreProvider.record(k.bytes, v));
  }

  @Override
  public void remove(UnsafeRow key, String colFamilyName) {
    DynamoStateStoreProvider.Key k = DynamoStateStoreProvider.Key.of(key);
    if (last.remove(k) != null) {
      written.put(k, null);
      enqueue(k, DynamoStateStoreProvider.record(k.bytes, null));
    }
  }

  private void enqueue(DynamoStateStoreProvider.Key k, byte[] record) {
    String pk = provider.stateKey(k) + "_" + version;
    ObjectNode item = DynamoClient.JSON.createObjectNode();
    item.set("StateKey_QueryVersion", DynamoStateStoreProvider.s(pk));
    item.putObject("State").put("B", Base64.getEncoder().encodeToString(record));
    ObjectNode request = DynamoClient.JSON.createObjectNode();
    request.putObject("PutRequest").set("Item", item);
    queue.remove(pk);
    queue.put(pk, request);
    if (queue.size() >= DynamoStateStoreProvider.BATCH) {
      flush();
    }
  }

  private void flush() {
    provider.write(provider.stateTable, new ArrayList<>(queue.values()));
    flushed.addAll(queue.keySet());
    queue.clear();
  }

  @Override
  public long commit() {
    flush();
    ArrayNode puts = DynamoClient.JSON.createArrayNode();
    ArrayNode removes = DynamoClient.JSON.createArrayNode();
    long bytes = 0;
    for (Map.Entry<DynamoStateStoreProvider.Key, byte[]> e : written.entrySet()) {
      String b64 = Base64.getEncoder().encodeToString(e.getKey().bytes);
      (e.getValue() == null ? removes : puts).add(DynamoStateStoreProvider.s(b64));
      bytes += 8 + e.getKey().bytes.length + (e.getValue() == null ? 0 : e.getValue().length);
    }
    HashMap<DynamoStateStoreProvider.Key, List<Long>> hist =
        version % provider.groupSize == 1 || provider.groupSize == 1 ? new HashMap<>() : copy(provider.history);
    for (Map.Entry<DynamoStateStoreProvider.Key, byte[]> e : written.entrySet()) {
      hist.computeIfAbsent(e.getKey(), x -> new ArrayList<>()).add(e.getValue() == null ? -version : version);
    }
    // The snapshot group first: a manifest names only what is fully written.
    long snapshotBytes = version % provider.groupSize == 0 ? provider.writeSnapshot(version, last, hist) : -1;
    ObjectNode manifest = DynamoClient.JSON.createObjectNode();
    manifest.set("StateKey_QueryVersion", DynamoStateStoreProvider.s(provider.storePrefix + "@" + version));
    manifest.putObject("Puts").set("L", puts);
    manifest.putObject("Removes").set("L", removes);
    manifest.set("NumKeys", DynamoStateStoreProvider.n(last.size()));
    manifest.set("Bytes", DynamoStateStoreProvider.n(bytes));
    manifest.set("CommitTime", DynamoStateStoreProvider.n(System.currentTimeMillis()));
    if (snapshotBytes >= 0) {
      manifest.set("SnapshotBytes", DynamoStateStoreProvider.n(snapshotBytes));
    }
    ObjectNode request = DynamoClient.JSON.createObjectNode();
    request.putObject("PutRequest").set("Item", manifest);
    provider.write(provider.stateTable, List.of(request));
    recordVersion();
    synchronized (provider) {
      provider.last = last;
      provider.history = hist;
      provider.loadedVersion = version;
    }
    committed = true;
    return version;
  }

  private static HashMap<DynamoStateStoreProvider.Key, List<Long>> copy(
      Map<DynamoStateStoreProvider.Key, List<Long>> from) {
    HashMap<DynamoStateStoreProvider.Key, List<Long>> out = new HashMap<>();
    from.forEach((k, v) -> out.put(k, new ArrayList<>(v)));
    return out;
  }

  /** Adds the version to the store's index item (one UpdateItem, a number set). */
  private void recordVersion() {
    ObjectNode body = DynamoClient.JSON.createObjectNode();
    body.put("TableName", provider.stateTable);
    body.putObject("Key").set("StateKey_QueryVersion", DynamoStateStoreProvider.s(provider.storePrefix + "@versions"));
    body.put("UpdateExpression", "ADD Versions :v");
    body.putObject("ExpressionAttributeValues").putObject(":v").putArray("NS").add(Long.toString(version));
    provider.client.call("UpdateItem", body);
  }

  @Override
  public void abort() {
    if (committed || aborted) {
      return;
    }
    aborted = true;
    queue.clear();
    List<ObjectNode> deletes = new ArrayList<>();
    for (String pk : flushed) {
      ObjectNode request = DynamoClient.JSON.createObjectNode();
      request.putObject("DeleteRequest").putObject("Key").set("StateKey_QueryVersion", DynamoStateStoreProvider.s(pk));
      deletes.add(request);
    }
    provider.write(provider.stateTable, deletes);
  }

  @Override
  public void release() {}

  @Override
  public boolean hasCommitted() {
    return committed;
  }

  @Override
  public StateStoreIterator<UnsafeRowPair> iterator(String colFamilyName) {
    List<DynamoStateStoreProvider.Key> keys = new ArrayList<>(last.keySet());
    List<String> wanted = new ArrayList<>();
    for (DynamoStateStoreProvider.Key k : keys) {
      if (!written.containsKey(k)) {
        wanted.add(provider.stateKey(k) + "_" + last.get(k));
      }
    }
    Map<String, byte[]> fetched = provider.fetch(wanted);
    int keyFields = provider.keySchema.length();
    int valueFields = provider.valueSchema.length();
    Iterator<UnsafeRowPair> rows = keys.stream().map(k -> {
      String pk = provider.stateKey(k) + "_" + last.get(k);
      if (!written.containsKey(k) && !fetched.containsKey(pk)) {
        throw new IllegalStateException("state item " + pk + " is missing from " + provider.stateTable + fetched.keySet());
      }
      byte[] value = written.containsKey(k) ? written.get(k) : DynamoStateStoreProvider.recordValue(fetched.get(pk));
      return new UnsafeRowPair(row(k.bytes, keyFields), row(value, valueFields));
    }).iterator();
    return new StateStoreIterator<>(CollectionConverters.asScala(rows), () -> BoxedUnit.UNIT);
  }

  @Override
  public StateStoreIterator<UnsafeRowPair> prefixScan(UnsafeRow prefixKey, String colFamilyName) {
    throw new UnsupportedOperationException("prefix scan is not supported by the DynamoDB store");
  }

  @Override
  public StateStoreIterator<UnsafeRowPair> prefixScanWithMultiValues(UnsafeRow prefixKey, String colFamilyName) {
    throw new UnsupportedOperationException("multiple values are not supported by the DynamoDB store");
  }

  @Override
  public StateStoreIterator<UnsafeRowPair> iteratorWithMultiValues(String colFamilyName) {
    throw new UnsupportedOperationException("multiple values are not supported by the DynamoDB store");
  }

  @Override
  public scala.collection.Iterator<UnsafeRow> valuesIterator(UnsafeRow key, String colFamilyName) {
    throw new UnsupportedOperationException("multiple values are not supported by the DynamoDB store");
  }

  @Override
  public scala.collection.immutable.Set<String> allColumnFamilyNames() {
    return CollectionConverters.asScala(java.util.Set.of(StateStore.DEFAULT_COL_FAMILY_NAME())).toSet();
  }

  @Override
  public boolean removeColFamilyIfExists(String colFamilyName) {
    throw new UnsupportedOperationException("column families are not supported by the DynamoDB store");
  }

  @Override
  public void createColFamilyIfAbsent(String colFamilyName, StructType keySchema, StructType valueSchema,
      KeyStateEncoderSpec keyStateEncoderSpec, boolean useMultipleValuesPerKey, boolean isInternal) {
    throw new UnsupportedOperationException("column families are not supported by the DynamoDB store");
  }

  @Override
  public void putList(UnsafeRow key, UnsafeRow[] values, String colFamilyName) {
    throw new UnsupportedOperationException("multiple values are not supported by the DynamoDB store");
  }

  @Override
  public void merge(UnsafeRow key, UnsafeRow value, String colFamilyName) {
    throw new UnsupportedOperationException("merge is not supported by the DynamoDB store");
  }

  @Override
  public void mergeList(UnsafeRow key, UnsafeRow[] values, String colFamilyName) {
    throw new UnsupportedOperationException("merge is not supported by the DynamoDB store");
  }

  @Override
  public StateStoreMetrics metrics() {
    long bytes = 0;
    for (byte[] v : written.values()) {
      bytes += v == null ? 0 : v.length;
    }
    scala.collection.immutable.Map<StateStoreCustomMetric, Object> custom = scala.collection.immutable.Map$.MODULE$.empty();
    scala.collection.immutable.Map<StateStoreInstanceMetric, Object> instance = scala.collection.immutable.Map$.MODULE$.empty();
    return new StateStoreMetrics(last.size(), bytes, custom, instance);
  }

  @Override
  public StateStoreCheckpointInfo getStateStoreCheckpointInfo() {
    return new StateStoreCheckpointInfo(provider.id.partitionId(), version, Option.empty(), Option.empty());
  }
}
