// Package ddbcall holds the DynamoDB call helpers every room uses: the one
// backoff policy (full jitter under a doubling ceiling, and the rule that a
// wait which would end too near the request's deadline is not taken), and
// batch reads asked again for their unprocessed keys until done.
package ddbcall

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Backoff is a retry policy: before try n+1, a random wait up to a ceiling
// of Base doubled n times, at most Cap.
type Backoff struct {
	Base, Cap time.Duration
	// MaxAttempts bounds the tries (0: until the context ends).
	MaxAttempts int
	// Margin: a wait that would end less than Margin before the context's
	// deadline is not taken (ErrDeadline), so a request answers in time.
	Margin time.Duration
	// Rand draws the wait in [0, n) (default math/rand/v2).
	Rand func(n int64) int64
}

// ErrExhausted is returned when MaxAttempts tries were not enough.
var ErrExhausted = errors.New("retries exhausted")

// ErrDeadline is returned when the next wait would pass the deadline's margin.
var ErrDeadline = errors.New("no time left before the deadline")

// Wait waits before try attempt+1 (attempt counts from 1).
func (b Backoff) Wait(ctx context.Context, attempt int) error {
	if b.MaxAttempts > 0 && attempt >= b.MaxAttempts {
		return ErrExhausted
	}
	ceiling := min(b.Base<<min(attempt, 20), b.Cap)
	draw := b.Rand
	if draw == nil {
		draw = rand.Int64N
	}
	d := time.Duration(draw(int64(max(ceiling, 1)))) + 1
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d+b.Margin {
		return ErrDeadline
	}
	return Sleep(ctx, d)
}

// Sleep waits d, or until ctx ends (its error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// BatchGetter is the call BatchGet makes.
type BatchGetter interface {
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// BatchGet reads every key of req (at most 100 in all, as BatchGetItem takes
// them), asks again for the keys DynamoDB leaves unprocessed (a throttled
// partition) after b's wait, and hands each item to each with its table.
// An error of the call, of b or of each ends it.
func BatchGet(ctx context.Context, db BatchGetter, req map[string]types.KeysAndAttributes, b Backoff, each func(table string, item map[string]types.AttributeValue) error) error {
	for attempt := 1; len(req) > 0; attempt++ {
		res, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return err
		}
		for table, items := range res.Responses {
			for _, it := range items {
				if err := each(table, it); err != nil {
					return err
				}
			}
		}
		if req = res.UnprocessedKeys; len(req) == 0 {
			return nil
		}
		if err := b.Wait(ctx, attempt); err != nil {
			return fmt.Errorf("keys left unprocessed: %w", err)
		}
	}
	return nil
}
