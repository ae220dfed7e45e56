package dev.beacon.client;

import beacon.v1.configs.ConfigsGrpc;
import beacon.v1.configs.ConfigsOuterClass.ConfigEvent;
import beacon.v1.configs.ConfigsOuterClass.ConfigNotice;
import beacon.v1.configs.ConfigsOuterClass.Document;
import beacon.v1.configs.ConfigsOuterClass.WatchReply;
import beacon.v1.configs.ConfigsOuterClass.WatchRequest;
import io.grpc.Channel;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * The documents under some prefixes: each one at first ({@code listed}), then each change
 * once, in order, across leader changes.
 */
public final class ConfigWatch extends Resuming<ConfigWatch.Event> {
  /** A document put ({@code document} set), or a key deleted ({@code deleted} set). */
  public record Event(Document document, String deleted, boolean listed, long index) {}

  private final List<String> prefixes;
  private Map<String, Document> known = new HashMap<>();

  ConfigWatch(BeaconClient client, List<String> prefixes) {
    super(client, "config");
    this.prefixes = List.copyOf(prefixes);
  }

  @Override
  void follow(Channel channel, long start, boolean relist) {
    WatchRequest req = WatchRequest.newBuilder().addAllPrefixes(prefixes).setStartIndex(start).build();
    Iterator<ConfigEvent> stream = ConfigsGrpc.newBlockingStub(channel).watch(req);
    while (stream.hasNext()) {
      ConfigEvent ev = stream.next();
      if (ev.hasStart()) {
        listed(ev.getStart(), start, relist);
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
      Map<String, Document> now = new HashMap<>();
      reply.getDocumentsList().forEach(d -> now.put(d.getKey(), d));
      List<Event> events = new ArrayList<>();
      if (!relist) {
        reply.getDocumentsList().forEach(d -> events.add(new Event(d, "", true, reply.getIndex())));
      } else {
        now.forEach(
            (key, d) -> {
              Document before = known.get(key);
              if (before == null || before.getRevision() != d.getRevision()) {
                events.add(new Event(d, "", false, reply.getIndex()));
              }
            });
        known.keySet().stream()
            .filter(k -> !now.containsKey(k))
            .forEach(k -> events.add(new Event(null, k, false, reply.getIndex())));
      }
      known = now;
      at(reply.getIndex());
      tellAll(events);
    } finally {
      isListed();
    }
  }

  private void notice(ConfigNotice n) {
    List<Event> events = new ArrayList<>();
    for (Document d : n.getPutList()) {
      known.put(d.getKey(), d);
      events.add(new Event(d, "", false, n.getIndex()));
    }
    for (String key : n.getDeletedList()) {
      known.remove(key);
      events.add(new Event(null, key, false, n.getIndex()));
    }
    tellAll(events);
    at(n.getIndex());
  }
}
