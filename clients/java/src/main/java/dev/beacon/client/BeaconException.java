package dev.beacon.client;

import com.google.protobuf.Any;
import com.google.rpc.ErrorInfo;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.time.Duration;
import java.util.Locale;
import java.util.Set;

/**
 * A call a beacon refused, or that could not reach one. Its subclasses tell the kinds apart
 * ({@link Busy}, {@link LeaseLost}, {@link Compacted}, {@link TooLarge}, ...); {@link
 * #reason()} is beacon's own reason ({@code NO_QUORUM}, {@code BUSY}, ...) and {@link
 * #status()} the gRPC status code.
 */
public class BeaconException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** Reasons worth retrying elsewhere or later: every beacon write is safe to retry. */
  private static final Set<String> RETRYABLE =
      Set.of("NOT_LEADER", "NO_QUORUM", "LEADER_CHANGED", "UNAVAILABLE", "BUSY");

  private final Status.Code status;
  private final String reason;
  private final int code;
  private final String leader;
  private final Duration retryAfter;
  private final String beacon;

  public BeaconException(String message) {
    this(message, Status.Code.UNKNOWN, "", 0, "", Duration.ZERO, "", null);
  }

  BeaconException(
      String message,
      Status.Code status,
      String reason,
      int code,
      String leader,
      Duration retryAfter,
      String beacon,
      Throwable cause) {
    super(message, cause);
    this.status = status;
    this.reason = reason;
    this.code = code;
    this.leader = leader;
    this.retryAfter = retryAfter;
    this.beacon = beacon;
  }

  /** The gRPC status code. */
  public Status.Code status() {
    return status;
  }

  /** Beacon's own reason ({@code NOT_LEADER}, {@code BUSY}, ...); empty when none came. */
  public String reason() {
    return reason;
  }

  /** Beacon's numeric error code (0 without one). */
  public int code() {
    return code;
  }

  /** The leader's address, when the beacon named it. */
  public String leader() {
    return leader;
  }

  /** How long a busy beacon asked the caller to wait. */
  public Duration retryAfter() {
    return retryAfter;
  }

  /** The beacon the call went to, when known. */
  public String beacon() {
    return beacon;
  }

  @Override
  public String getMessage() {
    String what = reason.isEmpty() ? status.name() : reason;
    String where = beacon.isEmpty() ? "beacon" : "beacon at " + beacon;
    return where + ": " + what + ": " + super.getMessage();
  }

  boolean retryable() {
    if (!reason.isEmpty()) {
      return RETRYABLE.contains(reason);
    }
    // Without beacon's reason the refusal is the transport's: the connection broke (grpc-java
    // says UNKNOWN "channel closed" when a beacon dies under a call). Every write is safe to
    // retry.
    return status == Status.Code.UNAVAILABLE || status == Status.Code.UNKNOWN;
  }

  /** No answer in time: the deadline passed, or the connection's pings went unanswered. */
  boolean silent() {
    if (status == Status.Code.DEADLINE_EXCEEDED) {
      return true;
    }
    String text = String.valueOf(super.getMessage()).toLowerCase(Locale.ROOT);
    return status == Status.Code.UNAVAILABLE
        && reason.isEmpty()
        && (text.contains("keepalive") || text.contains("timeout") || text.contains("timed out"));
  }

  /** Nothing listens at the address. */
  boolean refused() {
    String text = String.valueOf(super.getMessage()).toLowerCase(Locale.ROOT);
    return status == Status.Code.UNAVAILABLE
        && reason.isEmpty()
        && text.contains("connection refused");
  }

  /** No beacon could answer now (no leader, no majority, none reachable): retry later. */
  public static class Unavailable extends BeaconException {
    private static final long serialVersionUID = 1L;

    Unavailable(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }
  }

  /** What the call names does not exist (a sequence, queue, task, resource). */
  public static class NotFound extends BeaconException {
    private static final long serialVersionUID = 1L;

    NotFound(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }
  }

  /** Something of that name exists with other settings. */
  public static class AlreadyExists extends BeaconException {
    private static final long serialVersionUID = 1L;

    AlreadyExists(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }
  }

  /** The call does not fit the state: a stale fencing token, a finished task. */
  public static class FailedPrecondition extends BeaconException {
    private static final long serialVersionUID = 1L;

    FailedPrecondition(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }
  }

  /** The registration no longer holds its node ID: stop using the ID. */
  public static class LeaseLost extends FailedPrecondition {
    private static final long serialVersionUID = 1L;

    LeaseLost(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }

    static LeaseLost because(String why) {
      return new LeaseLost(why, Status.Code.FAILED_PRECONDITION, "NO_LEASE", 14, "", Duration.ZERO, "", null);
    }
  }

  /** A limit was reached (every node ID in use, too many sequences, ...). */
  public static class ResourceExhausted extends BeaconException {
    private static final long serialVersionUID = 1L;

    ResourceExhausted(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }
  }

  /** A message or value over a size limit; sending it again never helps. */
  public static class TooLarge extends ResourceExhausted {
    private static final long serialVersionUID = 1L;

    TooLarge(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }
  }

  /** The beacon is over its limits: retry after {@link #retryAfter()}, with jitter. */
  public static class Busy extends ResourceExhausted {
    private static final long serialVersionUID = 1L;

    Busy(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }
  }

  /** A compare-and-swap lost: read and retry. */
  public static class Aborted extends BeaconException {
    private static final long serialVersionUID = 1L;

    Aborted(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }
  }

  /** The request itself is wrong (a bad address, name or size). */
  public static class InvalidArgument extends BeaconException {
    private static final long serialVersionUID = 1L;

    InvalidArgument(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }
  }

  /** No answer in time; a write may or may not have taken effect. */
  public static class DeadlineExceeded extends BeaconException {
    private static final long serialVersionUID = 1L;

    DeadlineExceeded(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }
  }

  /** A watch asked to resume from a log index older than the beacons keep changes for. */
  public static class Compacted extends BeaconException {
    private static final long serialVersionUID = 1L;

    Compacted(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }
  }

  /** No credential, or one the cluster does not know; or the role may not do this. */
  public static class Denied extends BeaconException {
    private static final long serialVersionUID = 1L;

    Denied(String m, Status.Code s, String r, int c, String l, Duration a, String b, Throwable t) {
      super(m, s, r, c, l, a, b, t);
    }
  }

  /** The typed exception of a failed call to beacon {@code at}. */
  static BeaconException of(Throwable error, String at) {
    if (error instanceof BeaconException b) {
      return b;
    }
    Status st = Status.fromThrowable(error);
    String message = st.getDescription() == null ? st.getCode().name() : st.getDescription();
    if (st.getCause() != null && st.getCause().getMessage() != null) {
      // grpc-java says "io exception"; what failed is in its cause ("Connection refused").
      message = message + ": " + st.getCause().getMessage();
    }
    String reason = "";
    int code = 0;
    String leader = "";
    Duration retryAfter = Duration.ZERO;
    com.google.rpc.Status rich = StatusProto.fromThrowable(error);
    if (rich != null) {
      for (Any detail : rich.getDetailsList()) {
        if (!detail.is(ErrorInfo.class)) {
          continue;
        }
        try {
          ErrorInfo info = detail.unpack(ErrorInfo.class);
          if (!info.getDomain().equals("beacon")) {
            continue;
          }
          reason = info.getReason();
          code = parse(info.getMetadataOrDefault("code", "0"));
          leader = info.getMetadataOrDefault("leader", "");
          retryAfter = Duration.ofMillis(parse(info.getMetadataOrDefault("retry_after_ms", "0")));
        } catch (com.google.protobuf.InvalidProtocolBufferException e) {
          // A detail that does not parse says nothing more.
        }
      }
    }
    Status.Code s = st.getCode();
    Throwable cause = error;
    switch (reason) {
      case "NO_LEASE", "NOT_HOLDER":
        return new LeaseLost(message, s, reason, code, leader, retryAfter, at, cause);
      case "FRAME_TOO_LARGE", "TOO_LARGE", "CONFIG_TOO_LARGE":
        return new TooLarge(message, s, reason, code, leader, retryAfter, at, cause);
      case "COMPACTED":
        return new Compacted(message, s, reason, code, leader, retryAfter, at, cause);
      case "BUSY":
        return new Busy(message, s, reason, code, leader, retryAfter, at, cause);
      default:
        break;
    }
    return switch (s) {
      case UNAVAILABLE -> new Unavailable(message, s, reason, code, leader, retryAfter, at, cause);
      case NOT_FOUND -> new NotFound(message, s, reason, code, leader, retryAfter, at, cause);
      case ALREADY_EXISTS -> new AlreadyExists(message, s, reason, code, leader, retryAfter, at, cause);
      case FAILED_PRECONDITION ->
          new FailedPrecondition(message, s, reason, code, leader, retryAfter, at, cause);
      case RESOURCE_EXHAUSTED ->
          new ResourceExhausted(message, s, reason, code, leader, retryAfter, at, cause);
      case ABORTED -> new Aborted(message, s, reason, code, leader, retryAfter, at, cause);
      case INVALID_ARGUMENT -> new InvalidArgument(message, s, reason, code, leader, retryAfter, at, cause);
      case DEADLINE_EXCEEDED ->
          new DeadlineExceeded(message, s, reason, code, leader, retryAfter, at, cause);
      case UNAUTHENTICATED, PERMISSION_DENIED ->
          new Denied(message, s, reason, code, leader, retryAfter, at, cause);
      default -> new BeaconException(message, s, reason, code, leader, retryAfter, at, cause);
    };
  }

  private static int parse(String s) {
    try {
      return Integer.parseInt(s);
    } catch (NumberFormatException e) {
      return 0;
    }
  }
}
