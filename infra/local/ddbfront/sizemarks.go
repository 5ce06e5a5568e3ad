package ddbfront

import "time"

// A read that AWS charges by the whole item (a projected GetItem or
// BatchGetItem, a TransactGetItems, a PartiQL read of one item) is charged
// by the item as the front finds it after the answer: its image, or a read
// of its own. A write of the item between the read and that charge may have
// shrunk it, and the charge would then be less than AWS's. So each write
// marks, at its start and at its end, the largest size the item may have had
// around it (every item it may find before, and what it makes of each), and
// such a read is charged at least the largest mark since its admission.

// markWindow is how long a mark is kept: far longer than a read waits for
// its answer.
const markWindow = time.Minute

// sizeMark is the largest size an item may have had around one write, at
// one instant.
type sizeMark struct {
	at   time.Time
	size int
}

// markSize records a mark of item id. Callers hold l.mu.
func (l *limiter) markSize(id string, size int, now time.Time) {
	if size <= 0 {
		return
	}
	if l.marks == nil {
		l.marks = map[string][]sizeMark{}
	}
	if len(l.marks) >= maxImages || (len(l.marks) >= 1024 && now.Sub(l.marksPruned) >= time.Second) {
		for id, ms := range l.marks {
			if now.Sub(ms[len(ms)-1].at) >= markWindow {
				delete(l.marks, id)
			}
		}
		l.marksPruned = now
		if len(l.marks) >= maxImages {
			// A burst of fresh writes: keep the bound. A read charged
			// while its item's marks are gone is charged as before.
			clear(l.marks)
		}
	}
	ms := l.marks[id]
	cut := 0
	for cut < len(ms) && now.Sub(ms[cut].at) >= markWindow {
		cut++
	}
	l.marks[id] = append(ms[cut:], sizeMark{at: now, size: size})
}

// largestSince is the largest mark of item id at or after since (0: none).
func (l *limiter) largestSince(id string, since time.Time) int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	largest := 0
	for _, m := range l.marks[id] {
		if !m.at.Before(since) {
			largest = max(largest, m.size)
		}
	}
	return largest
}
