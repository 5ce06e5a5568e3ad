package ddbfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// deleteWorkers is how many conditional deletes the sweeper runs at once.
const deleteWorkers = 8

// scanPage is how many items one scan page of the sweeper reads.
const scanPage = 100

// maxTTLAge mirrors DynamoDB, which ignores expiry times more than five years
// in the past.
const maxTTLAge = 5 * 365 * 24 * time.Hour

// Sweep deletes every expired item of every table whose TTL is enabled, once,
// and returns how many it deleted. Each delete is conditional on the item still
// being expired, so an item whose expiry was extended meanwhile survives.
func (f *Front) Sweep(ctx context.Context) (int, error) {
	total := 0
	var errs []error
	p := dynamodb.NewListTablesPaginator(f.cfg.DynamoDB, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return total, fmt.Errorf("sweep: list tables: %w", err)
		}
		for _, name := range page.TableNames {
			if f.cfg.SweepTables != nil && !f.cfg.SweepTables(name) {
				continue
			}
			n, err := f.sweepTable(ctx, name)
			total += n
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return total, errors.Join(errs...)
}

func (f *Front) sweepTable(ctx context.Context, table string) (int, error) {
	attrName, ok := f.ttl.get(table)
	if !ok {
		return 0, nil
	}
	var notFound *types.ResourceNotFoundException
	desc, err := f.cfg.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if errors.As(err, &notFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sweep %s: describe table: %w", table, err)
	}
	var keyNames []string
	for _, k := range desc.Table.KeySchema {
		keyNames = append(keyNames, aws.ToString(k.AttributeName))
	}
	streamArn := ""
	if s := desc.Table.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) {
		streamArn = aws.ToString(desc.Table.LatestStreamArn)
	}

	now := f.cfg.Now()
	attr := expression.Name(attrName)
	expired := expression.And(
		attr.LessThan(expression.Value(now.Unix())),
		attr.GreaterThan(expression.Value(now.Add(-maxTTLAge).Unix())),
	)
	proj := expression.NamesList(attr)
	for _, k := range keyNames {
		proj = proj.AddNames(expression.Name(k))
	}
	scanExpr, err := expression.NewBuilder().WithFilter(expired).WithProjection(proj).Build()
	if err != nil {
		return 0, fmt.Errorf("sweep %s: build scan: %w", table, err)
	}
	condExpr, err := expression.NewBuilder().WithCondition(expired).Build()
	if err != nil {
		return 0, fmt.Errorf("sweep %s: build condition: %w", table, err)
	}

	// Deleting while paging can make DynamoDB Local skip items, so scan again
	// until a pass finds nothing more to delete.
	total := 0
	for pass := 0; pass < 10; pass++ {
		n, err := f.sweepPass(ctx, table, streamArn, keyNames, scanExpr, condExpr, now)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
	return total, nil
}

func (f *Front) sweepPass(ctx context.Context, table, streamArn string, keyNames []string, scanExpr, condExpr expression.Expression, now time.Time) (int, error) {
	var notFound *types.ResourceNotFoundException
	total := 0
	p := dynamodb.NewScanPaginator(f.cfg.DynamoDB, &dynamodb.ScanInput{
		TableName:      aws.String(table),
		ConsistentRead: aws.Bool(true),
		// DynamoDB Local drops the first items of a scan page that reaches
		// 1 MB; small pages keep every page under it.
		Limit:                     aws.Int32(scanPage),
		FilterExpression:          scanExpr.Filter(),
		ProjectionExpression:      scanExpr.Projection(),
		ExpressionAttributeNames:  scanExpr.Names(),
		ExpressionAttributeValues: scanExpr.Values(),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if errors.As(err, &notFound) {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("sweep %s: scan: %w", table, err)
		}
		n, err := f.deleteExpired(ctx, table, streamArn, keyNames, page.Items, condExpr, now)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (f *Front) deleteExpired(ctx context.Context, table, streamArn string, keyNames []string,
	items []map[string]types.AttributeValue, cond expression.Expression, now time.Time) (int, error) {
	if len(items) == 0 {
		return 0, nil
	}
	if f.cfg.AfterScan != nil {
		f.cfg.AfterScan(table)
	}
	keys := make([]map[string]types.AttributeValue, 0, len(items))
	canon := make([]string, 0, len(items))
	for _, it := range items {
		c, ok := keyFromItem(it, keyNames)
		if !ok {
			continue
		}
		k := map[string]types.AttributeValue{}
		for _, n := range keyNames {
			k[n] = it[n]
		}
		keys = append(keys, k)
		canon = append(canon, c)
	}
	var entries []*ledgerEntry
	if streamArn != "" {
		after, err := f.positions.end(ctx, streamArn)
		if err != nil {
			return 0, fmt.Errorf("sweep %s: %w", table, err)
		}
		if entries, err = f.ledger.begin(streamArn, table, canon, now, after); err != nil {
			return 0, err
		}
	}
	// The deletes bypass the limits: the writes of these items they overlap
	// must not leave an image behind (imagecache.go).
	answered, done := f.limits.sweeping(ctx, table, keys)
	defer done()
	deleted := make([]bool, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	sem := make(chan struct{}, deleteWorkers)
	for i := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := f.cfg.DynamoDB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
				TableName:                 aws.String(table),
				Key:                       keys[i],
				ConditionExpression:       cond.Condition(),
				ExpressionAttributeNames:  cond.Names(),
				ExpressionAttributeValues: cond.Values(),
			})
			if err == nil || errors.As(err, new(*types.ConditionalCheckFailedException)) {
				answered(i) // decided: applied, or not
			}
			var ccf *types.ConditionalCheckFailedException
			switch {
			case err == nil:
				deleted[i] = true
			case errors.As(err, &ccf):
				// Extended or deleted meanwhile: not ours to remove.
			default:
				errs[i] = fmt.Errorf("sweep %s: delete: %w", table, err)
			}
		}(i)
	}
	wg.Wait()
	n := 0
	for _, d := range deleted {
		if d {
			n++
		}
	}
	if entries != nil {
		if err := f.ledger.settle(entries, deleted); err != nil {
			return n, err
		}
	}
	if streamArn != "" && n > 0 {
		// The sweeper deletes past the front. A pass after the page gives
		// its REMOVE records the second the page ended in, at most the
		// page's deletes late: tens of milliseconds, where AWS deletes
		// expired items up to days after they expire. A pass per delete
		// would take a quarter of the sweeper's throughput.
		if err := f.positions.follow(ctx, streamArn); err != nil {
			f.cfg.Logger.WarnContext(ctx, "follow stream", "table", table, "err", err.Error())
		}
	}
	return n, errors.Join(errs...)
}

// settlePending resolves deletions that were under way when the stack stopped:
// an item that is gone was deleted by the sweeper.
func (f *Front) settlePending(ctx context.Context) error {
	pending := f.ledger.pending()
	if len(pending) == 0 {
		return nil
	}
	deleted := make([]bool, len(pending))
	for i, e := range pending {
		key, err := itemFromKey(e.Key)
		if err != nil {
			return err
		}
		out, err := f.cfg.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(e.Table), Key: key, ConsistentRead: aws.Bool(true),
		})
		var notFound *types.ResourceNotFoundException
		switch {
		case errors.As(err, &notFound):
		case err != nil:
			return fmt.Errorf("settle ttl ledger: get %s: %w", e.Table, err)
		default:
			deleted[i] = len(out.Item) == 0
		}
	}
	return f.ledger.settle(pending, deleted)
}

// serviceIdentity is what DynamoDB Streams puts on the REMOVE records of TTL
// deletions (the Streams API spells the members with capitals; Lambda events
// with lower case).
var serviceIdentity = json.RawMessage(`{"PrincipalId":"dynamodb.amazonaws.com","Type":"Service"}`)

// annotate rewrites a GetRecords answer as DynamoDB Streams would have
// given it: each record's creation time to the second when the follower
// knows it (stamp.go), and the service userIdentity on the REMOVE records the
// sweeper caused.
func (f *Front) annotate(ctx context.Context, reqBody, respBody []byte) ([]byte, error) {
	var req struct{ ShardIterator string }
	if err := json.Unmarshal(reqBody, &req); err != nil {
		return nil, fmt.Errorf("decode get records request: %w", err)
	}
	streamArn := streamOfIterator(req.ShardIterator)
	shard := shardOfIterator(req.ShardIterator)
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(respBody, &resp); err != nil {
		return nil, fmt.Errorf("decode get records response: %w", err)
	}
	var records []map[string]json.RawMessage
	if err := json.Unmarshal(resp["Records"], &records); err != nil || len(records) == 0 {
		return respBody, nil
	}
	changes := make([]map[string]json.RawMessage, len(records))
	seqs := make([]string, len(records))
	behind := false
	for i, rec := range records {
		if json.Unmarshal(rec["dynamodb"], &changes[i]) != nil || json.Unmarshal(changes[i]["SequenceNumber"], &seqs[i]) != nil {
			continue
		}
		if _, covered := f.positions.stampOf(streamArn, shard, seqs[i]); !covered {
			behind = true
		}
	}
	if behind && shard != "" {
		// A reader ahead of the follower: a write's records can be read
		// before the pass the write started has found them.
		f.positions.reading(streamArn, shard)
		if err := f.positions.follow(ctx, streamArn); err != nil {
			f.cfg.Logger.WarnContext(ctx, "follow stream", "table", tableFromStreamARN(streamArn), "err", err.Error())
		}
	}
	changed := false
	for i, rec := range records {
		d := changes[i]
		if d == nil {
			continue
		}
		if sec, _ := f.positions.stampOf(streamArn, shard, seqs[i]); sec != unknown {
			if v, ok := restamp(d["ApproximateCreationDateTime"], sec); ok {
				d["ApproximateCreationDateTime"] = v
				raw, err := encodeJSON(d)
				if err != nil {
					return nil, fmt.Errorf("encode record %s: %w", seqs[i], err)
				}
				rec["dynamodb"] = raw
				changed = true
			}
		}
		var name string
		if json.Unmarshal(rec["eventName"], &name) != nil || name != "REMOVE" {
			continue
		}
		var keys map[string]map[string]json.RawMessage
		if json.Unmarshal(d["Keys"], &keys) != nil {
			continue
		}
		key, ok := keyFromJSON(keys)
		if !ok {
			continue
		}
		if f.ledger.isSweep(streamArn, key, seqs[i]) {
			rec["userIdentity"] = serviceIdentity
			changed = true
		}
	}
	if !changed {
		return respBody, nil
	}
	raw, err := encodeJSON(records)
	if err != nil {
		return nil, fmt.Errorf("encode records: %w", err)
	}
	resp["Records"] = raw
	return encodeJSON(resp)
}

// encodeJSON encodes v without escaping <, > and &, as DynamoDB Local
// writes its answers: json.Marshal would escape them even inside the
// records' raw values it passes on.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// streamOfIterator reads the stream ARN out of a DynamoDB Local shard iterator,
// which starts with it ("arn:...:table/T/stream/LABEL|...").
func streamOfIterator(it string) string {
	for i := 0; i < len(it); i++ {
		if it[i] == '|' {
			return it[:i]
		}
	}
	return it
}
