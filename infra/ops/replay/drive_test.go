package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/wiring"
)

// fakeFunction fails the records in bad: by a partial batch response, or,
// with crash, by failing the whole invocation; flaky fails every record the
// first flaky invocations. It records the batches it was given.
type fakeFunction struct {
	bad     map[string]bool
	crash   bool
	flaky   int
	batches []string
}

func (f *fakeFunction) Invoke(_ context.Context, _ string, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var seqs []string
	var resp events.DynamoDBEventResponse
	for _, r := range ev.Records {
		seqs = append(seqs, r.Change.SequenceNumber)
		if f.bad[r.Change.SequenceNumber] || f.flaky > 0 {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
		}
	}
	f.batches = append(f.batches, strings.Join(seqs, ","))
	if f.flaky > 0 {
		f.flaky--
	}
	if f.crash && len(resp.BatchItemFailures) > 0 {
		return events.DynamoDBEventResponse{}, errors.New("boom")
	}
	return resp, nil
}

func records(n int) []events.DynamoDBEventRecord {
	recs := make([]events.DynamoDBEventRecord, n)
	for i := range recs {
		recs[i].Change.SequenceNumber = fmt.Sprint(i + 1)
	}
	return recs
}

func TestDriveFollowsTheMappingAndIsolatesWhatFails(t *testing.T) {
	cases := []struct {
		name        string
		f           fakeFunction
		n           int
		wantFailed  string
		wantBatches string
	}{
		{"all succeed", fakeFunction{}, 4, "", "1,2,3,4"},
		{"a transient failure is retried", fakeFunction{flaky: 1}, 3, "", "1,2,3 1,2,3"},
		{"partial response: remainder retried as it is, then the records not named tried alone",
			fakeFunction{bad: map[string]bool{"2": true}}, 4, "2", "1,2,3,4 2,3,4 2,3,4 3,4"},
		{"two named records stay, in order", fakeFunction{bad: map[string]bool{"3": true, "1": true}}, 4, "1,3", "1,2,3,4 1,2,3,4 1,2,3,4 2,4"},
		{"function error: bisected down to the record", fakeFunction{bad: map[string]bool{"3": true}, crash: true}, 4,
			"3", "1,2,3,4 1,2 3,4 3 3 3 4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &run{cfg: Config{Invoker: &c.f, Retries: 2, Logger: slog.New(slog.DiscardHandler)}}
			m := wiring.Mappings()[0]
			d := r.drive(context.Background(), m, records(c.n))
			var failed []string
			for _, rec := range d.failed {
				failed = append(failed, rec.Change.SequenceNumber)
			}
			if got := strings.Join(failed, ","); got != c.wantFailed {
				t.Errorf("failed: got %q, want %q", got, c.wantFailed)
			}
			if got := strings.Join(c.f.batches, " "); got != c.wantBatches {
				t.Errorf("invocations: got %q, want %q", got, c.wantBatches)
			}
			if d.invocations != len(c.f.batches) {
				t.Errorf("invocation count: got %d, want %d", d.invocations, len(c.f.batches))
			}
		})
	}
}

// TestUnitsCoalesceOnlyFunctionsThatTakeAnyGrouping: runs of one counters or
// indexer mapping's objects form units of up to Coalesce objects; an
// archiver's object, and an object of no known mapping, stand alone.
func TestUnitsCoalesceOnlyFunctionsThatTakeAnyGrouping(t *testing.T) {
	ids := map[string]string{}
	for _, m := range wiring.Mappings() {
		ids[m.Name] = failures.LocalMappingID(m.Name)
	}
	r := &run{cfg: Config{Coalesce: 2, Target: &target.Target{MappingIDs: ids}}}
	key := func(mapping string, i int) string {
		id := ids[mapping]
		if id == "" {
			id = failures.LocalMappingID(mapping)
		}
		return failures.Key{MappingID: id, ShardID: "shardId-1", Time: time.Date(2026, 11, 25, 1, 0, i, 0, time.UTC), ID: failures.LocalMappingID(fmt.Sprint(i))}.String()
	}
	oc := func(i int) string { return key("orders-counters", i) }
	rc := func(i int) string { return key("reviews-counters", i) }
	oa := func(i int) string { return key("orders-archiver", i) }
	pi := func(i int) string { return key("products-indexer", i) }
	stranger := key("a-mapping-of-another-stage", 9)
	keys := []string{oc(1), oc(2), oc(3), rc(4), oa(5), oa(6), pi(7), pi(8), stranger, "aws/lambda/not-a-key"}
	want := [][]string{{oc(1), oc(2)}, {oc(3)}, {rc(4)}, {oa(5)}, {oa(6)}, {pi(7), pi(8)}, {stranger}, {"aws/lambda/not-a-key"}}
	if diff := cmp.Diff(want, r.units(keys)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
}

// TestPackKeepsASequenceNumberToOneRecord: objects of one unit are packed
// into invocations of at most the payload limit; an object of another shard
// with a sequence number the invocation holds already starts the next one,
// since a function names the records it failed by sequence number alone.
// Packed together, a failure of one shard's record named the other's too.
func TestPackKeepsASequenceNumberToOneRecord(t *testing.T) {
	obj := func(shard string, payload int, seqs ...string) *loaded {
		l := &loaded{payload: payload}
		for _, s := range seqs {
			var rec events.DynamoDBEventRecord
			rec.EventID, rec.Change.SequenceNumber = shard+"/"+s, s
			l.o.Payload.Records = append(l.o.Payload.Records, rec)
		}
		return l
	}
	show := func(batches [][]events.DynamoDBEventRecord) string {
		var out []string
		for _, b := range batches {
			var ids []string
			for _, rec := range b {
				ids = append(ids, rec.EventID)
			}
			out = append(out, strings.Join(ids, ","))
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		name string
		objs []*loaded
		want string
	}{
		{"distinct numbers share an invocation", []*loaded{obj("a", 10, "1", "2"), obj("b", 10, "3")}, "a/1,a/2,b/3"},
		{"a number held already starts the next", []*loaded{obj("a", 10, "1", "2"), obj("b", 10, "2", "5"), obj("c", 10, "7")}, "a/1,a/2 b/2,b/5,c/7"},
		{"the payload limit", []*loaded{obj("a", 60, "1"), obj("b", 60, "2"), obj("c", 200, "3")}, "a/1 b/2 c/3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := show(pack(c.objs, 100)); got != c.want {
				t.Errorf("invocations: got %q, want %q", got, c.want)
			}
		})
	}
}
