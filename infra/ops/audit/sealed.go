package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/shopstream/shopstream/shared/failures"
)

// Sealed days spare the audit the listing of the archive's whole history
// (docs/counters.md, "Scale"). The archiver writes a record under the day of
// its stream time. DynamoDB Streams keeps a record 24 hours, so the live
// archiver writes a day's objects within about a day of its end; after that
// only a replay of a failure object writes to it, and a failure object's
// records are at most a day older than the time its key names (when Lambda
// discarded the batch). A day is sealed, and never listed again, when:
//
//   - S3's own clock, read before the failure bucket, is sealMargin past
//     the day's end: no live archiver and no new failure object can write to
//     it any more. S3's clock, not the operator's: skew changes nothing;
//   - no failure object of any function, replayed or not, was discarded on
//     that day or within sealMargin after it (none can be replayed to it);
//   - every object of the day is in its digest (read without a problem).
//
// The seal is one boundary, kept beside the digest: every day up to and
// including it is sealed, and the archive is listed from the day after it on.
// Deleting the seal (or the digest) costs one full listing; editing the
// archive by hand calls for deleting it.

// sealMargin is how long after a day's end the day may still be written.
const sealMargin = 48 * time.Hour

// sealKey holds the seal of a table's archive.
func sealKey(prefix string) string {
	return DigestPrefix + strings.TrimSuffix(prefix, "/") + ".sealed.json"
}

// clockKey is the object whose LastModified tells S3's time.
const clockKey = DigestPrefix + "clock"

type seal struct {
	Version int `json:"version"`
	// Through is the last sealed day, as the archive names its folders
	// (year=2006/month=01/day=02).
	Through string `json:"through"`
}

// dayFolder is the day an archive key lives under, relative to the table's
// prefix ("" for a key outside any day folder).
func dayFolder(prefix, key string) string {
	rest := strings.TrimPrefix(path.Dir(key), strings.TrimSuffix(prefix, "/"))
	return strings.TrimPrefix(rest, "/")
}

const dayLayout = "year=2006/month=01/day=02"

func dayName(t time.Time) string { return t.UTC().Format(dayLayout) }

// validDay reports whether a folder names a day as the archiver does.
func validDay(day string) bool {
	t, err := time.Parse(dayLayout, day)
	return err == nil && dayName(t) == day
}

// sealThrough is the last day that can be sealed: at S3 time now, with the
// failure objects discarded at the given times and the days that have an
// object the digest does not hold. It returns "" when no day can be.
func sealThrough(now time.Time, discarded []time.Time, unsettled []string) string {
	// A day is past when its end is sealMargin before now.
	last := now.UTC().Add(-sealMargin).Truncate(24*time.Hour).AddDate(0, 0, -1)
	for _, t := range discarded {
		// The batch's records may be a day older than its discard, and a
		// margin more for the time it took to discard.
		if before := t.UTC().Add(-sealMargin).Truncate(24*time.Hour).AddDate(0, 0, -1); before.Before(last) {
			last = before
		}
	}
	through := dayName(last)
	for _, d := range unsettled {
		if d <= through {
			day, err := time.Parse(dayLayout, d)
			if err != nil {
				return ""
			}
			through = dayName(day.AddDate(0, 0, -1))
		}
	}
	return through
}

// s3Now returns S3's time: the LastModified of an object the audit writes.
func (a *Auditor) s3Now(ctx context.Context) (time.Time, error) {
	if _, err := a.cfg.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(a.cfg.Bucket), Key: aws.String(clockKey),
		Body: bytes.NewReader(nil), ContentType: aws.String("application/octet-stream")}); err != nil {
		return time.Time{}, fmt.Errorf("write s3://%s/%s: %w", a.cfg.Bucket, clockKey, err)
	}
	out, err := a.cfg.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.cfg.Bucket), Key: aws.String(clockKey)})
	if err != nil {
		return time.Time{}, fmt.Errorf("read s3://%s/%s: %w", a.cfg.Bucket, clockKey, err)
	}
	out.Body.Close()
	if out.LastModified == nil {
		return time.Time{}, fmt.Errorf("s3://%s/%s has no LastModified", a.cfg.Bucket, clockKey)
	}
	return *out.LastModified, nil
}

// discardTimes lists every failure object, replayed or not, and returns
// when each was discarded. ok is false when the failure bucket is not
// configured or a key does not name its time: then no day may be sealed.
func (a *Auditor) discardTimes(ctx context.Context) (times []time.Time, ok bool, err error) {
	if a.cfg.FailureBucket == "" {
		return nil, false, nil
	}
	keys, err := a.keys(ctx, a.cfg.FailureBucket, failures.Prefix)
	if err != nil {
		return nil, false, err
	}
	ok = true
	for _, key := range keys {
		k, err := failures.ParseKey(key)
		if err != nil {
			ok = false
			continue
		}
		times = append(times, k.Time)
	}
	return times, ok, nil
}

// readSeal returns the last sealed day of the table's archive, "" when there
// is none or it cannot be read.
func (a *Auditor) readSeal(ctx context.Context, prefix string) string {
	out, err := a.cfg.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.cfg.Bucket), Key: aws.String(sealKey(prefix))})
	if err != nil {
		var missing *s3types.NoSuchKey
		if !errors.As(err, &missing) {
			a.cfg.Progress.Note("archive seal %s not read, every day listed: %v", sealKey(prefix), err)
		}
		return ""
	}
	defer out.Body.Close()
	var s seal
	b, err := io.ReadAll(io.LimitReader(out.Body, 1<<16))
	if err != nil || json.Unmarshal(b, &s) != nil || s.Version != 1 {
		return ""
	}
	if _, err := time.Parse(dayLayout, s.Through); err != nil {
		return ""
	}
	return s.Through
}

func (a *Auditor) writeSeal(ctx context.Context, prefix, through string) error {
	b, _ := json.Marshal(seal{Version: 1, Through: through})
	if _, err := a.cfg.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(a.cfg.Bucket), Key: aws.String(sealKey(prefix)),
		Body: bytes.NewReader(b), ContentType: aws.String("application/json")}); err != nil {
		return fmt.Errorf("write archive seal s3://%s/%s: %w", a.cfg.Bucket, sealKey(prefix), err)
	}
	return nil
}
