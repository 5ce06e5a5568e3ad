package replay

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/failures"
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
