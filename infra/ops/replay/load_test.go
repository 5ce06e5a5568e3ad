package replay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// unreadable is a failure bucket whose GetObject fails with err.
type unreadable struct {
	Store
	err error
}

func (u unreadable) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return nil, u.err
}

// TestUnreadableObjectStopsTheReplay: a failure object the bucket will not
// hand over (access denied, throttled) says nothing of the object: the
// replay stops with an error (exit 2), where a skip would have told the
// operator to judge, retire or delete a healthy batch. An object gone since
// the listing (retired by another run) is skipped.
func TestUnreadableObjectStopsTheReplay(t *testing.T) {
	m := wiring.Mappings()[0]
	id := failures.LocalMappingID(m.Name)
	key := failures.NewKey(id, "shardId-00000000000000000000-00000000", time.Now()).String()
	tg := &target.Target{MappingIDs: map[string]string{m.Name: id}}
	for _, c := range []struct {
		name     string
		err      error
		stops    bool
		reported string
	}{
		{"access denied", &smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}, true, ""},
		{"slow down", &smithy.GenericAPIError{Code: "SlowDown", Message: "Please reduce your request rate."}, true, ""},
		{"gone", &types.NoSuchKey{}, false, "gone since the listing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			r := &run{cfg: Config{Store: unreadable{err: c.err}, Bucket: "failures", Target: tg, Out: &out, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
			l, err := r.load(context.Background(), key)
			if l != nil {
				t.Fatalf("loaded %+v from an unreadable object", l)
			}
			if stopped := err != nil; stopped != c.stops {
				t.Fatalf("error %v, report %q; want the replay stopped: %v", err, out.String(), c.stops)
			}
			if c.stops && !errors.Is(err, c.err) {
				t.Errorf("error %v does not carry the bucket's %v", err, c.err)
			}
			if !strings.Contains(out.String(), c.reported) || (c.stops && out.Len() > 0) {
				t.Errorf("report %q, want %q", out.String(), c.reported)
			}
		})
	}
}

// holding is a failure bucket whose every object is body.
type holding struct {
	Store
	body []byte
}

func (h holding) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return &s3.GetObjectOutput{Body: io.NopCloser(bytes.NewReader(h.body))}, nil
}

// TestBatchOfAReplacedMappingIsReplayed: a deploy that replaces a mapping
// gives it a new UUID, and the batches its predecessor discarded are kept
// under the old one. They name the stage's function and table, so they are
// the stage's mapping's, and are replayed; a batch naming another stage's
// function is skipped. Retiring a batch of an unknown UUID needs -force: it
// could be an archiver's.
func TestBatchOfAReplacedMappingIsReplayed(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "failures", "testdata", "aws-shape.json"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := failures.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	var want wiring.Mapping
	for _, m := range wiring.Mappings() {
		if m.Function == wiring.Counters && m.Table == tables.Reviews {
			want = m
		}
	}
	tg := &target.Target{
		MappingIDs: map[string]string{want.Name: failures.LocalMappingID(want.Name)},
		Functions:  map[string]string{wiring.Counters: o.Function()},
		Tables:     map[string]string{tables.Reviews: o.Table()},
	}
	replaced := failures.NewKey(failures.LocalMappingID("before the deploy"), o.Batch.ShardID, time.Now()).String()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var out strings.Builder
	r := &run{cfg: Config{Store: holding{body: body}, Bucket: "failures", Target: tg, Out: &out, Logger: quiet}}
	l, err := r.load(context.Background(), replaced)
	if err != nil || l == nil || l.m.Name != want.Name {
		t.Fatalf("batch of a replaced mapping: loaded %+v, %v, report %q; want it under %s", l, err, out.String(), want.Name)
	}

	other := *tg
	other.Functions = map[string]string{wiring.Counters: "shopstream-other-counters"}
	out.Reset()
	r = &run{cfg: Config{Store: holding{body: body}, Bucket: "failures", Target: &other, Out: &out, Logger: quiet}}
	if l, err := r.load(context.Background(), replaced); err != nil || l != nil || !strings.Contains(out.String(), "no mapping of this stage has the UUID") {
		t.Fatalf("batch of another stage: loaded %+v, %v, report %q; want it skipped", l, err, out.String())
	}

	_, err = Retire(context.Background(), Config{Store: holding{body: body}, Bucket: "failures", Target: tg, Out: io.Discard}, []string{replaced}, "understood", false)
	if err == nil || !strings.Contains(err.Error(), "-force") {
		t.Fatalf("retire of a batch of an unknown UUID without -force: %v; want refused", err)
	}
}
