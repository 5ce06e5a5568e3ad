package failures

import (
	"slices"
	"strings"
	"time"
)

// A replayed search-indexer batch may bring back the document of a product
// deleted since: the search domain forgets a delete's tombstone on a restart
// or a moved shard. The replay then asks for `make reindex`, and the failure
// bucket keeps the request until a reindex answers it, so that a later replay
// asks again rather than forgetting:
//
//   - reindex/needed/<object key>: written by the replay before it tags and
//     marks the object, the marker's body;
//   - reindex/started/<run>: written by `make reindex` as it begins;
//   - reindex/finished/<run>: written by `make reindex` when every document
//     was written.
//
// A finished run answers every need written before it started, by the
// bucket's own clock (the objects' LastModified), never the operator's.
// Nothing expires these objects (a few bytes each, one per indexer batch
// that asked and two per reindex): a request never lapses unanswered, and a
// run's start never goes before the needs it answered. No stream function's
// role may write them.
const (
	ReindexPrefix         = "reindex/"
	ReindexNeededPrefix   = ReindexPrefix + "needed/"
	ReindexStartedPrefix  = ReindexPrefix + "started/"
	ReindexFinishedPrefix = ReindexPrefix + "finished/"
)

// ReindexNeed is a replayed object whose reindex is still wanted.
type ReindexNeed struct {
	// Key is the failure object's key.
	Key string
	// At is when the need was written (the bucket's clock).
	At time.Time
}

// OutstandingReindex returns the needs no finished reindex answers, oldest
// first. objects maps every key under ReindexPrefix to its LastModified. A
// finished run answers every need written in or before the second its start
// was recorded: `make reindex` waits a second after recording its start
// before it reads anything (ReindexSettle), so such a need, and the
// document its replay wrote before it, came before the run's reads. Times
// are compared in whole seconds, as S3 gives them, whatever the store's
// precision.
func OutstandingReindex(objects map[string]time.Time) []ReindexNeed {
	var covered time.Time
	for k := range objects {
		run, ok := strings.CutPrefix(k, ReindexFinishedPrefix)
		if !ok {
			continue
		}
		if started, ok := objects[ReindexStartedPrefix+run]; ok && started.After(covered) {
			covered = started
		}
	}
	var out []ReindexNeed
	for k, at := range objects {
		key, ok := strings.CutPrefix(k, ReindexNeededPrefix)
		if !ok || !at.Truncate(time.Second).After(covered.Truncate(time.Second)) {
			continue
		}
		out = append(out, ReindexNeed{Key: key, At: at})
	}
	slices.SortFunc(out, func(a, b ReindexNeed) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// ReindexSettle is how long `make reindex` waits after recording its start
// before it reads the table or the index (OutstandingReindex).
const ReindexSettle = time.Second

// ReindexRun names one run of `make reindex` under ReindexStartedPrefix and
// ReindexFinishedPrefix: its start, to the second, and a random UUID, so
// that two runs never share a name.
func ReindexRun(now time.Time) string {
	return now.UTC().Format("20060102T150405Z") + "-" + randomUUID()
}
