package esm

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Destination is a mapping's on-failure destination.
type Destination interface {
	// Put keeps one discarded batch under f.Key.
	Put(ctx context.Context, mapping string, f Failure) error
}

type objectPutter interface {
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// S3Destination writes each discarded batch to a bucket as Lambda writes it to
// an S3 on-failure destination: one JSON object per batch, the invocation
// record with the batch's payload, under aws/lambda/<mapping>/<shard>/<date>/.
type S3Destination struct {
	S3     objectPutter
	Bucket string
}

// Put writes the object.
func (d *S3Destination) Put(ctx context.Context, mapping string, f Failure) error {
	body, err := f.Object.Encode()
	if err != nil {
		return fmt.Errorf("failure object of %s: %w", mapping, err)
	}
	_, err = d.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.Bucket), Key: aws.String(f.Key),
		Body: bytes.NewReader(body), ContentType: aws.String("application/json")})
	if err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", d.Bucket, f.Key, err)
	}
	return nil
}

// destineAttempts bounds the writes of one failure object; the mapping waits
// for them before it moves past the batch.
const destineAttempts = 6

// destine hands a discarded batch to the destination, retrying a failed write
// with backoff. It runs even while the poller closes: a batch that was given
// up on is kept or, after every attempt failed, logged as lost.
func (p *Poller) destine(mapping string, f Failure) {
	if p.cfg.Destination == nil {
		return
	}
	var err error
	for attempt := range destineAttempts {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = p.cfg.Destination.Put(ctx, mapping, f)
		cancel()
		if err == nil {
			return
		}
		p.cfg.Logger.Warn("write failure object", "mapping", mapping, "key", f.Key, "attempt", attempt+1, "err", err.Error())
		time.Sleep(50 * time.Millisecond << attempt)
	}
	p.cfg.Logger.Error("failure object lost", "mapping", mapping, "key", f.Key, "count", f.Batch.BatchSize,
		"start", f.Batch.StartSequenceNumber, "end", f.Batch.EndSequenceNumber, "err", err.Error())
}
