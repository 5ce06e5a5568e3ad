package endpoints_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// snapshot lists every file under dir with its size and modification time.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = strconv.FormatInt(info.Size(), 10) + "@" + info.ModTime().Format(time.RFC3339Nano)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOneStackPerDataDir: a second stack on a DATA_DIR in use refuses with a
// clear error before it touches a file; once the first stops, a stack
// starts on it again.
func TestOneStackPerDataDir(t *testing.T) {
	dir := t.TempDir()
	cfg := endpoints.Config{DataDir: dir, DynamoDBUpstream: stacktest.Stack(t).Upstream(), TTLSweepInterval: -1}
	first, err := endpoints.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	if len(before) < 2 {
		t.Fatalf("the first stack wrote %v under DATA_DIR; want its lock and its files", before)
	}
	time.Sleep(20 * time.Millisecond) // a write by the second stack would show in a modification time

	second, err := endpoints.Start(context.Background(), cfg)
	if err == nil {
		second.Close()
		t.Fatal("a second stack started on the same DATA_DIR")
	}
	if !errors.Is(err, endpoints.ErrDataDirInUse) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Errorf("got %v, want ErrDataDirInUse naming the holder's pid %d", err, os.Getpid())
	}
	after := snapshot(t, dir)
	for p, v := range before {
		if after[p] != v {
			t.Errorf("%s changed under the first stack: %s -> %s", p, v, after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("the refused stack created %s", p)
		}
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := endpoints.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start after the first stopped: %v", err)
	}
	again.Close()
}
