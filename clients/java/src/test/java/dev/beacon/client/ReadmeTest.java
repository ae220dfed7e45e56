package dev.beacon.client;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** README.md's quick start is QuickStart.java as it is, and it runs against a real beacon. */
class ReadmeTest {
  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void theQuickStartRunsAgainstABeacon() throws Exception {
    String readme = Files.readString(Path.of("README.md"));
    String code = Files.readString(Path.of("src/test/java/dev/beacon/client/QuickStart.java"));
    assertTrue(readme.contains("```java\n" + code + "```"), "README.md's quick start is not QuickStart.java: copy it in");
    try (Beacons b = new Beacons(1, Map.of())) {
      ProcessBuilder pb =
          new ProcessBuilder(
              Path.of(System.getProperty("java.home"), "bin", "java").toString(),
              "-cp",
              System.getProperty("java.class.path"),
              "dev.beacon.client.QuickStart");
      pb.environment().put("BEACON_ENDPOINTS", String.join(",", b.addrs));
      pb.redirectErrorStream(true);
      Process p = pb.start();
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      p.getInputStream().transferTo(out);
      assertTrue(p.waitFor(50, TimeUnit.SECONDS), "the quick start ended");
      String said = out.toString(StandardCharsets.UTF_8);
      assertTrue(p.exitValue() == 0, "the quick start failed:\n" + said);
      for (String want : new String[] {"node id", "present", "order ", "log_level info"}) {
        assertTrue(said.contains(want), "the quick start did not say `" + want + "`:\n" + said);
      }
    }
  }

}
