package lambdart

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// Tagged writes the output of a pool's processes to Out, each line a JSON
// object with Attrs first: on AWS a version's log lines land in log streams
// named for it, and locally a canary's lines and this tree's share one
// output, so the canary's say which build wrote them. Attrs is a JSON
// object's members without braces, such as "build":"656e3ba". A line that
// is not a JSON object (a panic's) is wrapped in one, as its "message". Each
// process writes through a writer of its own that passes whole lines, so
// two of the pool's processes never mix their lines; a line longer than
// maxLine is cut there, each piece a line of its own. A failed write of Out
// drops the line: the process never waits on its output.
type Tagged struct {
	Out   io.Writer
	Attrs string

	mu sync.Mutex
	// direct takes writes made to Tagged itself, not through a process.
	directMu sync.Mutex
	direct   *lineWriter
}

// Write tags what is written to t itself, line by line; its writers share
// one line buffer.
func (t *Tagged) Write(p []byte) (int, error) {
	t.directMu.Lock()
	defer t.directMu.Unlock()
	if t.direct == nil {
		t.direct = t.forProcess()
	}
	return t.direct.Write(p)
}

// forProcess is the writer of one process.
func (t *Tagged) forProcess() *lineWriter { return &lineWriter{t: t} }

// lineWriter keeps a process's partial line until its end arrives.
type lineWriter struct {
	t   *Tagged
	buf []byte
}

// maxLine bounds the partial line a process's writer keeps.
const maxLine = 256 << 10

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) > maxLine {
				w.t.line(append(w.buf, '\n'))
				w.buf = nil
			}
			return len(p), nil
		}
		w.t.line(w.buf[:i+1])
		w.buf = w.buf[i+1:]
	}
}

// flush passes a last line that ended without a newline.
func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.t.line(append(w.buf, '\n'))
		w.buf = nil
	}
}

// line writes one whole line (its newline included), tagged when it is a
// JSON object and wrapped in one when it is not.
func (t *Tagged) line(l []byte) {
	body := bytes.TrimRight(l, "\r\n")
	out := l
	switch {
	case t.Attrs == "" || len(bytes.TrimSpace(body)) == 0:
	case body[0] == '{' && json.Valid(body):
		rest := bytes.TrimLeft(body[1:], " \t\r\n")
		sep := ","
		if len(rest) > 0 && rest[0] == '}' {
			sep = ""
		}
		out = make([]byte, 0, len(body)+len(t.Attrs)+3)
		out = append(out, '{')
		out = append(out, t.Attrs...)
		out = append(out, sep...)
		out = append(out, body[1:]...)
		out = append(out, '\n')
	default:
		msg, _ := json.Marshal(string(body))
		out = make([]byte, 0, len(msg)+len(t.Attrs)+16)
		out = append(out, '{')
		out = append(out, t.Attrs...)
		out = append(out, `,"message":`...)
		out = append(out, msg...)
		out = append(out, "}\n"...)
	}
	t.write(out)
}

func (t *Tagged) write(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = t.Out.Write(b)
}
