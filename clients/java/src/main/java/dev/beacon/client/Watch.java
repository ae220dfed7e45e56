package dev.beacon.client;

import beacon.v1.registry.RegistryGrpc;
import beacon.v1.registry.RegistryOuterClass.HealthFilter;
import beacon.v1.registry.RegistryOuterClass.NodeEvent;
import beacon.v1.registry.RegistryOuterClass.NodeInfo;
import beacon.v1.registry.RegistryOuterClass.NodeNotice;
import beacon.v1.registry.RegistryOuterClass.WatchReply;
import beacon.v1.registry.RegistryOuterClass.WatchRequest;
import io.grpc.Channel;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Discovery: the services of some types that a filter admits, {@code PRESENT} at first, then
 * each change once, in order, across leader changes. Going out of what the filter admits
 * (critical, drained) comes as {@code REMOVED}, and back as {@code ADDED}.
 */
public final class Watch extends Resuming<Watch.Event> {
  /** What happened to a node. */
  public enum Kind {
    PRESENT,
    ADDED,
    UPDATED,
    REMOVED;

    @Override
    public String toString() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /** One change a watch tells. */
  public record Event(Kind kind, NodeInfo node) {}

  private final List<String> types;
  private final HealthFilter health;
  /** The live ones by node ID, as the watch's thread sees them. */
  private Map<Integer, NodeInfo> known = new LinkedHashMap<>();

  Watch(BeaconClient client, List<String> types, HealthFilter health) {
    super(client, "nodes");
    this.types = List.copyOf(types);
    this.health = health;
  }

  @Override
  void follow(Channel channel, long start, boolean relist) {
    WatchRequest req =
        WatchRequest.newBuilder().addAllNodeTypes(types).setStartIndex(start).setHealth(health).build();
    Iterator<NodeEvent> stream = RegistryGrpc.newBlockingStub(channel).watch(req);
    // A first answer too large for one message comes in pages: the answer with `more`, then
    // notices marked `listing` until one says no more follow.
    WatchReply.Builder listing = null;
    while (stream.hasNext()) {
      NodeEvent ev = stream.next();
      if (ev.hasStart()) {
        if (ev.getStart().getMore()) {
          listing = ev.getStart().toBuilder();
          continue;
        }
        listed(ev.getStart(), start, relist);
      } else if (listing != null && ev.getNotice().getListing()) {
        listing.addAllNodes(ev.getNotice().getAddNodesList());
        if (!ev.getNotice().getMore()) {
          listed(listing.build(), start, relist);
          listing = null;
        }
      } else {
        notice(ev.getNotice());
      }
    }
  }

  private void listed(WatchReply reply, long start, boolean relist) {
    first(start, relist);
    try {
      if (start > 0) {
        return;
      }
      Map<Integer, NodeInfo> now = new LinkedHashMap<>();
      for (NodeInfo n : reply.getNodesList()) {
        now.put(n.getNodeId(), n);
      }
      List<Event> events = new ArrayList<>();
      if (!relist) {
        now.values().forEach(n -> events.add(new Event(Kind.PRESENT, n)));
      } else {
        // Listed again after COMPACTED: told as the changes between what was known and now.
        now.forEach(
            (id, n) -> {
              NodeInfo before = known.get(id);
              if (before == null) {
                events.add(new Event(Kind.ADDED, n));
              } else if (!before.equals(n)) {
                events.add(new Event(Kind.UPDATED, n));
              }
            });
        known.forEach(
            (id, n) -> {
              if (!now.containsKey(id)) {
                events.add(new Event(Kind.REMOVED, n));
              }
            });
      }
      known = now;
      at(reply.getIndex());
      tellAll(events);
    } finally {
      isListed();
    }
  }

  private void notice(NodeNotice n) {
    List<Event> events = new ArrayList<>();
    for (NodeInfo info : n.getAddNodesList()) {
      known.put(info.getNodeId(), info);
      events.add(new Event(Kind.ADDED, info));
    }
    for (NodeInfo info : n.getUpdateNodesList()) {
      known.put(info.getNodeId(), info);
      events.add(new Event(Kind.UPDATED, info));
    }
    for (NodeInfo info : n.getDelNodesList()) {
      known.remove(info.getNodeId());
      events.add(new Event(Kind.REMOVED, info));
    }
    tellAll(events);
    // The index moves once its changes are handed over: a resume from after it misses none.
    at(n.getIndex());
  }
}
