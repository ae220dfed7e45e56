package dev.beacon.client;

import beacon.v1.assign.Assign.AssignmentEvent;
import beacon.v1.assign.Assign.AssignmentNotice;
import beacon.v1.assign.Assign.ResourceInfo;
import beacon.v1.assign.Assign.SlotHeld;
import beacon.v1.assign.Assign.WatchAssignments;
import beacon.v1.assign.Assign.WatchAssignmentsReply;
import beacon.v1.assign.AssignmentsGrpc;
import io.grpc.Channel;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * What a registration holds, resources and slots, pushed by the leader as it changes (the
 * stream resumed on another beacon when it breaks, telling only the difference). When the
 * lease is lost one {@code LOST} event comes and the watch ends; nothing else ends it.
 */
public final class Assignments extends Resuming<Assignments.Event> {
  /** What happened to something held. */
  public enum Kind {
    ADDED,
    REMOVED,
    SLOT_GRANTED,
    SLOT_GONE,
    SLOT_REVOKING,
    LOST
  }

  /** One change: {@code resource} for the resource kinds, {@code slot} for the slot kinds. */
  public record Event(Kind kind, ResourceInfo resource, SlotHeld slot) {}

  private final Registration reg;
  private final Object lock = new Object();
  private Map<String, ResourceInfo> resources = new HashMap<>();
  private Map<String, SlotHeld> slots = new HashMap<>();

  Assignments(BeaconClient client, Registration reg) {
    super(client, "assignments");
    this.reg = reg;
    // A lost lease ends the stream at once: the leader's notices say only what moved.
    reg.lost().whenComplete((why, e) -> cancelStream());
  }

  @Override
  boolean ends(BeaconException e) {
    return e instanceof BeaconException.LeaseLost;
  }

  @Override
  void follow(Channel channel, long start, boolean relist) {
    if (reg.lost().isDone()) {
      lose();
    }
    WatchAssignments req =
        WatchAssignments.newBuilder()
            .setNodeId(reg.nodeId())
            .setTerm(reg.fencingToken().term())
            .setIndex(reg.fencingToken().index())
            .setStartIndex(start)
            .build();
    try {
      Iterator<AssignmentEvent> it = AssignmentsGrpc.newBlockingStub(channel).watch(req);
      while (it.hasNext()) {
        AssignmentEvent ev = it.next();
        if (ev.hasStart()) {
          first(start, relist);
          try {
            listed(ev.getStart(), start);
          } finally {
            isListed();
          }
        } else {
          notice(ev.getNotice());
        }
      }
    } catch (RuntimeException e) {
      if (reg.lost().isDone()) {
        lose();
      }
      BeaconException err = BeaconException.of(e, "");
      if (err instanceof BeaconException.LeaseLost) {
        lose();
      }
      throw e;
    }
  }

  private void lose() {
    synchronized (lock) {
      resources = new HashMap<>();
      slots = new HashMap<>();
    }
    tell(new Event(Kind.LOST, null, null));
    throw BeaconException.LeaseLost.because("the registration's lease is lost: " + reg.lost().getNow(""));
  }

  private static List<Event> slotEvents(SlotHeld was, SlotHeld now) {
    List<Event> events = new ArrayList<>();
    if (was == null || was.getSlot() != now.getSlot() || was.getTerm() != now.getTerm() || was.getIndex() != now.getIndex()) {
      if (was != null) {
        events.add(new Event(Kind.SLOT_GONE, null, was));
      }
      events.add(new Event(Kind.SLOT_GRANTED, null, now));
      if (now.getRevoking()) {
        events.add(new Event(Kind.SLOT_REVOKING, null, now));
      }
    } else if (now.getRevoking() && !was.getRevoking()) {
      events.add(new Event(Kind.SLOT_REVOKING, null, now));
    }
    return events;
  }

  private void listed(WatchAssignmentsReply st, long start) {
    if (start > 0) {
      return;
    }
    Map<String, ResourceInfo> nowR = new HashMap<>();
    st.getHeldList().forEach(r -> nowR.put(r.getName(), r));
    Map<String, SlotHeld> nowS = new HashMap<>();
    st.getSlotsList().forEach(s -> nowS.put(s.getGroup(), s));
    Map<String, ResourceInfo> oldR;
    Map<String, SlotHeld> oldS;
    synchronized (lock) {
      oldR = resources;
      oldS = slots;
      resources = nowR;
      slots = nowS;
    }
    List<Event> events = new ArrayList<>();
    oldR.forEach((n, r) -> {
      if (!nowR.containsKey(n)) {
        events.add(new Event(Kind.REMOVED, r, null));
      }
    });
    oldS.forEach((g, s) -> {
      if (!nowS.containsKey(g)) {
        events.add(new Event(Kind.SLOT_GONE, null, s));
      }
    });
    nowS.forEach((g, s) -> events.addAll(slotEvents(oldS.get(g), s)));
    nowR.forEach((n, r) -> {
      if (!oldR.containsKey(n)) {
        events.add(new Event(Kind.ADDED, r, null));
      }
    });
    at(st.getIndex());
    tellAll(events);
  }

  private void notice(AssignmentNotice n) {
    Map<String, SlotHeld> before;
    synchronized (lock) {
      before = new HashMap<>(slots);
      n.getSlotsGoneList().forEach(s -> slots.remove(s.getGroup()));
      n.getSlotsHeldList().forEach(s -> slots.put(s.getGroup(), s));
      n.getGoneList().forEach(r -> resources.remove(r.getName()));
      n.getHeldList().forEach(r -> resources.put(r.getName(), r));
    }
    List<Event> events = new ArrayList<>();
    n.getSlotsGoneList().forEach(s -> {
      if (before.containsKey(s.getGroup())) {
        events.add(new Event(Kind.SLOT_GONE, null, s));
      }
    });
    n.getSlotsHeldList().forEach(s -> events.addAll(slotEvents(before.get(s.getGroup()), s)));
    n.getGoneList().forEach(r -> events.add(new Event(Kind.REMOVED, r, null)));
    n.getHeldList().forEach(r -> events.add(new Event(Kind.ADDED, r, null)));
    tellAll(events);
    at(n.getIndex());
  }

  /** The resources held now, by name. */
  public Map<String, ResourceInfo> resources() {
    synchronized (lock) {
      return Map.copyOf(resources);
    }
  }

  /** The slots held now, by group. */
  public Map<String, SlotHeld> slots() {
    synchronized (lock) {
      return Map.copyOf(slots);
    }
  }
}
