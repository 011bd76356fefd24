package stateglass.dynamo;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/** Creates the two tables on first use (on-demand billing); one that exists already is kept. */
final class Tables {
  private Tables() {}

  static synchronized void create(DynamoClient client, String stateTable, String snapshotTable) {
    make(client, stateTable, "StateKey_QueryVersion", null);
    make(client, snapshotTable, "SnapshotGroup_Partition", "StateKey");
  }

  private static void make(DynamoClient client, String table, String hash, String range) {
    ObjectNode body = DynamoClient.JSON.createObjectNode();
    body.put("TableName", table);
    body.put("BillingMode", "PAY_PER_REQUEST");
    ArrayNode attributes = body.putArray("AttributeDefinitions");
    ArrayNode schema = body.putArray("KeySchema");
    attributes.addObject().put("AttributeName", hash).put("AttributeType", "S");
    schema.addObject().put("AttributeName", hash).put("KeyType", "HASH");
    if (range != null) {
      attributes.addObject().put("AttributeName", range).put("AttributeType", "S");
      schema.addObject().put("AttributeName", range).put("KeyType", "RANGE");
    }
    try {
      client.call("CreateTable", body);
    } catch (IllegalStateException e) {
      if (!String.valueOf(e.getMessage()).contains("ResourceInUseException")) {
        throw e;
      }
    }
  }
}
