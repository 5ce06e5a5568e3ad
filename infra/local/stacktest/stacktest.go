// Package stacktest gives a test binary one shared local stack, started on
// first use on free 127.0.0.1 ports, and fresh table prefixes so tests do not
// see each other's data.
package stacktest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/tables"
)

var shared struct {
	once  sync.Once
	stack *endpoints.Stack
	err   error
	seq   atomic.Int64
}

// Stack returns the test binary's shared stack. DynamoDB Local's JVM dies with
// the test binary; the stack is never closed explicitly.
func Stack(tb testing.TB) *endpoints.Stack {
	tb.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		level := slog.LevelWarn
		if os.Getenv("STACK_DEBUG") != "" {
			level = slog.LevelDebug
		}
		shared.stack, shared.err = endpoints.Start(ctx, endpoints.Config{
			TTLSweepInterval: time.Second,
			SweepTables:      func(table string) bool { return !strings.HasPrefix(table, ownPrefix) },
			Buckets:          []string{envcontract.LocalArchiveBucket},
			Logger:           slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		})
	})
	if shared.err != nil {
		tb.Fatalf("start local stack: %v", shared.err)
	}
	return shared.stack
}

// ownPrefix starts the names of tables that dedicated stacks sweep and the
// shared stack leaves alone.
const ownPrefix = "own-"

// Dedicated starts a stack of the test's own that shares the binary's DynamoDB
// Local (so it starts in milliseconds) and closes it when the test ends. Use it
// to control the sweeper or inject faults without disturbing other tests; its
// sweeper handles only tables named with OwnPrefix, which the shared stack's
// sweeper leaves alone.
func Dedicated(tb testing.TB, cfg endpoints.Config) *endpoints.Stack {
	tb.Helper()
	cfg.DynamoDBUpstream = Stack(tb).Upstream()
	cfg.SweepTables = func(table string) bool { return strings.HasPrefix(table, ownPrefix) }
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	st, err := endpoints.Start(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("start dedicated stack: %v", err)
	}
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Errorf("close dedicated stack: %v", err)
		}
	})
	return st
}

// Prefix returns a table-name prefix no other test of this binary uses.
func Prefix(tb testing.TB) string {
	tb.Helper()
	return fmt.Sprintf("t%d-%d-", os.Getpid(), shared.seq.Add(1))
}

// OwnPrefix returns a fresh table-name prefix for tables swept only by
// dedicated stacks.
func OwnPrefix(tb testing.TB) string {
	tb.Helper()
	return ownPrefix + Prefix(tb)
}

// Tables creates every table of shared/tables under a fresh prefix and
// returns the prefix.
func Tables(tb testing.TB) string {
	tb.Helper()
	st := Stack(tb)
	prefix := Prefix(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tables.Create(ctx, st.DynamoDB(), prefix); err != nil {
		tb.Fatalf("create tables: %v", err)
	}
	return prefix
}

// DynamoDB returns a client for the shared stack's DynamoDB endpoint.
func DynamoDB(tb testing.TB) *dynamodb.Client {
	tb.Helper()
	return Stack(tb).DynamoDB()
}

// StillClock is a clock for the DynamoDB front's token buckets
// (ddbfront.Limits.Now) that stands still unless a test moves it, so that a
// partition's units are spent only by what the test does.
type StillClock struct{ ns atomic.Int64 }

// NewStillClock returns a clock standing at a fixed time.
func NewStillClock() *StillClock {
	c := &StillClock{}
	c.ns.Store(time.Unix(1_800_000_000, 0).UnixNano())
	return c
}

// Now is the clock's time.
func (c *StillClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Refill moves the clock on a minute, which fills every bucket again.
func (c *StillClock) Refill() { c.ns.Add(int64(time.Minute)) }

// RefillOnUnprocessed watches st's front and refills clock as soon as a
// batch has answered a key as unprocessed: the batch a test provokes meets
// the spent partition, and the retry of its unprocessed keys finds units.
// The returned function ends the watch and reports whether a key came back
// unprocessed.
func RefillOnUnprocessed(tb testing.TB, st *endpoints.Stack, clock *StillClock) (stop func() bool) {
	tb.Helper()
	start := st.Front.LimitStats().Unprocessed
	done := make(chan struct{})
	var seen atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if st.Front.LimitStats().Unprocessed > start {
					seen.Store(true)
					clock.Refill()
					return
				}
			}
		}
	}()
	return func() bool {
		close(done)
		wg.Wait()
		return seen.Load()
	}
}

// SpendReads reads the item under key, strongly consistent and with no
// retry, until the front refuses it: its partition's read units are spent
// (on a StillClock they stay spent).
func SpendReads(tb testing.TB, db *dynamodb.Client, table string, key map[string]types.AttributeValue) {
	tb.Helper()
	for i := 0; i < 100_000; i++ {
		_, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)},
			func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
		var pte *types.ProvisionedThroughputExceededException
		if errors.As(err, &pte) {
			return
		}
		if err != nil {
			tb.Fatalf("spend the read units of %s: %v", table, err)
		}
	}
	tb.Fatalf("spend the read units of %s: never refused", table)
}
