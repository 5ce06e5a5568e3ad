package audit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/ops/scan"
	"github.com/shopstream/shopstream/shared/ddbcall"
)

// keyName is the partition key of each kind's table.
var keyName = map[Kind]string{User: "userId", Product: "productId"}

func (a *Auditor) table(k Kind) string {
	if k == User {
		return a.cfg.Tables.Users
	}
	return a.cfg.Tables.Products
}

// readItems reads the counters and version of the items in set with strongly
// consistent reads; nil reads every user and product (parallel scans).
func (a *Auditor) readItems(ctx context.Context, set map[Item]bool) (map[Item]reading, error) {
	out := map[Item]reading{}
	var mu sync.Mutex
	keep := func(k Kind, item map[string]types.AttributeValue) error {
		it, r, err := decodeReading(k, item)
		if err != nil {
			return err
		}
		mu.Lock()
		out[it] = r
		mu.Unlock()
		return nil
	}
	if set == nil {
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, k := range []Kind{User, Product} {
			wg.Go(func() {
				errs[i] = scan.Table(ctx, a.cfg.DB, scan.Input{
					Table: a.table(k), Segments: a.cfg.Segments, Consistent: true,
					Projection: append([]string{keyName[k], "version"}, Counters[k]...),
				}, func(items []map[string]types.AttributeValue) error {
					for _, item := range items {
						if err := keep(k, item); err != nil {
							return err
						}
					}
					a.cfg.Progress.Add(string(k)+"s read", int64(len(items)))
					return nil
				})
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("read counter items: %w", err)
		}
		return out, nil
	}
	// The named items in chunks of BatchGetItem's 100 keys, read by a few
	// workers at once: a stage's million users are 10,000 calls.
	items := sortedItems(set)
	chunks := make(chan []Item)
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	for range max(2*a.cfg.Segments, 1) {
		wg.Go(func() {
			for chunk := range chunks {
				if err := a.readChunk(ctx, chunk, keep); err != nil {
					fail(err)
				}
			}
		})
	}
	for start := 0; start < len(items); start += 100 {
		chunks <- items[start:min(start+100, len(items))]
	}
	close(chunks)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// readChunk reads up to 100 counter items with BatchGetItem, again for the
// keys DynamoDB leaves unprocessed.
func (a *Auditor) readChunk(ctx context.Context, chunk []Item, keep func(Kind, map[string]types.AttributeValue) error) error {
	req := map[string]types.KeysAndAttributes{}
	for _, it := range chunk {
		t := a.table(it.Kind)
		ka := req[t]
		ka.ConsistentRead = aws.Bool(true)
		ka.Keys = append(ka.Keys, map[string]types.AttributeValue{keyName[it.Kind]: &types.AttributeValueMemberS{Value: it.ID}})
		req[t] = ka
	}
	err := ddbcall.BatchGet(ctx, a.cfg.DB, req, retries, func(t string, item map[string]types.AttributeValue) error {
		k := User
		if t == a.cfg.Tables.Products {
			k = Product
		}
		return keep(k, item)
	})
	if err != nil {
		return fmt.Errorf("read counter items: %w", err)
	}
	return nil
}

// retries is the audit's backoff for keys left unprocessed: 20 ms doubling
// to a second, jittered, until the run's context ends.
var retries = ddbcall.Backoff{Base: 10 * time.Millisecond, Cap: time.Second}

func decodeReading(k Kind, item map[string]types.AttributeValue) (Item, reading, error) {
	id, ok := item[keyName[k]].(*types.AttributeValueMemberS)
	if !ok {
		return Item{}, reading{}, fmt.Errorf("%s item without %s", k, keyName[k])
	}
	it := Item{Kind: k, ID: id.Value}
	r := reading{counts: map[string]int64{}}
	for _, name := range append([]string{"version"}, Counters[k]...) {
		av, present := item[name]
		if !present {
			continue
		}
		n, ok := av.(*types.AttributeValueMemberN)
		var v int64
		var err error
		if ok {
			v, err = parseInt(n.Value)
		}
		if !ok || err != nil {
			if r.bad == nil {
				r.bad = map[string]types.AttributeValue{}
			}
			r.bad[name] = av
			continue
		}
		if name == "version" {
			r.version = v
		} else {
			r.counts[name] = v
		}
	}
	return it, r, nil
}

// correct takes a residual out of it: the counters minus the effects of the
// markers of its facts, which something other than the processor wrote. The
// update is conditional on the version at which the residual was judged and
// bumps it, like any counter write. It reports false when the item moved (or
// went) since.
func (a *Auditor) correct(ctx context.Context, it Item, version int64, residual map[string]int64) (bool, error) {
	upd := expression.Add(expression.Name("version"), expression.Value(1))
	for _, c := range Counters[it.Kind] {
		if n := residual[c]; n != 0 {
			upd = upd.Add(expression.Name(c), expression.Value(-n))
		}
	}
	return a.updateAt(ctx, it, version, upd, "correct")
}

// updateAt applies upd to it, conditional on the item being there at
// version (0: without one) and bumping it, as every counter write does. It
// reports false when the item moved (or went) since, or a transaction of
// the processor holds it: the caller judges it again.
func (a *Auditor) updateAt(ctx context.Context, it Item, version int64, upd expression.UpdateBuilder, what string) (bool, error) {
	cond := expression.AttributeExists(expression.Name(keyName[it.Kind]))
	if version == 0 {
		cond = cond.And(expression.AttributeNotExists(expression.Name("version")))
	} else {
		cond = cond.And(expression.Name("version").Equal(expression.Value(version)))
	}
	e, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", what, it, err)
	}
	_, err = a.cfg.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(a.table(it.Kind)),
		Key:                       map[string]types.AttributeValue{keyName[it.Kind]: &types.AttributeValueMemberS{Value: it.ID}},
		UpdateExpression:          e.Update(),
		ConditionExpression:       e.Condition(),
		ExpressionAttributeNames:  e.Names(),
		ExpressionAttributeValues: e.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	var conflict *types.TransactionConflictException
	switch {
	case errors.As(err, &ccf), errors.As(err, &conflict):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s %s: %w", what, it, err)
	}
	return true, nil
}

// stored is how DynamoDB holds av, for a report: a number or a string as
// written, any other type by its name.
func stored(av types.AttributeValue) string {
	switch v := av.(type) {
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberS:
		return strconv.Quote(v.Value)
	case *types.AttributeValueMemberBOOL:
		return strconv.FormatBool(v.Value)
	}
	return fmt.Sprintf("a value of type %T", av)
}

// rewrite sets the counters of it that hold no integer (r.bad) to the sum
// of their markers, the value the processor's writes account for,
// conditional on the version of reading r (a version that is no integer
// either is left to an operator: versions only go up, and the indexer
// orders a product's documents by it). It reports false when the item
// moved since, or its version cannot be trusted.
func (a *Auditor) rewrite(ctx context.Context, it Item, r reading, m markers) ([]Rewrite, error) {
	if _, ok := r.bad["version"]; ok {
		return nil, nil
	}
	upd := expression.Add(expression.Name("version"), expression.Value(1))
	var out []Rewrite
	for _, c := range Counters[it.Kind] {
		if av, ok := r.bad[c]; ok {
			n := m.sums[it][c]
			upd = upd.Set(expression.Name(c), expression.Value(n))
			out = append(out, Rewrite{Item: it, Counter: c, Stored: stored(av), Set: n})
		}
	}
	ok, err := a.updateAt(ctx, it, r.version, upd, "rewrite")
	if !ok || err != nil {
		return nil, err
	}
	return out, nil
}

// badProblem is the report's line for an item that holds counters that
// are not integers.
func badProblem(a *Auditor, it Item, r reading) Problem {
	var parts []string
	for _, name := range append([]string{"version"}, Counters[it.Kind]...) {
		if av, ok := r.bad[name]; ok {
			parts = append(parts, fmt.Sprintf("%s holds %s", name, stored(av)))
		}
	}
	how := "make audit REPAIR=1 sets its counters to the sum of their markers"
	if _, ok := r.bad["version"]; ok {
		how = "its version is no integer: set it by hand above every version it had (the search index orders a product's documents by it), then run make audit REPAIR=1"
	}
	return Problem{Where: fmt.Sprintf("table %s item %s", a.table(it.Kind), it), Err: strings.Join(parts, ", ") + ", not an integer of 64 bits: not judged; " + how}
}
