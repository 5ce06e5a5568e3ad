package counting_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// TestRandomDeliveriesMatchModel generates a random history of orders and
// reviews, spread over four shards as DynamoDB spreads items, and computes the
// counters it must leave from the history itself. Each shard is then delivered
// by its own goroutine the ways Lambda may: random batch sizes, timeouts that
// replay a batch, partial failures resumed from the lowest failed record with
// smaller batches, transactions refused or committed without an answer. The
// shards run at once, so their batches meet on the same users and products.
func TestRandomDeliveriesMatchModel(t *testing.T) {
	const (
		seed      = 20261122
		shards    = 4
		nUsers    = 5
		nProducts = 10
		history   = 400
		// One batch in four may go past what one transaction holds, so it is
		// split into groups, some of which commit while others fail.
		maxBatch = 120
	)
	rng := rand.New(rand.NewPCG(seed, 0))
	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	want := snapshot{}
	for i := range nUsers {
		id := fmt.Sprintf("mu%d", i)
		f.put(f.tables.Users, map[string]types.AttributeValue{"userId": s(id), "version": n(1)})
		want["user "+id] = map[string]int64{}
	}
	for i := range nProducts {
		id := fmt.Sprintf("mp%d", i)
		f.put(f.tables.Products, map[string]types.AttributeValue{"productId": s(id), "version": n(1)})
		want["product "+id] = map[string]int64{}
	}
	add := func(item, counter string, v int64) { want[item][counter] += v }
	product := func() string {
		if rng.IntN(3) == 0 {
			return "mp0" // a best seller
		}
		return fmt.Sprintf("mp%d", rng.IntN(nProducts))
	}

	type order struct {
		user, id, status string
		total            int64
		lines            []line
		shard            int
	}
	var open []*order
	reviews := map[[2]string]modelReview{} // product, user → the live instance
	created := 0
	reviewShard := map[[2]string]int{}
	stream := make([][]events.DynamoDBEventRecord, shards)
	for i := range history {
		switch pick := rng.IntN(10); {
		case pick < 4 || len(open) == 0: // place an order
			o := &order{user: fmt.Sprintf("mu%d", rng.IntN(nUsers)), id: fmt.Sprintf("mo%d", i), status: "PLACED", shard: rng.IntN(shards)}
			units := map[string]int{}
			for range 1 + rng.IntN(3) {
				units[product()] += 1 + rng.IntN(4)
			}
			for p, q := range units {
				o.lines = append(o.lines, line{p, q})
				o.total += int64(q) * 100
			}
			open = append(open, o)
			stream[o.shard] = append(stream[o.shard], f.record(f.tables.Orders, "INSERT", nil, orderImage(o.user, o.id, o.status, o.total, o.lines...)))
			add("user "+o.user, "orderCount", 1)
			add("user "+o.user, "lifetimeSpendCents", o.total)
			for _, l := range o.lines {
				add("product "+l.product, "unitsSold", int64(l.qty))
			}
		case pick < 6: // move an order on
			k := rng.IntN(len(open))
			o := open[k]
			old := orderImage(o.user, o.id, o.status, o.total, o.lines...)
			switch o.status {
			case "PLACED":
				o.status = []string{"SHIPPED", "CANCELLED"}[rng.IntN(2)]
				if o.status == "CANCELLED" {
					add("user "+o.user, "lifetimeSpendCents", -o.total)
					for _, l := range o.lines {
						add("product "+l.product, "unitsSold", -int64(l.qty))
					}
				}
			case "SHIPPED":
				o.status = "DELIVERED"
			default: // closed: TTL archives it
				stream[o.shard] = append(stream[o.shard], ttlRemoval(f.record(f.tables.Orders, "REMOVE", old, nil)))
				open = append(open[:k], open[k+1:]...)
				continue
			}
			stream[o.shard] = append(stream[o.shard], f.record(f.tables.Orders, "MODIFY", old, orderImage(o.user, o.id, o.status, o.total, o.lines...)))
		case pick < 9 || len(reviews) == 0: // write a review
			key := [2]string{product(), fmt.Sprintf("mu%d", rng.IntN(nUsers))}
			rating := 1 + rng.IntN(5)
			sh, seen := reviewShard[key]
			if !seen {
				sh = rng.IntN(shards)
				reviewShard[key] = sh
			}
			if old, ok := reviews[key]; ok {
				next := modelReview{rating: rating, version: old.version + 1, created: old.created}
				stream[sh] = append(stream[sh], f.record(f.tables.Reviews, "MODIFY", old.image(key), next.image(key)))
				add("product "+key[0], "ratingTotal", int64(rating-old.rating))
				reviews[key] = next
			} else {
				created++
				r := modelReview{rating: rating, version: 1, created: fmt.Sprintf("2026-11-22T00:00:%06d", created)}
				stream[sh] = append(stream[sh], f.record(f.tables.Reviews, "INSERT", nil, r.image(key)))
				add("product "+key[0], "ratingTotal", int64(rating))
				add("product "+key[0], "reviewCount", 1)
				add("user "+key[1], "reviewCount", 1)
				reviews[key] = r
			}
		default: // delete a review
			// The first review by key, so a seed replays one history.
			var keys [][2]string
			for key := range reviews {
				keys = append(keys, key)
			}
			slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
			for _, key := range keys[:min(1, len(keys))] {
				old := reviews[key]
				stream[reviewShard[key]] = append(stream[reviewShard[key]], f.record(f.tables.Reviews, "REMOVE", old.image(key), nil))
				add("product "+key[0], "ratingTotal", -int64(old.rating))
				add("product "+key[0], "reviewCount", -1)
				add("user "+key[1], "reviewCount", -1)
				delete(reviews, key)
			}
		}
	}

	// One transaction in eight fails, half of them after committing.
	chaos := rand.New(rand.NewPCG(seed, 1))
	f.tx.inject(func(*dynamodb.TransactWriteItemsInput) (bool, bool) {
		return chaos.IntN(8) == 0, chaos.IntN(2) == 0
	})
	var wg sync.WaitGroup
	deliveries := make([]int, shards)
	for sh := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs, r := stream[sh], rand.New(rand.NewPCG(seed, uint64(2+sh)))
			pos, limit := 0, 25
			for pos < len(recs) {
				if deliveries[sh]++; deliveries[sh] > 500 {
					t.Errorf("shard %d: no progress after %d deliveries, at %d of %d", sh, deliveries[sh], pos, len(recs))
					return
				}
				size := 1 + r.IntN(limit)
				if limit == 25 && r.IntN(4) == 0 {
					size = 1 + r.IntN(maxBatch)
				}
				batch := recs[pos:min(pos+size, len(recs))]
				resp, err := f.h.Handle(context.Background(), events.DynamoDBEvent{Records: batch})
				if err != nil {
					t.Errorf("shard %d: %v", sh, err)
					return
				}
				switch {
				case r.IntN(6) == 0:
					// A timeout: the response is lost, the batch comes again.
				case len(resp.BatchItemFailures) == 0:
					pos += len(batch)
					limit = 25
				default:
					// Resume from the lowest failed record, with a bisected batch.
					for i, rec := range recs[pos:] {
						if rec.Change.SequenceNumber == resp.BatchItemFailures[0].ItemIdentifier {
							pos += i
							break
						}
					}
					limit = max(1, len(batch)/2)
				}
			}
		}()
	}
	wg.Wait()
	f.tx.inject(nil)

	got := snapshot{}
	for item := range want {
		var m map[string]int64
		if id, ok := strings.CutPrefix(item, "user "); ok {
			m = f.user(id)
		} else {
			id, _ := strings.CutPrefix(item, "product ")
			m = f.product(id)
		}
		delete(m, "version")
		maps.DeleteFunc(m, func(_ string, v int64) bool { return v == 0 })
		got[item] = m
	}
	for _, m := range want {
		maps.DeleteFunc(m, func(_ string, v int64) bool { return v == 0 })
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("counters after %v deliveries per shard (-model +got):\n%s", deliveries, d)
	}
	t.Logf("records per shard %d, %d %d %d; deliveries per shard %v", len(stream[0]), len(stream[1]), len(stream[2]), len(stream[3]), deliveries)
}

// modelReview is the live version of a review instance in the model.
type modelReview struct {
	rating, version int
	created         string
}

func (r modelReview) image(key [2]string) map[string]events.DynamoDBAttributeValue {
	return reviewVersion(key[0], key[1], r.rating, r.version, r.created)
}
