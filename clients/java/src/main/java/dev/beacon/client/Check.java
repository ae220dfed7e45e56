package dev.beacon.client;

import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/** One health check run beside the service: a status and why. */
@FunctionalInterface
public interface Check {
  /** A status, and why (empty when passing). */
  record Finding(Registration.Health status, String note) {}

  Finding run();

  /** Passing when a TCP connection to {@code host:port} opens within {@code timeout}. */
  static Check tcp(String addr, Duration timeout) {
    int colon = addr.lastIndexOf(':');
    String host = addr.substring(0, colon);
    int port = Integer.parseInt(addr.substring(colon + 1));
    return () -> {
      try (Socket s = new Socket()) {
        s.connect(new InetSocketAddress(host, port), (int) timeout.toMillis());
        return new Finding(Registration.Health.PASSING, "");
      } catch (IOException e) {
        return new Finding(Registration.Health.CRITICAL, "tcp " + addr + ": " + e.getMessage());
      }
    };
  }

  /** An HTTP GET: 2xx passing, 429 warning, anything else (or silence) critical. */
  static Check http(String url, Duration timeout) {
    HttpClient http = HttpClient.newBuilder().connectTimeout(timeout).build();
    return () -> {
      try {
        int code =
            http.send(HttpRequest.newBuilder(URI.create(url)).timeout(timeout).GET().build(), HttpResponse.BodyHandlers.discarding())
                .statusCode();
        if (code >= 200 && code < 300) {
          return new Finding(Registration.Health.PASSING, "");
        }
        Registration.Health h = code == 429 ? Registration.Health.WARNING : Registration.Health.CRITICAL;
        return new Finding(h, "http " + url + ": " + code);
      } catch (IOException e) {
        return new Finding(Registration.Health.CRITICAL, "http " + url + ": " + e.getMessage());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return new Finding(Registration.Health.CRITICAL, "http " + url + ": interrupted");
      }
    };
  }

  /** The standard gRPC health check of {@code service} at {@code target}: SERVING is passing. */
  static Check grpc(String target, String service, Duration timeout) {
    return () -> {
      ManagedChannel ch = Grpc.newChannelBuilder(target, InsecureChannelCredentials.create()).build();
      try {
        HealthCheckResponse r =
            HealthGrpc.newBlockingStub(ch)
                .withDeadlineAfter(timeout.toMillis(), TimeUnit.MILLISECONDS)
                .check(HealthCheckRequest.newBuilder().setService(service).build());
        if (r.getStatus() == HealthCheckResponse.ServingStatus.SERVING) {
          return new Finding(Registration.Health.PASSING, "");
        }
        return new Finding(Registration.Health.CRITICAL, "grpc " + target + ": " + r.getStatus());
      } catch (StatusRuntimeException e) {
        return new Finding(Registration.Health.CRITICAL, "grpc " + target + ": " + e.getStatus().getCode());
      } finally {
        ch.shutdownNow();
      }
    };
  }

  /** The service's own check; an exception is critical, with its text. */
  static Check of(Supplier<Finding> check) {
    return () -> {
      try {
        return check.get();
      } catch (RuntimeException e) {
        return new Finding(Registration.Health.CRITICAL, "check: " + e);
      }
    };
  }
}
