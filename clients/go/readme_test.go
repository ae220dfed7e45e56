package beacon

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The README's quick start is examples/quickstart/main.go as it is, and it runs against a
// real beacon.
func TestTheReadmeQuickStartRunsAgainstABeacon(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile("examples/quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(code)+"```") {
		t.Fatal("README.md's quick start is not examples/quickstart/main.go: copy it in")
	}
	c := startCluster(t, 1, nil)
	cmd := exec.Command("go", "run", "./examples/quickstart")
	cmd.Env = append(os.Environ(), "BEACON_ENDPOINTS="+strings.Join(c.addrs, ","))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the quick start failed: %v\n%s", err, out)
	}
	for _, want := range []string{"node id", "present", "task photo-", "completed thumbnail of photo-42.jpg", "log_level info"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("the quick start did not say %q:\n%s", want, out)
		}
	}
}
