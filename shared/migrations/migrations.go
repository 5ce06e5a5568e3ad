// Package migrations holds shopstream's data migrations: named, ordered
// changes of stored items from an older shape to the current one (seed 000,
// "version flags on items and background migration processes"), and the
// runner behind `make migrate`. Each migration scans one table and changes
// each item that needs it in one transaction conditional on the version it
// read, so it is safe beside live traffic and beside the previous release;
// its progress is kept in the migrations table after every page, so a run
// killed at any point continues where it stopped and a finished one is not
// run again.
package migrations

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/ddbcall"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/shapes"
	"github.com/shopstream/shopstream/shared/stock"
	"github.com/shopstream/shopstream/shared/tables"
)

// Migration is one named change of stored items.
type Migration struct {
	// Name orders and identifies the migration ("0001-…"); it is the key of
	// its progress item and never changes once released.
	Name string
	// Summary says what it changes, for reports.
	Summary string
	// Release is the release that introduced it (CHANGELOG.md).
	Release string
	// Table is the logical table it scans.
	Table string
	// Needs is the scan filter of the items it changes.
	Needs expression.ConditionBuilder
	// Change returns the transaction that upgrades an item read by the scan,
	// conditional on the item being as read, and a one-line description of
	// the change; no actions when the item needs none.
	Change func(names map[string]string, item map[string]types.AttributeValue) ([]types.TransactWriteItem, string, error)
	// Key returns the item's key, to read it again after a failed condition.
	Key func(item map[string]types.AttributeValue) map[string]types.AttributeValue
}

// All returns every migration, in the order they run.
func All() []Migration {
	return []Migration{catalogStockIntoBuckets()}
}

// catalogStockIntoBuckets moves the stock releases 0.1.x kept on the catalog
// item (shape 1) into the product's stock buckets (shape 2): in one
// transaction, the catalog item loses its stock (conditional on the stock
// and the version read, so a sale by either release in between makes it
// read again) and each bucket gains its share of it, created when absent
// with the catalog's price and name. The product's total and its version do
// not change: a client sees the same product before and after.
func catalogStockIntoBuckets() Migration {
	return Migration{
		Name:    "0001-catalog-stock-into-buckets",
		Summary: "move stock held on catalog items (shape 1, releases 0.1.x) into stock buckets (shape 2)",
		Release: "0.3.0",
		Table:   tables.Products,
		Needs:   expression.AttributeExists(expression.Name("stock")),
		Key: func(item map[string]types.AttributeValue) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{"productId": item["productId"]}
		},
		Change: func(names map[string]string, item map[string]types.AttributeValue) ([]types.TransactWriteItem, string, error) {
			var p products.Product
			if err := attributevalue.UnmarshalMap(item, &p); err != nil {
				return nil, "", fmt.Errorf("decode product: %w", err)
			}
			if p.CatalogStock == nil {
				return nil, "", nil
			}
			held := *p.CatalogStock
			n := max(p.StockBuckets, 1)
			upd := expression.Remove(expression.Name("stock")).
				Set(expression.Name("stockBuckets"), expression.Value(n)).
				Set(expression.Name(shapes.Attr), expression.Value(products.Shape))
			cond := expression.Name("version").Equal(expression.Value(p.Version)).
				And(expression.Name("stock").Equal(expression.Value(held)))
			e, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
			if err != nil {
				return nil, "", fmt.Errorf("build catalog update: %w", err)
			}
			actions := []types.TransactWriteItem{{Update: &types.Update{
				TableName: aws.String(names[tables.Products]), Key: map[string]types.AttributeValue{"productId": item["productId"]},
				UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
				ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			}}}
			for i, share := range stock.Spread(held, n) {
				bu := expression.Set(expression.Name("productId"), expression.Value(p.ProductID)).
					Set(expression.Name("bucket"), expression.Value(i)).
					Set(expression.Name("priceCents"), expression.Value(p.PriceCents)).
					Set(expression.Name("name"), expression.Value(p.Name)).
					Set(expression.Name("version"), expression.IfNotExists(expression.Name("version"), expression.Value(0))).
					Set(expression.Name(shapes.Attr), expression.IfNotExists(expression.Name(shapes.Attr), expression.Value(shapes.StockBucket))).
					Add(expression.Name("units"), expression.Value(share))
				be, err := expression.NewBuilder().WithUpdate(bu).Build()
				if err != nil {
					return nil, "", fmt.Errorf("build bucket update: %w", err)
				}
				actions = append(actions, types.TransactWriteItem{Update: &types.Update{
					TableName:        aws.String(names[tables.ProductStock]),
					Key:              map[string]types.AttributeValue{"bucketId": &types.AttributeValueMemberS{Value: p.ProductID + "#" + strconv.Itoa(i)}},
					UpdateExpression: be.Update(), ExpressionAttributeNames: be.Names(), ExpressionAttributeValues: be.Values(),
				}})
			}
			return actions, fmt.Sprintf("product %s: %d units from the catalog item into %d bucket(s)", p.ProductID, held, n), nil
		},
	}
}

// DB is the part of the DynamoDB client migrations use.
type DB interface {
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Config configures a run.
type Config struct {
	DB DB
	// Tables maps every logical table name to its physical one.
	Tables map[string]string
	// Rate caps the items scanned per second (0: no cap).
	Rate float64
	// PageSize is the scan's page (default 100, at most Rate when capped).
	PageSize int32
	// DryRun changes nothing and records nothing: it reports what a run
	// would change.
	DryRun bool
	// MaxAttempts bounds the tries of one item's change (default 10).
	MaxAttempts int
	// Workers is how many items of a page are changed at once (default 8).
	Workers int
	// Progress is called after every page of every migration.
	Progress func(Progress)
	// Planned is called, in a dry run, with each change a run would make.
	Planned func(migration, change string) // called from several goroutines at once
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Sleep waits out the rate cap (default ddbcall.Sleep); tests hold it still.
	Sleep func(context.Context, time.Duration) error
}

// Progress is where a migration stands.
type Progress struct {
	Migration string
	// Scanned and Changed count items over every run of the migration;
	// Left counts the items of this pass over the table whose change kept
	// failing, in this run or in an earlier one that this run resumed.
	Scanned, Changed, Left int64
	// Estimate is the table's approximate item count (DescribeTable).
	Estimate int64
	// ThisRun counts the items scanned by this run, ChangedThisRun those it
	// changed (a dry run: would change), and Elapsed its time, for the rate.
	ThisRun, ChangedThisRun int64
	Elapsed                 time.Duration
	// Done: the migration has scanned the whole table.
	Done bool
	// AlreadyDone: it was done by an earlier run, and not run again.
	AlreadyDone bool
}

// Report is the outcome of a run: one Progress per migration.
type Report struct {
	Migrations []Progress
}

// Left is the number of items whose change kept failing (a later run takes
// them again).
func (r Report) Left() int64 {
	var n int64
	for _, m := range r.Migrations {
		n += m.Left
	}
	return n
}

// Changed is the number of items this run changed (in a dry run: would
// change).
func (r Report) Changed() int64 {
	var n int64
	for _, m := range r.Migrations {
		n += m.ChangedThisRun
	}
	return n
}

// ErrConcurrentRun is returned when another run recorded progress of the
// same migration meanwhile.
var ErrConcurrentRun = errors.New("another migrate run is recording progress of this migration")

// state is a migration's progress item.
type state struct {
	Migration string `dynamodbav:"migration"`
	Scanned   int64  `dynamodbav:"scanned"`
	Changed   int64  `dynamodbav:"changed"`
	// Left counts the items whose change kept failing in the pass that
	// LastKey is part of, over every run of that pass: a run resumed after
	// a kill must not record the migration done while an item an earlier
	// run gave up on still needs it. A pass that ends with some left
	// leaves them to the next pass, which starts from the table's start.
	Left       int64                           `dynamodbav:"left,omitempty"`
	LastKey    map[string]types.AttributeValue `dynamodbav:"-"`
	Done       bool                            `dynamodbav:"done"`
	StartedAt  string                          `dynamodbav:"startedAt,omitempty"`
	UpdatedAt  string                          `dynamodbav:"updatedAt,omitempty"`
	FinishedAt string                          `dynamodbav:"finishedAt,omitempty"`
	Release    string                          `dynamodbav:"release,omitempty"`
	Shape      int                             `dynamodbav:"shape,omitempty"`
}

// Run runs every migration not yet done, in order, and reports each.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = withDefaults(cfg)
	var rep Report
	for _, m := range All() {
		p, err := runOne(ctx, cfg, m)
		rep.Migrations = append(rep.Migrations, p)
		if err != nil {
			return rep, fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return rep, nil
}

func withDefaults(cfg Config) Config {
	if cfg.PageSize <= 0 {
		cfg.PageSize = 100
	}
	if cfg.Rate > 0 && float64(cfg.PageSize) > cfg.Rate {
		cfg.PageSize = max(int32(cfg.Rate), 1)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = ddbcall.Sleep
	}
	if cfg.Progress == nil {
		cfg.Progress = func(Progress) {}
	}
	if cfg.Planned == nil {
		cfg.Planned = func(string, string) {}
	}
	return cfg
}

func (c Config) name(logical string) (string, error) {
	n := c.Tables[logical]
	if n == "" {
		return "", fmt.Errorf("no name for table %s", logical)
	}
	return n, nil
}

// read returns the progress item of migration name (zero when absent).
func read(ctx context.Context, cfg Config, name string) (state, error) {
	tn, err := cfg.name(tables.Migrations)
	if err != nil {
		return state{}, err
	}
	out, err := cfg.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(tn), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"migration": &types.AttributeValueMemberS{Value: name}},
	})
	if err != nil {
		return state{}, fmt.Errorf("read progress from %s: %w", tn, err)
	}
	var st state
	if out.Item == nil {
		return state{Migration: name}, nil
	}
	if err := attributevalue.UnmarshalMap(out.Item, &st); err != nil {
		return state{}, fmt.Errorf("decode progress: %w", err)
	}
	if lk, ok := out.Item["lastKey"].(*types.AttributeValueMemberM); ok {
		st.LastKey = lk.Value
	}
	return st, nil
}

// save records st, on the condition that the item still holds prev's count
// (a concurrent run fails it).
func save(ctx context.Context, cfg Config, st state, prev state, exists bool) error {
	tn, err := cfg.name(tables.Migrations)
	if err != nil {
		return err
	}
	item, err := attributevalue.MarshalMap(st)
	if err != nil {
		return fmt.Errorf("encode progress: %w", err)
	}
	if len(st.LastKey) > 0 {
		item["lastKey"] = &types.AttributeValueMemberM{Value: st.LastKey}
	}
	cond := expression.AttributeNotExists(expression.Name("migration"))
	if exists {
		cond = expression.Name("scanned").Equal(expression.Value(prev.Scanned)).
			And(expression.Name("changed").Equal(expression.Value(prev.Changed)))
	}
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("build progress condition: %w", err)
	}
	_, err = cfg.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(tn), Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ErrConcurrentRun
	}
	if err != nil {
		return fmt.Errorf("record progress in %s: %w", tn, err)
	}
	return nil
}

func runOne(ctx context.Context, cfg Config, m Migration) (Progress, error) {
	p := Progress{Migration: m.Name}
	st, err := read(ctx, cfg, m.Name)
	if err != nil {
		return p, err
	}
	p.Scanned, p.Changed = st.Scanned, st.Changed
	if st.Done {
		p.Done, p.AlreadyDone = true, true
		cfg.Progress(p)
		return p, nil
	}
	if cfg.DryRun {
		st = state{Migration: m.Name} // a dry run looks at the whole table
	}
	exists := st.StartedAt != ""
	tn, err := cfg.name(m.Table)
	if err != nil {
		return p, err
	}
	if d, err := cfg.DB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(tn)}); err == nil && d.Table != nil && d.Table.ItemCount != nil {
		p.Estimate = *d.Table.ItemCount
	} else if err != nil {
		return p, fmt.Errorf("describe %s: %w", tn, err)
	}
	e, err := expression.NewBuilder().WithFilter(m.Needs).Build()
	if err != nil {
		return p, fmt.Errorf("build filter: %w", err)
	}
	start := cfg.Now()
	if st.StartedAt == "" {
		st.StartedAt = start.UTC().Format(time.RFC3339)
	}
	st.Release, st.Shape = m.Release, shapes.Migration
	lastKey := st.LastKey
	if len(lastKey) == 0 {
		st.Left = 0 // a new pass from the table's start finds them again
	}
	for {
		out, err := scanPage(ctx, cfg, &dynamodb.ScanInput{
			TableName: aws.String(tn), ConsistentRead: aws.Bool(true), Limit: aws.Int32(cfg.PageSize),
			FilterExpression: e.Filter(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			ExclusiveStartKey: lastKey,
		})
		if err != nil {
			return p, err
		}
		changed, left, err := changePage(ctx, cfg, m, tn, out.Items)
		if err != nil {
			return p, err
		}
		p.ThisRun += int64(out.ScannedCount)
		p.ChangedThisRun += changed
		prev := st
		st.Scanned += int64(out.ScannedCount)
		st.Changed += changed
		st.Left += left
		st.LastKey = out.LastEvaluatedKey
		st.Done = len(out.LastEvaluatedKey) == 0 && st.Left == 0
		now := cfg.Now()
		st.UpdatedAt = now.UTC().Format(time.RFC3339)
		if st.Done {
			st.FinishedAt = st.UpdatedAt
		}
		if !cfg.DryRun {
			if err := save(ctx, cfg, st, prev, exists); err != nil {
				return p, err
			}
			exists = true
		}
		p.Scanned, p.Changed, p.Left, p.Done = st.Scanned, st.Changed, st.Left, len(out.LastEvaluatedKey) == 0
		p.Elapsed = now.Sub(start)
		cfg.Progress(p)
		if len(out.LastEvaluatedKey) == 0 {
			return p, nil
		}
		lastKey = out.LastEvaluatedKey
		if cfg.Rate > 0 {
			due := time.Duration(float64(p.ThisRun) / cfg.Rate * float64(time.Second))
			if wait := due - cfg.Now().Sub(start); wait > 0 {
				if err := cfg.Sleep(ctx, wait); err != nil {
					return p, err
				}
			}
		}
	}
}

// scanPage reads one page, backing off while DynamoDB throttles it (beyond
// the SDK's own retries).
func scanPage(ctx context.Context, cfg Config, in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
	for attempt := 1; ; attempt++ {
		out, err := cfg.DB.Scan(ctx, in)
		if err == nil {
			return out, nil
		}
		if !retryable(err) || attempt >= cfg.MaxAttempts {
			return nil, fmt.Errorf("scan %s: %w", aws.ToString(in.TableName), err)
		}
		if err := retries.Wait(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

// retries is the wait before the next try of a throttled scan or a
// cancelled change: 25 ms doubling to 1.6 s, jittered (ddbcall's policy).
var retries = ddbcall.Backoff{Base: 12500 * time.Microsecond, Cap: 1600 * time.Millisecond}

// changePage changes the items of one page, Workers at a time (each item's
// transaction is independent), and counts those changed and those left.
func changePage(ctx context.Context, cfg Config, m Migration, table string, items []map[string]types.AttributeValue) (changed, left int64, err error) {
	var mu sync.Mutex
	var errs []error
	work := make(chan map[string]types.AttributeValue)
	var wg sync.WaitGroup
	for range min(cfg.Workers, max(len(items), 1)) {
		wg.Go(func() {
			for item := range work {
				did, err := change(ctx, cfg, m, table, item)
				mu.Lock()
				switch {
				case errors.Is(err, errGaveUp):
					left++
				case err != nil:
					errs = append(errs, err)
				case did:
					changed++
				}
				mu.Unlock()
			}
		})
	}
	for _, item := range items {
		work <- item
	}
	close(work)
	wg.Wait()
	return changed, left, errors.Join(errs...)
}

// errGaveUp: an item's change kept being cancelled (contention or
// throttling) for MaxAttempts tries; a later run takes it again.
var errGaveUp = errors.New("gave up after repeated cancellations")

// change upgrades one item: its transaction, retried with backoff when
// cancelled by contention or throttling, and planned again from a
// consistent read when its condition failed (the item moved since the
// scan). It reports whether it changed the item.
func change(ctx context.Context, cfg Config, m Migration, table string, item map[string]types.AttributeValue) (bool, error) {
	for attempt := 1; attempt <= cfg.MaxAttempts; attempt++ {
		actions, what, err := m.Change(cfg.Tables, item)
		if err != nil {
			return false, err
		}
		if len(actions) == 0 {
			return false, nil
		}
		if cfg.DryRun {
			cfg.Planned(m.Name, what)
			return true, nil
		}
		_, err = cfg.DB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
		if err == nil {
			return true, nil
		}
		var tc *types.TransactionCanceledException
		if !errors.As(err, &tc) && !retryable(err) {
			return false, fmt.Errorf("change %s: %w", what, err)
		}
		if tc != nil && conditionFailed(tc) {
			out, err := cfg.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: m.Key(item), ConsistentRead: aws.Bool(true)})
			if err != nil {
				return false, fmt.Errorf("read again for %s: %w", what, err)
			}
			if out.Item == nil {
				return false, nil // deleted meanwhile: nothing to migrate
			}
			item = out.Item
			continue
		}
		// Contention or throttling.
		if err := retries.Wait(ctx, attempt); err != nil {
			return false, err
		}
	}
	return false, errGaveUp
}

func conditionFailed(tc *types.TransactionCanceledException) bool {
	for _, r := range tc.CancellationReasons {
		if aws.ToString(r.Code) == "ConditionalCheckFailed" {
			return true
		}
	}
	return false
}

func retryable(err error) bool {
	var pt *types.ProvisionedThroughputExceededException
	var tc *types.TransactionConflictException
	var rl *types.RequestLimitExceeded
	var ts *types.ThrottlingException
	return errors.As(err, &pt) || errors.As(err, &tc) || errors.As(err, &rl) || errors.As(err, &ts)
}

// Pending returns the migrations not yet done that have items to change:
// for each one without a done record, the first page of its scan that finds
// an item it needs. `make run` uses it to say that a DATA_DIR of an earlier
// release needs `make migrate`.
func Pending(ctx context.Context, db DB, names map[string]string) ([]string, error) {
	cfg := withDefaults(Config{DB: db, Tables: names})
	var out []string
	for _, m := range All() {
		st, err := read(ctx, cfg, m.Name)
		if err != nil {
			return nil, err
		}
		if st.Done {
			continue
		}
		tn, err := cfg.name(m.Table)
		if err != nil {
			return nil, err
		}
		e, err := expression.NewBuilder().WithFilter(m.Needs).Build()
		if err != nil {
			return nil, fmt.Errorf("build filter: %w", err)
		}
		var lastKey map[string]types.AttributeValue
		for {
			page, err := db.Scan(ctx, &dynamodb.ScanInput{
				TableName: aws.String(tn), FilterExpression: e.Filter(), ExclusiveStartKey: lastKey,
				ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			})
			if err != nil {
				return nil, fmt.Errorf("scan %s: %w", tn, err)
			}
			if len(page.Items) > 0 {
				out = append(out, m.Name)
				break
			}
			if lastKey = page.LastEvaluatedKey; len(lastKey) == 0 {
				break
			}
		}
	}
	return out, nil
}
