package system_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/local/system"
)

// syncBuffer is a log destination safe for the system's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// uniqueKeys walks one JSON value token by token and returns an error for a
// key that appears twice in one object (encoding/json keeps the last one
// silently; strict parsers and log pipelines refuse the line).
func uniqueKeys(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key := k.(string)
			if seen[key] {
				return fmt.Errorf("key %q twice in %s", key, path)
			}
			seen[key] = true
			if err := uniqueKeys(dec, path+"."+key); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := uniqueKeys(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

// checkLine says what is wrong with one log line: not a single JSON object,
// or a key twice in an object.
func checkLine(line string) error {
	dec := json.NewDecoder(strings.NewReader(line))
	if !strings.HasPrefix(line, "{") {
		return fmt.Errorf("not a JSON object")
	}
	if err := uniqueKeys(dec, "$"); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("more after the object")
	}
	return nil
}

func TestCheckLine(t *testing.T) {
	for _, tt := range []struct {
		line string
		ok   bool
	}{
		{`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`, true},
		{`{"function":"counters","msg":"batch","function":"counters"}`, false},
		{`{"a":{"b":1,"b":2}}`, false},
		{`{"a":[{"b":1,"b":2}]}`, false},
		{`{"a":1} {"b":2}`, false},
		{`[1]`, false},
		{`{"a":`, false},
	} {
		if err := checkLine(tt.line); (err == nil) != tt.ok {
			t.Errorf("%s: got %v, want ok %v", tt.line, err, tt.ok)
		}
	}
}

// TestLogLinesAreJSONWithUniqueKeys runs the system with `make run`'s logger
// (JSON lines, here at debug level) through a product, a user, an order, a
// refused token and the stream processors' batches, and parses every line
// the run writes: each is one JSON object with no key twice.
func TestLogLinesAreJSONWithUniqueKeys(t *testing.T) {
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	prefix := stacktest.OwnPrefix(t)
	sys, err := system.Start(context.Background(), system.Config{
		Stack: endpoints.Config{
			DynamoDBUpstream: stacktest.Stack(t).Upstream(),
			TTLSweepInterval: time.Second,
			SweepTables:      func(name string) bool { return strings.HasPrefix(name, prefix) },
			Logger:           logger,
		},
		TablePrefix:  prefix,
		PollInterval: 100 * time.Millisecond,
		Logger:       logger,
	})
	if err != nil {
		t.Fatalf("start system: %v", err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			sys.Close()
		}
	})
	c := client{t, sys.APIURL}
	pid := setup(t, c, "Kettle", 10)
	c.must(201, "POST", "/users", "u1", map[string]any{"name": "U One"}, nil)
	c.must(201, "POST", "/users/u1/orders", "u1", map[string]any{"items": []map[string]any{{"productId": pid, "quantity": 2}}}, nil)
	req, _ := http.NewRequest("GET", sys.APIURL+"/users/u1", nil)
	req.Header.Set("Authorization", "Bearer not-a-token")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	eventually(t, "the order counted and the product indexed", func() string {
		var u user
		var p product
		c.must(200, "GET", "/users/u1", "u1", nil, &u)
		c.must(200, "GET", "/products/"+pid, "", nil, &p)
		if u.OrderCount != 1 || p.UnitsSold != 2 {
			return fmt.Sprintf("got orderCount %d, unitsSold %d; want 1, 2", u.OrderCount, p.UnitsSold)
		}
		var res struct{ Items []any }
		c.must(200, "GET", "/search?q=kettle", "", nil, &res)
		if len(res.Items) != 1 {
			return fmt.Sprintf("search: %d hits, want 1", len(res.Items))
		}
		return ""
	})
	closed = true
	if err := sys.Close(); err != nil {
		t.Fatalf("close system: %v", err)
	}

	batches := map[string]int{}
	lines, unauthorized := 0, 0
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines++
		line := sc.Text()
		if err := checkLine(line); err != nil {
			t.Errorf("log line %d: %v: %s", lines, err, line)
			continue
		}
		var fields struct{ Msg, Function string }
		json.Unmarshal([]byte(line), &fields)
		switch fields.Msg {
		case "batch":
			batches[fields.Function]++
		case "unauthorized":
			unauthorized++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// The run must have logged what the check is about: the stream
	// processors' batch lines and the gateway's refusal.
	for _, fn := range []string{"counters", "stream-indexer"} {
		if batches[fn] == 0 {
			t.Errorf("no batch line of %s among %d lines (batches %v)", fn, lines, batches)
		}
	}
	if unauthorized != 1 {
		t.Errorf("got %d unauthorized lines, want 1", unauthorized)
	}
	t.Logf("%d log lines, batch lines %v", lines, batches)
}
