package beacon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"example.invalid/beacon/clients/go/pb/beaconpb"
)

// beaconBin is $BEACON_BIN, else the repository's target/debug/beacon.
func beaconBin(t *testing.T) string {
	if b := os.Getenv("BEACON_BIN"); b != "" {
		return b
	}
	b, err := filepath.Abs("../../target/debug/beacon")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b); err != nil {
		t.Fatalf("no beacon binary at %s: build it (cargo build) or set BEACON_BIN", b)
	}
	return b
}

// freePorts: n loopback ports free a moment ago, from $BEACON_TEST_PORTS (LOW-HIGH) when
// it is set, as the Rust test kit reads it.
func freePorts(t *testing.T, n int) []int {
	low, high := 0, 0
	if r := os.Getenv("BEACON_TEST_PORTS"); r != "" {
		parts := strings.SplitN(r, "-", 2)
		low, _ = strconv.Atoi(parts[0])
		if len(parts) == 2 {
			high, _ = strconv.Atoi(parts[1])
		}
		if low < 1024 || high < low+100 {
			t.Fatalf("BEACON_TEST_PORTS=%s: at least 100 ports from 1024", r)
		}
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for tries := 0; len(ls) < n; tries++ {
		if tries > 10_000 {
			t.Fatalf("no %d free ports", n)
		}
		port := 0
		if low > 0 {
			port = low + rand.IntN(high-low-88)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ls = append(ls, l)
	}
	ports := make([]int, n)
	for i, l := range ls {
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// cluster is n real beacons on loopback (quorum mode from 3), tick 100 ms.
type cluster struct {
	t     *testing.T
	dir   string
	addrs []string
	procs []*exec.Cmd
	confs []string
}

func startCluster(t *testing.T, n int, extra map[string]any) *cluster {
	t.Helper()
	bin := beaconBin(t)
	c := &cluster{t: t, dir: t.TempDir(), procs: make([]*exec.Cmd, n)}
	ports := freePorts(t, n)
	for _, p := range ports {
		c.addrs = append(c.addrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	for i, p := range ports {
		conf := map[string]any{
			"cluster":  "gotest",
			"node":     c.addrs[i],
			"beacon":   c.addrs,
			"tick_ms":  100,
			"data_dir": filepath.Join(c.dir, fmt.Sprintf("data-%d", p)),
			"admin":    "off",
		}
		for k, v := range extra {
			conf[k] = v
		}
		path := filepath.Join(c.dir, fmt.Sprintf("beacon-%d.json", p))
		b, _ := json.Marshal(conf)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		c.confs = append(c.confs, path)
	}
	for i := range ports {
		c.start(i, bin)
	}
	t.Cleanup(c.close)
	c.leader()
	return c
}

func (c *cluster) start(i int, bin string) {
	log, err := os.OpenFile(filepath.Join(c.dir, filepath.Base(c.confs[i])+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", c.confs[i])
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "RUST_LOG=warn")
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.procs[i] = cmd
}

func (c *cluster) kill(i int) {
	if p := c.procs[i]; p != nil && p.ProcessState == nil {
		p.Process.Signal(syscall.SIGCONT)
		p.Process.Kill()
		p.Wait()
	}
}

func (c *cluster) stop(i int) { c.procs[i].Process.Signal(syscall.SIGSTOP) }
func (c *cluster) cont(i int) { c.procs[i].Process.Signal(syscall.SIGCONT) }

func (c *cluster) close() {
	for i := range c.procs {
		c.kill(i)
	}
	if c.t.Failed() {
		c.t.Log(c.logs())
	}
}

// logs is every beacon's log's tail.
func (c *cluster) logs() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(c.dir, "*.log"))
	for _, f := range files {
		text, _ := os.ReadFile(f)
		if len(text) > 3000 {
			text = text[len(text)-3000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(f), text)
	}
	return b.String()
}

// leader is the index of the beacon that leads and can write, as a live beacon says.
func (c *cluster) leader() int {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for i, at := range c.addrs {
			if c.procs[i].ProcessState != nil {
				continue
			}
			s, err := beaconStatus(at)
			if err != nil || s.Leader == nil || s.CannotWrite != nil {
				continue
			}
			for j, a := range c.addrs {
				if a == s.GetLeader() {
					return j
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("no leader\n%s", c.logs())
	return -1
}

// beaconStatus is one beacon's own view, asked of it alone.
func beaconStatus(at string) (*beaconpb.BeaconStatus, error) {
	cl, err := New(Config{Endpoints: []string{at}, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	conn, err := cl.conn(at)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return beaconpb.NewClusterClient(conn).Status(ctx, &beaconpb.BeaconStatusRequest{}, grpc.WaitForReady(true))
}

func (c *cluster) client(t *testing.T, first ...string) *Client {
	t.Helper()
	endpoints := append([]string{}, first...)
	for _, a := range c.addrs {
		if !contains(endpoints, a) {
			endpoints = append(endpoints, a)
		}
	}
	cfg := Config{Endpoints: endpoints, RetryFor: 20 * time.Second}
	if os.Getenv("BEACON_GO_DEBUG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
