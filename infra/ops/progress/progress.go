// Package progress shows how far a long operator command has come: named
// counters, printed as one line every few seconds and once at the end.
package progress

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Meter counts work by name and prints it periodically. A nil *Meter counts
// nothing and prints nothing.
type Meter struct {
	out   io.Writer
	what  string
	start time.Time

	mu     sync.Mutex
	counts map[string]int64
	// writing serializes the lines: the periodic one and Note's come from
	// two goroutines.
	writing sync.Mutex
	stop    chan struct{}
	done    chan struct{}
}

// Start returns a meter that prints "<what>: name n, … (elapsed)" to out every
// interval until Stop.
func Start(out io.Writer, what string, interval time.Duration) *Meter {
	m := &Meter{out: out, what: what, start: time.Now(), counts: map[string]int64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.print(false)
			}
		}
	}()
	return m
}

// Add counts n more of name.
func (m *Meter) Add(name string, n int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.counts[name] += n
	m.mu.Unlock()
}

// Note prints a line at once, between the periodic ones.
func (m *Meter) Note(format string, args ...any) {
	if m == nil {
		return
	}
	m.line(fmt.Sprintf(format, args...))
}

func (m *Meter) line(text string) {
	m.writing.Lock()
	defer m.writing.Unlock()
	fmt.Fprintf(m.out, "%s: %s (%s)\n", m.what, text, time.Since(m.start).Round(time.Millisecond))
}

// Stop prints the final counts, if anything was counted, and stops the meter.
func (m *Meter) Stop() {
	if m == nil {
		return
	}
	close(m.stop)
	<-m.done
	m.print(true)
}

// print writes the counts; with nothing counted, a periodic line says so
// (the command is alive) and the final one is left out.
func (m *Meter) print(final bool) {
	m.mu.Lock()
	names := make([]string, 0, len(m.counts))
	for n := range m.counts {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m.counts[n])
	}
	m.mu.Unlock()
	if len(parts) == 0 {
		if final {
			return
		}
		parts = []string{"nothing counted yet"}
	}
	m.line(strings.Join(parts, ", "))
}
