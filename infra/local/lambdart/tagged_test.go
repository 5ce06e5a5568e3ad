package lambdart

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Two processes' writers taking pieces of lines in turn: each line
// reaches the output whole, a JSON object's with the tags first, any other
// (a panic's, a line that only opens a brace) wrapped in a tagged object,
// a line past maxLine cut into lines of its own, and a last line with no
// newline once its process ends. Every line out is JSON.
func TestTaggedLinesStayWhole(t *testing.T) {
	var out bytes.Buffer
	const attrs = `"functionVersion":"canary","build":"656e3ba"`
	tg := &Tagged{Out: &out, Attrs: attrs}
	a, b := tg.forProcess(), tg.forProcess()
	long := strings.Repeat("x", maxLine+10)
	for _, w := range []struct {
		w *lineWriter
		s string
	}{
		{a, `{"msg":"req`}, {b, `{"msg":"from b"}` + "\n" + `panic: x`}, {a, `uest"}` + "\r\n{}\n"}, {b, "\n{\n"},
		{a, long}, {b, `{"msg":"after"}` + "\n"}, {a, "\n"}, {a, `{"msg":"last"}`},
	} {
		if _, err := w.w.Write([]byte(w.s)); err != nil {
			t.Fatal(err)
		}
	}
	a.flush()
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		`{` + attrs + `,"msg":"from b"}`,
		`{` + attrs + `,"msg":"request"}`,
		`{` + attrs + `}`,
		`{` + attrs + `,"message":"panic: x"}`,
		`{` + attrs + `,"message":"{"}`,
		`{` + attrs + `,"message":"` + long[:maxLine+10] + `"}`,
		`{` + attrs + `,"msg":"after"}`,
		``,
		`{` + attrs + `,"msg":"last"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%.2000s\nwant:\n%.2000s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range got {
		if l != "" && !json.Valid([]byte(l)) {
			t.Errorf("not JSON: %.200s", l)
		}
	}
}

// A writer that fails drops the line and keeps taking the process's
// output, so the process never blocks on it.
func TestTaggedDropsWhatItCannotWrite(t *testing.T) {
	tg := &Tagged{Out: failingWriter{}, Attrs: `"build":"x"`}
	w := tg.forProcess()
	p := []byte("{}\nline\n")
	if n, err := w.Write(p); err != nil || n != len(p) {
		t.Fatalf("write: %d, %v; want %d, nil", n, err, len(p))
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }
