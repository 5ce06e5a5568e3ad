package replay

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/shopstream/shopstream/infra/local/s3server"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/wiring"
)

// racing is the local stack's S3 seen by a replay racing another: a HEAD
// of a remainder answers "not found" (the other replay had not written it
// yet when this one looked), and every PutObject the bucket accepted is
// counted by key.
type racing struct {
	Store
	remainder string
	mu        sync.Mutex
	puts      map[string]int
}

func (r *racing) HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	if *in.Key == r.remainder {
		return nil, &types.NotFound{}
	}
	return r.Store.HeadObject(ctx, in, opts...)
}

func (r *racing) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	out, err := r.Store.PutObject(ctx, in, opts...)
	if err == nil {
		r.mu.Lock()
		r.puts[*in.Key]++
		r.mu.Unlock()
	}
	return out, err
}

// TestRacingReplaysWriteOneRemainder: two replays of one failure object
// that both fail on the same records derive the same remainder key. On a
// versioned bucket each write of it is a version, and the lifecycle
// expires only what a replay tagged, so a second write left an untagged
// copy forever. The remainder is written only if absent, decided by the
// bucket (If-None-Match), not by a HEAD the other replay can race.
func TestRacingReplaysWriteOneRemainder(t *testing.T) {
	srv, err := s3server.New("", "failures")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	body, o := awsShaped(t)
	var m wiring.Mapping
	for _, w := range wiring.Mappings() {
		if w.Function == wiring.Counters {
			m = w
			break
		}
	}
	now := time.Now()
	k := failures.NewKey(failures.LocalMappingID(m.Name), o.Batch.ShardID, now)
	key := k.String()
	failing := driven{failed: o.Payload.Records[:1], reason: "a record that still fails"}
	rk := failures.RemainderKey(k, []string{failing.failed[0].Change.SequenceNumber}).String()
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("failures"), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	bucket := &racing{Store: c, remainder: rk, puts: map[string]int{}}
	for range 2 {
		r := &run{cfg: Config{Store: bucket, Bucket: "failures", Out: io.Discard, Now: func() time.Time { return now }}}
		if _, err := r.finish(context.Background(), &loaded{key: key, k: k, m: m, o: o}, failing); err != nil {
			t.Fatalf("finish: %v", err)
		}
	}
	if n := bucket.puts[rk]; n != 1 {
		t.Errorf("remainder %s written %d times; want once (writes: %v)", rk, n, bucket.puts)
	}
}
