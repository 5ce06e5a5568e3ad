package ddblocal_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shopstream/shopstream/infra/local/ddblocal"
)

// TestStreamRecordsIndexed starts DynamoDB Local and finds its stream
// records indexed by the launcher: without the index each write to a table
// with a stream scans every stream's records (docs/local-stack.md).
func TestStreamRecordsIndexed(t *testing.T) {
	for _, dataDir := range []string{"", t.TempDir()} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		p, err := ddblocal.Start(ctx, ddblocal.Options{DataDir: dataDir})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if !p.StreamRecordsIndexed() {
			t.Errorf("data dir %q: stream records not indexed", dataDir)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestListensOnLoopbackOnly starts DynamoDB Local and finds its port closed
// on every address of the machine but 127.0.0.1 (docs/contract.md#1-local-stack): a request to
// a non-loopback address would reach the tables past the front.
func TestListensOnLoopbackOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := ddblocal.Start(ctx, ddblocal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	u, err := url.Parse(p.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 2*time.Second); err != nil {
		t.Fatalf("dial 127.0.0.1: %v", err)
	} else {
		c.Close()
	}

	checked := 0
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		checked++
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ipn.IP.String(), port), 2*time.Second)
		if err == nil {
			c.Close()
			t.Errorf("DynamoDB Local answers on %s:%s; want 127.0.0.1 only", ipn.IP, port)
			continue
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Logf("dial %s: %v", ipn.IP, err)
		}
	}
	// The kernel's own table of listening sockets says the same, where it
	// can be read (Linux).
	listens, err := listeners(port)
	if err == nil {
		checked++
		for _, local := range listens {
			if local != "127.0.0.1" {
				t.Errorf("a socket listens on %s:%s; want 127.0.0.1 only", local, port)
			}
		}
		if len(listens) == 0 {
			t.Errorf("no listening socket on port %s in /proc/net", port)
		}
	}
	if checked == 0 {
		t.Fatalf("no non-loopback address and no /proc/net: nothing could show a listener on another interface")
	}
}

// listeners reads the local addresses of the TCP sockets listening on port
// from /proc/net/tcp and tcp6 (IPv4-mapped addresses as IPv4).
func listeners(port string) ([]string, error) {
	n, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	want := fmt.Sprintf(":%04X", n)
	var out []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" || !strings.HasSuffix(fields[1], want) { // 0A: LISTEN
				continue
			}
			out = append(out, hexAddr(strings.TrimSuffix(fields[1], want)))
		}
	}
	return out, nil
}

// hexAddr decodes /proc/net's address: IPv4 as one little-endian word, IPv6
// as four.
func hexAddr(h string) string {
	b := make([]byte, len(h)/2)
	for i := range b {
		v, _ := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		b[i] = byte(v)
	}
	ip := make(net.IP, len(b))
	for w := 0; w+4 <= len(b); w += 4 {
		ip[w], ip[w+1], ip[w+2], ip[w+3] = b[w+3], b[w+2], b[w+1], b[w]
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.String()
}
