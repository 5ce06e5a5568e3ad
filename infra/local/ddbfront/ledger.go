package ddbfront

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The ledger remembers the deletions the sweeper made, so that the REMOVE
// records they produce can be told from a user's delete of the same key. An
// entry is written (and, with a data dir, synced) before the delete, settled
// after it, and bound to the stream record's sequence number the first time a
// reader sees that record; from then on that record, and only it, carries the
// service identity, for every reader and after a restart.

type entryState string

const (
	statePending   entryState = "pending"
	stateDeleted   entryState = "deleted"
	stateCancelled entryState = "cancelled"
)

// retention bounds the ledger: stream records live 24 hours.
const retention = 25 * time.Hour

type ledgerEntry struct {
	ID        int64      `json:"id"`
	Op        string     `json:"op"`
	StreamArn string     `json:"streamArn,omitempty"`
	Table     string     `json:"table,omitempty"`
	Key       string     `json:"key,omitempty"`
	At        time.Time  `json:"at,omitzero"`
	State     entryState `json:"state,omitempty"`
	Seq       string     `json:"seq,omitempty"`
	// After is the stream's last sequence number before the delete.
	After string `json:"after,omitempty"`
}

type ledger struct {
	mu      sync.Mutex
	settled *sync.Cond
	nextID  int64
	entries map[int64]*ledgerEntry
	byKey   map[string][]*ledgerEntry // streamArn + key
	bySeq   map[string]bool           // streamArn + seq
	file    *os.File
	w       *bufio.Writer
}

func openLedger(dir string) (*ledger, error) {
	l := &ledger{entries: map[int64]*ledgerEntry{}, byKey: map[string][]*ledgerEntry{}, bySeq: map[string]bool{}}
	l.settled = sync.NewCond(&l.mu)
	if dir == "" {
		return l, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open ttl ledger: %w", err)
	}
	path := filepath.Join(dir, "ttl-ledger.jsonl")
	if err := l.replay(path); err != nil {
		return nil, err
	}
	// Rewrite the file with what is still live, so it does not grow forever.
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("compact ttl ledger: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, e := range l.entries {
		rec := *e
		rec.Op = "put"
		if err := enc.Encode(rec); err != nil {
			f.Close()
			return nil, fmt.Errorf("compact ttl ledger: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, fmt.Errorf("compact ttl ledger: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("compact ttl ledger: %w", err)
	}
	f.Close()
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("compact ttl ledger: %w", err)
	}
	l.file, err = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open ttl ledger: %w", err)
	}
	l.w = bufio.NewWriter(l.file)
	return l, nil
}

func (l *ledger) replay(path string) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ttl ledger: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	cutoff := time.Now().Add(-retention)
	for sc.Scan() {
		var rec ledgerEntry
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue // a torn last line after a crash
		}
		if rec.ID >= l.nextID {
			l.nextID = rec.ID + 1
		}
		switch rec.Op {
		case "put":
			e := rec
			l.index(&e)
		case "state":
			if e := l.entries[rec.ID]; e != nil {
				e.State = rec.State
			}
		case "seq":
			if e := l.entries[rec.ID]; e != nil {
				e.Seq = rec.Seq
				l.bySeq[e.StreamArn+"\x00"+rec.Seq] = true
			}
		}
	}
	for id, e := range l.entries {
		if e.At.Before(cutoff) || e.State == stateCancelled {
			l.drop(id)
		}
	}
	return nil
}

func (l *ledger) index(e *ledgerEntry) {
	l.entries[e.ID] = e
	k := e.StreamArn + "\x00" + e.Key
	l.byKey[k] = append(l.byKey[k], e)
	if e.Seq != "" {
		l.bySeq[e.StreamArn+"\x00"+e.Seq] = true
	}
}

func (l *ledger) drop(id int64) {
	e := l.entries[id]
	delete(l.entries, id)
	k := e.StreamArn + "\x00" + e.Key
	list := l.byKey[k]
	for i, x := range list {
		if x == e {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(l.byKey, k)
	} else {
		l.byKey[k] = list
	}
	if e.Seq != "" {
		delete(l.bySeq, e.StreamArn+"\x00"+e.Seq)
	}
}

func (l *ledger) write(sync bool, recs ...ledgerEntry) error {
	if l.w == nil {
		return nil
	}
	enc := json.NewEncoder(l.w)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("write ttl ledger: %w", err)
		}
	}
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("write ttl ledger: %w", err)
	}
	if sync {
		if err := l.file.Sync(); err != nil {
			return fmt.Errorf("sync ttl ledger: %w", err)
		}
	}
	return nil
}

// begin records the deletions about to be made; they are durable when it returns.
func (l *ledger) begin(streamArn, table string, keys []string, at time.Time, after string) ([]*ledgerEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*ledgerEntry, len(keys))
	recs := make([]ledgerEntry, len(keys))
	for i, k := range keys {
		e := &ledgerEntry{ID: l.nextID, Op: "put", StreamArn: streamArn, Table: table, Key: k, At: at, State: statePending, After: after}
		l.nextID++
		l.index(e)
		out[i], recs[i] = e, *e
	}
	return out, l.write(true, recs...)
}

// settle records each deletion's outcome and wakes readers waiting on it.
func (l *ledger) settle(entries []*ledgerEntry, deleted []bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := make([]ledgerEntry, 0, len(entries))
	for i, e := range entries {
		e.State = stateCancelled
		if deleted[i] {
			e.State = stateDeleted
		}
		recs = append(recs, ledgerEntry{ID: e.ID, Op: "state", State: e.State})
	}
	err := l.write(true, recs...)
	for _, e := range entries {
		if e.State == stateCancelled {
			l.drop(e.ID)
		}
	}
	l.settled.Broadcast()
	return err
}

// pending returns the entries whose outcome is unknown (after a crash).
func (l *ledger) pending() []*ledgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*ledgerEntry
	for _, e := range l.entries {
		if e.State == statePending {
			out = append(out, e)
		}
	}
	return out
}

// isSweep reports whether the REMOVE record with this sequence number and key
// was caused by the sweeper, binding the record to a ledger entry the first
// time it is seen: the first REMOVE of the key after the stream position the
// sweeper noted before deleting. It waits (briefly) for deletions of the same
// key whose outcome is not yet known.
func (l *ledger) isSweep(streamArn, key, seq string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Checked on every turn: another reader of the same record (a second
		// mapping on the stream, a concurrent lane) may have bound it while
		// this one waited for the deletion's outcome.
		if l.bySeq[streamArn+"\x00"+seq] {
			return true
		}
		var candidate *ledgerEntry
		waiting := false
		for _, e := range l.byKey[streamArn+"\x00"+key] {
			switch {
			case e.State == statePending:
				waiting = true
			case e.State == stateDeleted && e.Seq == "" && seqLess(e.After, seq) &&
				(candidate == nil || e.ID < candidate.ID):
				candidate = e
			}
		}
		if candidate != nil {
			candidate.Seq = seq
			l.bySeq[streamArn+"\x00"+seq] = true
			_ = l.write(false, ledgerEntry{ID: candidate.ID, Op: "seq", Seq: seq})
			return true
		}
		if !waiting || time.Now().After(deadline) {
			return false
		}
		timer := time.AfterFunc(50*time.Millisecond, l.settled.Broadcast)
		l.settled.Wait()
		timer.Stop()
	}
}

func (l *ledger) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	err := l.w.Flush()
	if cerr := l.file.Close(); err == nil {
		err = cerr
	}
	l.file, l.w = nil, nil
	return err
}

// keyPart is one key attribute in canonical form.
type keyPart struct {
	Name, Type, Value string
}

// canonicalKey renders key attributes (S, N or B) the same way whether they
// come from an SDK item or from a stream record's JSON.
func canonicalKey(parts []keyPart) string {
	sort.Slice(parts, func(i, j int) bool { return parts[i].Name < parts[j].Name })
	b, _ := json.Marshal(parts)
	return string(b)
}

func keyFromItem(item map[string]types.AttributeValue, names []string) (string, bool) {
	parts := make([]keyPart, 0, len(names))
	for _, n := range names {
		switch v := item[n].(type) {
		case *types.AttributeValueMemberS:
			parts = append(parts, keyPart{n, "S", v.Value})
		case *types.AttributeValueMemberN:
			parts = append(parts, keyPart{n, "N", v.Value})
		case *types.AttributeValueMemberB:
			parts = append(parts, keyPart{n, "B", base64.StdEncoding.EncodeToString(v.Value)})
		default:
			return "", false
		}
	}
	return canonicalKey(parts), true
}

func keyFromJSON(keys map[string]map[string]json.RawMessage) (string, bool) {
	parts := make([]keyPart, 0, len(keys))
	for n, av := range keys {
		if len(av) != 1 {
			return "", false
		}
		for t, raw := range av {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return "", false
			}
			parts = append(parts, keyPart{n, t, s})
		}
	}
	return canonicalKey(parts), true
}

func itemFromKey(key string) (map[string]types.AttributeValue, error) {
	var parts []keyPart
	if err := json.Unmarshal([]byte(key), &parts); err != nil {
		return nil, fmt.Errorf("decode ledger key: %w", err)
	}
	item := map[string]types.AttributeValue{}
	for _, p := range parts {
		switch p.Type {
		case "S":
			item[p.Name] = &types.AttributeValueMemberS{Value: p.Value}
		case "N":
			item[p.Name] = &types.AttributeValueMemberN{Value: p.Value}
		case "B":
			b, err := base64.StdEncoding.DecodeString(p.Value)
			if err != nil {
				return nil, fmt.Errorf("decode ledger key: %w", err)
			}
			item[p.Name] = &types.AttributeValueMemberB{Value: b}
		}
	}
	return item, nil
}
