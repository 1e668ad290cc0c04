package dev.sidecar.client;

import java.util.Objects;
import java.util.Optional;
import dev.sidecar.v1.HttpDetail;

/**
 * What an upstream answered: status, service, endpoint (query string cut), redacted body and the
 * raw Retry-After header. A failure with no response (refused, timeout) has none.
 */
public final class HttpInfo {
  private final int statusCode;
  private final String service;
  private final String endpoint;
  private final String body;
  private final String retryAfterRaw;

  /** An HTTP detail; {@code retryAfterRaw} is null when no Retry-After was sent. */
  public HttpInfo(int statusCode, String service, String endpoint, String body, String retryAfterRaw) {
    this.statusCode = statusCode;
    this.service = Objects.requireNonNull(service, "service");
    this.endpoint = Objects.requireNonNull(endpoint, "endpoint");
    this.body = Objects.requireNonNull(body, "body");
    this.retryAfterRaw = retryAfterRaw;
  }

  /** The detail carried by a {@code sidecar.v1.HttpDetail}. */
  public static HttpInfo fromProto(HttpDetail detail) {
    return new HttpInfo(
        detail.getStatusCode(),
        detail.getService(),
        detail.getEndpoint(),
        detail.getBody(),
        detail.hasRetryAfterRaw() ? detail.getRetryAfterRaw() : null);
  }

  /** The HTTP status code. */
  public int statusCode() {
    return statusCode;
  }

  /** The service (tool service or provider) that answered. */
  public String service() {
    return service;
  }

  /** The endpoint, with the query string cut. */
  public String endpoint() {
    return endpoint;
  }

  /** The response body, redacted but not capped. */
  public String body() {
    return body;
  }

  /** The Retry-After header verbatim; empty when none was sent. */
  public Optional<String> retryAfterRaw() {
    return Optional.ofNullable(retryAfterRaw);
  }

  @Override
  public boolean equals(Object other) {
    if (!(other instanceof HttpInfo)) {
      return false;
    }
    HttpInfo that = (HttpInfo) other;
    return statusCode == that.statusCode
        && service.equals(that.service)
        && endpoint.equals(that.endpoint)
        && body.equals(that.body)
        && Objects.equals(retryAfterRaw, that.retryAfterRaw);
  }

  @Override
  public int hashCode() {
    return Objects.hash(statusCode, service, endpoint, body, retryAfterRaw);
  }

  @Override
  public String toString() {
    return "HttpInfo{status=" + statusCode + ", service=" + service + ", endpoint=" + endpoint
        + (retryAfterRaw == null ? "" : ", retryAfter=" + retryAfterRaw) + "}";
  }
}
