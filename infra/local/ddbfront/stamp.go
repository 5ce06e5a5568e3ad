package ddbfront

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Creation times of stream records.
//
// DynamoDB Local reports a record's dynamodb.ApproximateCreationDateTime
// floored to the minute; DynamoDB Streams floors it to the second (StreamRecord
// in the DynamoDB Streams API reference). Every write the front passes on
// starts a pass of the follower (position.go) over its table's stream, in the
// background. The pass's start is fixed when DynamoDB Local has answered the
// first write it serves, before the client has that answer, and the records
// the pass finds for the first time get its second: they were written before
// it and, as the pass follows the write at once, within milliseconds of it.
// When writes overlap, a pass may also find the record of a write DynamoDB
// Local answered after the pass started, and give it the second before, by
// those milliseconds. Each shard keeps a list of boundaries (sequence number,
// second), one appended whenever the second changes.
//
// Records that were in a stream before the follower first read it (the front
// restarted, a write that bypassed the front) are unknown and keep DynamoDB
// Local's minute. With a data dir the boundaries are kept in
// stream-stamps.jsonl, so a restarted front still knows what it saw.

// unknown is the second of records whose creation the follower did not see.
const unknown = 0

// boundary says that a shard's records from seq on, up to the next boundary,
// have second sec (Unix): the start of the pass that first found them.
type boundary struct {
	seq string
	sec int64
	// at is the Unix second the boundary was made, which pruning goes by.
	at int64
}

// note records that a pass has found seq for the first time and gives it
// second sec, and returns the boundary it made, if any.
func (sh *shardPos) note(seq string, sec, now int64) (boundary, bool) {
	sh.last = seq
	if n := len(sh.stamps); n > 0 && sh.stamps[n-1].sec == sec {
		return boundary{}, false
	}
	b := boundary{seq: seq, sec: sec, at: now}
	sh.stamps = append(sh.stamps, b)
	sh.prune(now - int64(retention/time.Second))
	return b, true
}

// prune drops the boundaries whose records were all found before cutoff:
// those records have left the stream (it keeps them 24 hours, retention is 25).
func (sh *shardPos) prune(cutoff int64) {
	i := 0
	for i+1 < len(sh.stamps) && sh.stamps[i+1].at < cutoff {
		i++
	}
	if i > 0 {
		sh.stamps = append([]boundary(nil), sh.stamps[i:]...)
	}
}

// stampOf returns record seq's second (unknown if it was there before the
// follower), and whether the follower has read the shard that far.
func (sh *shardPos) stampOf(seq string) (sec int64, covered bool) {
	if sh.last == "" || seqLess(sh.last, seq) {
		return unknown, false
	}
	i := sort.Search(len(sh.stamps), func(i int) bool { return seqLess(seq, sh.stamps[i].seq) })
	if i == 0 {
		return unknown, true
	}
	return sh.stamps[i-1].sec, true
}

// restamp returns sec in the form DynamoDB Local gives creation times (epoch
// seconds as a JSON number with three decimals, "1795452420.000"), if local,
// DynamoDB Local's value, is sec's minute. A write across a minute's end,
// stamped by Local in the minute before the one whose first second the
// follower gave it, was written in that minute's last second (and one the
// follower gave a minute's last second, stamped by Local in the next, in
// the next's first second). Otherwise the
// follower's second and DynamoDB Local disagree (a clock step, a write that
// bypassed the front) and Local's value stands.
func restamp(local json.RawMessage, sec int64) (json.RawMessage, bool) {
	v, err := strconv.ParseFloat(string(local), 64)
	if err != nil || v != math.Trunc(v) {
		return nil, false
	}
	switch minute := sec - sec%60; {
	case int64(v) == minute:
	case sec%60 == 0 && int64(v) == minute-60:
		sec--
	case sec%60 == 59 && int64(v) == minute+60:
		sec++ // the other way round: Local stamped it in the next minute's first second
	default:
		return nil, false
	}
	return json.RawMessage(strconv.FormatInt(sec, 10) + ".000"), true
}

// shardOfIterator reads the shard id out of a DynamoDB Local shard iterator:
// the stream ARN, "|001|", then the base64 of "SHARD_ID|SEQUENCE|TIME".
func shardOfIterator(it string) string {
	parts := strings.SplitN(it, "|", 3)
	if len(parts) != 3 {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(parts[2]); err != nil {
			return ""
		}
	}
	id, _, _ := strings.Cut(string(raw), "|")
	return id
}

// stampLine is one line of stream-stamps.jsonl: a boundary, or (Through) the
// last record a shard had been read to when the front stopped.
type stampLine struct {
	Stream  string `json:"stream"`
	Shard   string `json:"shard"`
	Seq     string `json:"seq,omitempty"`
	Sec     int64  `json:"sec,omitempty"`
	At      int64  `json:"at,omitempty"`
	Through string `json:"through,omitempty"`
}

// stampLog keeps the boundaries on disk. Lines are written after each pass
// and not synced: a boundary lost in a crash leaves its records unknown,
// which is what the replay assumes of the last boundary of every shard that
// has no Through line after it.
type stampLog struct {
	mu      sync.Mutex
	file    *os.File
	w       *bufio.Writer
	pending []stampLine
}

// openStampLog reads the boundaries kept in dir, rewrites the file with what
// is still live and opens it for appending. With dir "" nothing is kept.
func openStampLog(dir string, now time.Time) (*stampLog, map[string]map[string]*shardPos, error) {
	l := &stampLog{}
	loaded := map[string]map[string]*shardPos{}
	if dir == "" {
		return l, loaded, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("open stream stamps: %w", err)
	}
	path := filepath.Join(dir, "stream-stamps.jsonl")
	if err := replayStamps(path, loaded, now); err != nil {
		return nil, nil, err
	}
	if err := compactStamps(path, loaded); err != nil {
		return nil, nil, fmt.Errorf("compact stream stamps: %w", err)
	}
	var err error
	l.file, err = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open stream stamps: %w", err)
	}
	l.w = bufio.NewWriter(l.file)
	return l, loaded, nil
}

// compactStamps rewrites the file at path with the live boundaries of every
// shard and how far each was read, through a synced temporary file renamed
// over it.
func compactStamps(path string, loaded map[string]map[string]*shardPos) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	write := func() error {
		for arn, shards := range loaded {
			for id, sh := range shards {
				for _, b := range sh.stamps {
					if err := enc.Encode(stampLine{Stream: arn, Shard: id, Seq: b.seq, Sec: b.sec, At: b.at}); err != nil {
						return err
					}
				}
				if err := enc.Encode(stampLine{Stream: arn, Shard: id, Through: sh.last}); err != nil {
					return err
				}
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return f.Sync()
	}
	err = write()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func replayStamps(path string, loaded map[string]map[string]*shardPos, now time.Time) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read stream stamps: %w", err)
	}
	defer f.Close()
	sealed := map[*shardPos]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line stampLine
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Stream == "" || line.Shard == "" {
			continue // a torn last line after a crash
		}
		shards := loaded[line.Stream]
		if shards == nil {
			shards = map[string]*shardPos{}
			loaded[line.Stream] = shards
		}
		sh := shards[line.Shard]
		if sh == nil {
			sh = &shardPos{id: line.Shard}
			shards[line.Shard] = sh
		}
		switch {
		case line.Seq != "" && seqLess(sh.last, line.Seq):
			sh.stamps = append(sh.stamps, boundary{seq: line.Seq, sec: line.Sec, at: line.At})
			sh.last = line.Seq
			sealed[sh] = false
		case line.Through != "":
			if seqLess(sh.last, line.Through) {
				sh.last = line.Through
			}
			sealed[sh] = true
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stream stamps: %w", err)
	}
	cutoff := now.Add(-retention).Unix()
	for _, shards := range loaded {
		for _, sh := range shards {
			// Without a Through line the front stopped without saying how far
			// its last boundary reached: a record written then and not yet
			// read would be taken for one seen in that second.
			if n := len(sh.stamps); !sealed[sh] && n > 0 {
				sh.stamps[n-1].sec = unknown
			}
			sh.prune(cutoff)
		}
	}
	return nil
}

// add queues boundaries of a shard for the next flush.
func (l *stampLog) add(stream, shard string, bs []boundary) {
	if len(bs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return
	}
	for _, b := range bs {
		l.pending = append(l.pending, stampLine{Stream: stream, Shard: shard, Seq: b.seq, Sec: b.sec, At: b.at})
	}
}

// flush writes the queued lines.
func (l *stampLog) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked()
}

func (l *stampLog) flushLocked() error {
	if l.w == nil || len(l.pending) == 0 {
		return nil
	}
	enc := json.NewEncoder(l.w)
	for _, line := range l.pending {
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("write stream stamps: %w", err)
		}
	}
	l.pending = l.pending[:0]
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("write stream stamps: %w", err)
	}
	return nil
}

// close writes how far each shard has been read and closes the file.
func (l *stampLog) close(through []stampLine) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	l.pending = append(l.pending, through...)
	err := l.flushLocked()
	if serr := l.file.Sync(); err == nil && serr != nil {
		err = fmt.Errorf("sync stream stamps: %w", serr)
	}
	if cerr := l.file.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close stream stamps: %w", cerr)
	}
	l.file, l.w = nil, nil
	return err
}
