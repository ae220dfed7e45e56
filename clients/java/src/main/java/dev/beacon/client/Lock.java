package dev.beacon.client;

import beacon.v1.assign.Assign.GroupView;
import beacon.v1.assign.Assign.GroupsReply;
import beacon.v1.assign.Assign.GroupsRequest;
import beacon.v1.assign.Assign.SlotGroupInfo;
import beacon.v1.assign.Assign.SlotHeld;
import beacon.v1.assign.AssignmentsGrpc;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * A named lock (or a leadership won), built on a slot group of one slot: the group is the
 * lock, its node type ({@code lock.NAME}) is what contenders register as, and the slot goes
 * to the oldest live contender. Holding it is holding a lease: a holder that dies or is cut
 * off loses it within a lease, and the next contender in line gets it at the leader's next
 * tick. Every grant carries a fencing token that rises with each holder: pass it to what the
 * lock guards, and have that refuse a token below the highest seen.
 *
 * <p>{@link #close()} releases it: the next contender in line gets it at once.
 */
public final class Lock implements AutoCloseable {
  private static final String NAME_CHARS =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";

  private final String name;
  private final Registration registration;
  private final Assignments held;
  private final Registration.FencingToken token;
  private final CompletableFuture<String> lost = new CompletableFuture<>();
  private final Thread watcher;

  private Lock(String name, Registration registration, Assignments held, SlotHeld slot) {
    this.name = name;
    this.registration = registration;
    this.held = held;
    this.token = new Registration.FencingToken(slot.getTerm(), slot.getIndex());
    this.watcher = new Thread(this::watchLoss, "beacon-lock-" + name);
    watcher.setDaemon(true);
    watcher.start();
  }

  /** The node type contenders for lock {@code name} register as. */
  public static String typeOf(String name) {
    return "lock." + name;
  }

  /**
   * Waits (at most {@code limit}) until lock {@code name} is this contender's; {@code addr}
   * is the contender's own address (who holds the lock, as others see it) and {@code
   * metadata} its registration's (an election's proposal, say). The lock is made when
   * missing, which needs the admin role where roles apply. Throws {@link
   * BeaconException.DeadlineExceeded} when the wait ran out, {@link BeaconException.LeaseLost}
   * when the contender's lease was lost while it waited.
   */
  static Lock acquire(BeaconClient client, String name, String addr, String metadata, Duration limit) {
    if (name.isEmpty() || !name.chars().allMatch(c -> NAME_CHARS.indexOf(c) >= 0)) {
      throw new IllegalArgumentException(
          "`" + name + "` is not a lock name: use characters from A-Z a-z 0-9 . _ -");
    }
    ensure(client, name);
    Registration reg =
        client.register(typeOf(name), addr, BeaconClient.RegisterOptions.defaults().withMetadata(metadata));
    Assignments held;
    try {
      held = client.assignments(reg);
    } catch (RuntimeException e) {
      reg.close();
      throw e;
    }
    long deadline = System.nanoTime() + limit.toNanos();
    try {
      while (true) {
        SlotHeld slot = held.slots().get(name);
        if (slot != null) {
          return new Lock(name, reg, held, slot);
        }
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new BeaconException.DeadlineExceeded(
              "lock `" + name + "` was not granted within " + limit.toMillis() + " ms: another contender holds it",
              io.grpc.Status.Code.DEADLINE_EXCEEDED, "", 0, "", Duration.ZERO, "", null);
        }
        Assignments.Event e = held.next(Duration.ofNanos(Math.min(left, Duration.ofMillis(200).toNanos())));
        if (e != null && e.kind() == Assignments.Kind.LOST) {
          throw BeaconException.LeaseLost.because(
              "the contender's lease was lost while waiting for lock `" + name + "`: " + reg.lost().getNow(""));
        }
      }
    } catch (RuntimeException e) {
      held.close();
      reg.close();
      throw e;
    }
  }

  /** Makes sure lock {@code name} exists as a one-slot group of its lock type. */
  private static void ensure(BeaconClient client, String name) {
    GroupsRequest req = GroupsRequest.newBuilder().setName(name).build();
    GroupsReply reply =
        client.call((ch, o) -> AssignmentsGrpc.newFutureStub(ch).withDeadline(o.getDeadline()).groups(req));
    for (GroupView v : reply.getGroupsList()) {
      SlotGroupInfo g = v.getGroup();
      if (!g.getName().equals(name)) {
        continue;
      }
      if (g.getNodeType().equals(typeOf(name)) && g.getSlotsCount() == 1) {
        return;
      }
      throw new IllegalStateException(
          "slot group `" + name + "` exists with node type " + g.getNodeType() + " and "
              + g.getSlotsCount() + " slots: it is not lock `" + name + "`");
    }
    try {
      client.createSlotGroup(name, typeOf(name), 1);
    } catch (BeaconException.AlreadyExists e) {
      // Made by another contender meanwhile, or a group of that name that is no lock.
      ensure(client, name);
    }
  }

  private void watchLoss() {
    try {
      while (!lost.isDone()) {
        Assignments.Event e;
        try {
          e = held.next(Duration.ofSeconds(1));
        } catch (BeaconException err) {
          lost.complete(err.getMessage());
          return;
        } catch (IllegalStateException closed) {
          lost.complete("the lock was released");
          return;
        }
        if (e == null) {
          continue;
        }
        if (e.kind() == Assignments.Kind.SLOT_GONE && e.slot().getGroup().equals(name)) {
          lost.complete("the lock was taken away");
        } else if (e.kind() == Assignments.Kind.LOST) {
          lost.complete("the lease was lost: " + registration.lost().getNow(""));
        }
      }
    } catch (RuntimeException e) {
      lost.complete(String.valueOf(e.getMessage()));
    }
  }

  /** The lock's name. */
  public String name() {
    return name;
  }

  /** The grant's fencing token: rises with each holder. */
  public Registration.FencingToken token() {
    return token;
  }

  /** The contender's registration that holds the lock. */
  public Registration registration() {
    return registration;
  }

  /**
   * Completes, once, with why the lock was lost (its lease ran out, or the slot was taken
   * away): stop acting as its holder at once.
   */
  public CompletableFuture<String> lost() {
    return lost;
  }

  /** Lets the lock go: the next contender in line gets it at once. */
  @Override
  public void close() {
    held.close();
    registration.close();
    lost.complete("the lock was released");
    watcher.interrupt();
    try {
      watcher.join(5000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
