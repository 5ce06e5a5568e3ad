package lambdart_test

import (
	"bytes"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/local/lambdart"
)

// TestRunPassesExactlyTheGivenEnvironment runs env(1) as the "function": it
// prints what it was given, which must be the caller's list and the Runtime
// API's address, nothing of the test process's own environment.
func TestRunPassesExactlyTheGivenEnvironment(t *testing.T) {
	bin, err := exec.LookPath("env")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHOPSTREAM_HOST_ONLY", "must not reach the function")
	rt, err := lambdart.Start("shopstream-test-env", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var out bytes.Buffer
	p, err := rt.Run(bin, []string{"A=1", "B="}, &out)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	sort.Strings(got)
	want := []string{"A=1", "AWS_LAMBDA_RUNTIME_API=" + rt.Addr(), "B="}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("environment (-want +got):\n%s", d)
	}
}
