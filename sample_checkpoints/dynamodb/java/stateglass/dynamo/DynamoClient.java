package stateglass.dynamo;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * A small DynamoDB JSON-protocol client: one signed POST per call (SigV4), JSON through the
 * Jackson that ships with Spark. Credentials follow the AWS chain's first two links: the
 * environment (AWS_ACCESS_KEY_ID, ...) then Java system properties (aws.accessKeyId, ...).
 */
final class DynamoClient {
  static final ObjectMapper JSON = new ObjectMapper();
  private static final DateTimeFormatter STAMP = DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'");
  private final HttpClient http = HttpClient.newHttpClient();
  private final URI endpoint;
  private final String region;

  DynamoClient(String endpoint, String region) {
    this.region = region;
    String url = endpoint == null || endpoint.isEmpty()
        ? "https://dynamodb." + region + ".amazonaws.com" : endpoint;
    this.endpoint = URI.create(url.endsWith("/") ? url : url + "/");
  }

  private static String setting(String env, String property) {
    String value = System.getenv(env);
    return value != null && !value.isEmpty() ? value : System.getProperty(property);
  }

  /** Sends ``operation`` (e.g. "GetItem") with ``body``; throws on any non-200 answer. */
  JsonNode call(String operation, ObjectNode body) {
    try {
      byte[] payload = JSON.writeValueAsBytes(body);
      String target = "DynamoDB_20120810." + operation;
      String amzDate = ZonedDateTime.now(ZoneOffset.UTC).format(STAMP);
      String day = amzDate.substring(0, 8);
      String host = endpoint.getPort() < 0 ? endpoint.getHost() : endpoint.getHost() + ":" + endpoint.getPort();
      String key = setting("AWS_ACCESS_KEY_ID", "aws.accessKeyId");
      String secret = setting("AWS_SECRET_ACCESS_KEY", "aws.secretAccessKey");
      String token = setting("AWS_SESSION_TOKEN", "aws.sessionToken");
      if (key == null || secret == null) {
        throw new IllegalStateException("no AWS credentials in the environment or system properties");
      }
      String contentType = "application/x-amz-json-1.0";
      StringBuilder headers = new StringBuilder()
          .append("content-type:").append(contentType).append('\n')
          .append("host:").append(host).append('\n')
          .append("x-amz-date:").append(amzDate).append('\n');
      String signed = "content-type;host;x-amz-date";
      if (token != null) {
        headers.append("x-amz-security-token:").append(token).append('\n');
        signed += ";x-amz-security-token";
      }
      headers.append("x-amz-target:").append(target).append('\n');
      signed += ";x-amz-target";
      String canonical = "POST\n/\n\n" + headers + "\n" + signed + "\n" + hex(sha256(payload));
      String scope = day + "/" + region + "/dynamodb/aws4_request";
      String toSign = "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n"
          + hex(sha256(canonical.getBytes(StandardCharsets.UTF_8)));
      byte[] k = hmac(("AWS4" + secret).getBytes(StandardCharsets.UTF_8), day);
      k = hmac(hmac(hmac(k, region), "dynamodb"), "aws4_request");
      String signature = hex(hmac(k, toSign));
      HttpRequest.Builder request = HttpRequest.newBuilder(endpoint)
          .header("Content-Type", contentType)
          .header("X-Amz-Date", amzDate)
          .header("X-Amz-Target", target)
          .header("Authorization", "AWS4-HMAC-SHA256 Credential=" + key + "/" + scope
              + ", SignedHeaders=" + signed + ", Signature=" + signature)
          .POST(HttpRequest.BodyPublishers.ofByteArray(payload));
      if (token != null) {
        request.header("X-Amz-Security-Token", token);
      }
      HttpResponse<byte[]> response = http.send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
      if (response.statusCode() != 200) {
        throw new IllegalStateException("DynamoDB " + operation + " answered " + response.statusCode()
            + ": " + new String(response.body(), StandardCharsets.UTF_8));
      }
      return JSON.readTree(response.body());
    } catch (java.io.IOException e) {
      throw new IllegalStateException("DynamoDB " + operation + " failed: " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("DynamoDB " + operation + " interrupted", e);
    }
  }

  private static byte[] sha256(byte[] data) throws java.io.IOException {
    try {
      return MessageDigest.getInstance("SHA-256").digest(data);
    } catch (java.security.GeneralSecurityException e) {
      throw new java.io.IOException(e);
    }
  }

  private static byte[] hmac(byte[] key, String data) throws java.io.IOException {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(key, "HmacSHA256"));
      return mac.doFinal(data.getBytes(StandardCharsets.UTF_8));
    } catch (java.security.GeneralSecurityException e) {
      throw new java.io.IOException(e);
    }
  }

  private static String hex(byte[] bytes) {
    StringBuilder out = new StringBuilder();
    for (byte b : bytes) {
      out.append(String.format("%02x", b));
    }
    return out.toString();
  }
}
