package search

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
)

// serveDirEnv makes the test binary a bare search server on a data dir, so
// a test can kill it with SIGKILL.
const serveDirEnv = "SHOPSTREAM_SEARCH_SERVE_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(serveDirEnv); dir != "" {
		os.Exit(serveForever(dir))
	}
	os.Exit(m.Run())
}

func serveForever(dir string) int {
	srv, err := New(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ln.Addr().String())
	err = http.Serve(ln, srv)
	fmt.Fprintln(os.Stderr, err)
	return 1
}

func TestSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start server process: %v", err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addr <- strings.TrimSpace(line)
	}()
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatalf("server process did not report its address")
	}
	client, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{url}}})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	h := &harness{url: url, client: client}
	h.seed(t)
	var nd strings.Builder
	for i := range 200 {
		fmt.Fprintf(&nd, `{"index":{"_id":"k%d","version":%d,"version_type":"external"}}`+"\n"+`{"name":"item %d","priceCents":%d}`+"\n", i, 100+i, i, i)
	}
	nd.WriteString(`{"delete":{"_id":"k0","version":1000,"version_type":"external"}}` + "\n")
	if resp := h.bulk(t, "products", nd.String()); resp.Errors {
		t.Fatalf("bulk: got errors")
	}
	if _, err := client.Index(context.Background(), opensearchapi.IndexReq{Index: "products", DocumentID: "last", Body: strings.NewReader(`{"name":"acknowledged just before the kill"}`)}); err != nil {
		t.Fatalf("index last: %v", err)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	_ = cmd.Wait()
	killed = true

	srv, err := New(dir, nil)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	h = serve(t, srv)
	resp := h.search(t, "products", `{"query":{"match_all":{}},"size":0}`)
	if got, want := resp.Hits.Total.Value, len(catalogue())+200-1+1; got != want {
		t.Errorf("documents after kill: got %v, want %v", got, want)
	}
	doc, err := h.client.Document.Get(context.Background(), opensearchapi.DocumentGetReq{Index: "products", DocumentID: "k199"})
	if err != nil || doc.Version != 299 {
		t.Errorf("k199 after kill: got v%d %v, want v299", doc.Version, err)
	}
	// The delete of k0 is forgotten, as OpenSearch forgets the deletes a
	// restarted or moved shard had flushed (its tombstones live in memory):
	// an older version of it is a document again.
	if got := itemOf(t, h.bulk(t, "products", `{"index":{"_id":"k0","version":999,"version_type":"external"}}`+"\n{}\n").Items[0]).Status; got != http.StatusCreated {
		t.Errorf("write of k0 at a version below its delete, after a kill: got %v, want %v (the tombstone forgotten)", got, http.StatusCreated)
	}
}
