package audit

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/wiring"
)

// The archive digest spares the audit a download of every archive object on
// every run (docs/counters.md, "Scale"). For each day of the archive it keeps
// one object, under DigestPrefix, that names each archive object of that day
// the audit read whole (key, ETag and size) and the facts its orders prove,
// by order id. An object the digest names at the same ETag and size is not
// downloaded when every fact it names has a marker: a marked fact is never
// missing and never taken out, so its effects are not needed, and the
// object's reading would change nothing the audit decides. An object whose
// facts are not all marked, or that changed, or that the digest does not
// name, is downloaded and read as before. The digest is a cache: deleting it
// costs one full read.

// DigestPrefix is where the digest lives in the archive bucket, beside the
// tables' prefixes.
const DigestPrefix = wiring.AuditDigestPrefix

// digestVersion is the form of a digest object.
const digestVersion = 1

type digestDay struct {
	Version int            `json:"version"`
	Objects []digestObject `json:"objects"`
}

type digestObject struct {
	Key  string `json:"key"`
	ETag string `json:"etag"`
	Size int64  `json:"size"`
	// Orders are the object's orders: id and whether it was cancelled.
	Orders []digestOrder `json:"orders"`
}

type digestOrder struct {
	ID        string `json:"id"`
	Cancelled bool   `json:"cancelled,omitempty"`
}

// factKeys are the keys of the facts the object's orders prove.
func (o digestObject) factKeys() []string {
	out := make([]string, 0, len(o.Orders))
	for _, ord := range o.Orders {
		f := facts.Order{OrderID: ord.ID}
		out = append(out, facts.Placed(f).Key)
		if ord.Cancelled {
			out = append(out, facts.CancelledFact(f).Key)
		}
	}
	return out
}

// listedObject is an archive object as listed.
type listedObject struct {
	key, etag string
	size      int64
}

// digestKey is the digest object of an archive object's day (its folder).
func digestKey(archiveKey string) string {
	return DigestPrefix + path.Dir(archiveKey) + ".json.gz"
}

// readDigest reads every digest object under DigestPrefix for the table
// prefix. A digest object that cannot be read or parsed is ignored (its
// day's objects are read whole, and the day's digest written again); whole
// is false then.
func (a *Auditor) readDigest(ctx context.Context, prefix string) (_ map[string]digestObject, whole bool, _ error) {
	keys, err := a.keys(ctx, a.cfg.Bucket, DigestPrefix+prefix)
	if err != nil {
		return nil, false, fmt.Errorf("read archive digest: %w", err)
	}
	out := map[string]digestObject{}
	whole = true
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan string)
	for range 8 {
		wg.Go(func() {
			for k := range work {
				day, err := a.getDigestDay(ctx, k)
				if err != nil {
					a.cfg.Progress.Note("archive digest %s ignored: %v", k, err)
					mu.Lock()
					whole = false
					mu.Unlock()
					continue
				}
				mu.Lock()
				for _, o := range day.Objects {
					out[o.Key] = o
				}
				mu.Unlock()
			}
		})
	}
	for _, k := range keys {
		select {
		case work <- k:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	return out, whole, nil
}

func (a *Auditor) getDigestDay(ctx context.Context, key string) (digestDay, error) {
	var day digestDay
	out, err := a.cfg.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		return day, err
	}
	defer out.Body.Close()
	zr, err := gzip.NewReader(out.Body)
	if err != nil {
		return day, err
	}
	if err := json.NewDecoder(zr).Decode(&day); err != nil {
		return day, err
	}
	if day.Version != digestVersion {
		return day, fmt.Errorf("digest version %d, want %d", day.Version, digestVersion)
	}
	return day, nil
}

// digestOf is the digest entry of an archive object read whole without a
// problem.
func digestOf(l listedObject, obj *archiveObject) digestObject {
	d := digestObject{Key: l.key, ETag: l.etag, Size: l.size, Orders: make([]digestOrder, 0, len(obj.lines))}
	for _, line := range obj.lines {
		d.Orders = append(d.Orders, digestOrder{ID: line.order.OrderID, Cancelled: line.order.Status == facts.Cancelled})
	}
	return d
}

// writeDigest writes the digest objects of the days whose entries changed:
// the entries of the objects listed now that were read without a problem.
func (a *Auditor) writeDigest(ctx context.Context, old, now map[string]digestObject, listed []listedObject) error {
	days := map[string][]digestObject{}
	changed := map[string]bool{}
	for _, l := range listed {
		dk := digestKey(l.key)
		e, ok := now[l.key]
		if !ok {
			changed[dk] = changed[dk] || hasKey(old, l.key)
			continue
		}
		days[dk] = append(days[dk], e)
		if o, had := old[l.key]; !had || o.ETag != e.ETag || o.Size != e.Size {
			changed[dk] = true
		}
	}
	var errs []error
	for dk := range changed {
		objs := days[dk]
		sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if err := json.NewEncoder(zw).Encode(digestDay{Version: digestVersion, Objects: objs}); err != nil {
			return fmt.Errorf("encode archive digest %s: %w", dk, err)
		}
		if err := zw.Close(); err != nil {
			return fmt.Errorf("encode archive digest %s: %w", dk, err)
		}
		if _, err := a.cfg.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(a.cfg.Bucket), Key: aws.String(dk),
			Body: bytes.NewReader(buf.Bytes()), ContentType: aws.String("application/json"), ContentEncoding: aws.String("gzip")}); err != nil {
			errs = append(errs, fmt.Errorf("write archive digest %s: %w", dk, err))
		}
	}
	return errors.Join(errs...)
}

func hasKey(m map[string]digestObject, k string) bool {
	_, ok := m[k]
	return ok
}

// etagOf normalises an ETag as listed (quoted) and as given back.
func etagOf(s *string) string { return strings.Trim(aws.ToString(s), `"`) }
