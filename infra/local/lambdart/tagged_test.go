package lambdart

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Two processes' writers taking pieces of lines in turn: each line
// reaches the output whole, a JSON object's with the tags first, anything
// else (a panic's line, a line that only opens a brace) as it was, and a
// last line with no newline once its process ends.
func TestTaggedLinesStayWhole(t *testing.T) {
	var out bytes.Buffer
	tg := &Tagged{Out: &out, Attrs: `"functionVersion":"canary","build":"656e3ba"`}
	a, b := tg.forProcess(), tg.forProcess()
	for _, w := range []struct {
		w *lineWriter
		s string
	}{
		{a, `{"msg":"req`}, {b, `{"msg":"from b"}` + "\n" + `panic: x`}, {a, `uest"}` + "\n{}\n"}, {b, "\n{\n"}, {a, `{"msg":"last"}`},
	} {
		if _, err := w.w.Write([]byte(w.s)); err != nil {
			t.Fatal(err)
		}
	}
	a.flush()
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		`{"functionVersion":"canary","build":"656e3ba","msg":"from b"}`,
		`{"functionVersion":"canary","build":"656e3ba","msg":"request"}`,
		`{"functionVersion":"canary","build":"656e3ba"}`,
		`panic: x`,
		`{`,
		`{"functionVersion":"canary","build":"656e3ba","msg":"last"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range got {
		if strings.HasPrefix(l, "{") && l != "{" && !json.Valid([]byte(l)) {
			t.Errorf("not JSON: %s", l)
		}
	}
}
