package store

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// metered asks DynamoDB for the consumed capacity of every call and adds it,
// with the call, to the Meter of the call's context. The figures feed the
// API's metrics. On AWS they are what DynamoDB charges; DynamoDB Local
// under-reports transactions (it charges a TransactWriteItems once per table,
// not per item), so locally the units of the transactional routes are not
// AWS's: the cost table of docs/data-model.md counts them by AWS's rules
// (infra/local/capacity) instead.
type metered struct{ db DB }

// pass makes a call that asks for its consumed capacity (through ask, the
// input's ReturnConsumedCapacity) and adds the call and what it consumed
// (read from the answer by consumed) to the context's Meter.
func pass[O any](ctx context.Context, write bool, ask *types.ReturnConsumedCapacity, call func() (*O, error), consumed func(*O) []types.ConsumedCapacity) (*O, error) {
	*ask = types.ReturnConsumedCapacityTotal
	out, err := call()
	if m := meterOf(ctx); m != nil {
		var ccs []types.ConsumedCapacity
		if out != nil {
			ccs = consumed(out)
		}
		m.add(write, ccs...)
	}
	return out, err
}

func one(cc *types.ConsumedCapacity) []types.ConsumedCapacity {
	if cc == nil {
		return nil
	}
	return []types.ConsumedCapacity{*cc}
}

func (m metered) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return pass(ctx, false, &in.ReturnConsumedCapacity, func() (*dynamodb.GetItemOutput, error) { return m.db.GetItem(ctx, in, opts...) },
		func(o *dynamodb.GetItemOutput) []types.ConsumedCapacity { return one(o.ConsumedCapacity) })
}

func (m metered) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return pass(ctx, true, &in.ReturnConsumedCapacity, func() (*dynamodb.PutItemOutput, error) { return m.db.PutItem(ctx, in, opts...) },
		func(o *dynamodb.PutItemOutput) []types.ConsumedCapacity { return one(o.ConsumedCapacity) })
}

func (m metered) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return pass(ctx, true, &in.ReturnConsumedCapacity, func() (*dynamodb.UpdateItemOutput, error) { return m.db.UpdateItem(ctx, in, opts...) },
		func(o *dynamodb.UpdateItemOutput) []types.ConsumedCapacity { return one(o.ConsumedCapacity) })
}

func (m metered) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return pass(ctx, true, &in.ReturnConsumedCapacity, func() (*dynamodb.DeleteItemOutput, error) { return m.db.DeleteItem(ctx, in, opts...) },
		func(o *dynamodb.DeleteItemOutput) []types.ConsumedCapacity { return one(o.ConsumedCapacity) })
}

func (m metered) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return pass(ctx, false, &in.ReturnConsumedCapacity, func() (*dynamodb.QueryOutput, error) { return m.db.Query(ctx, in, opts...) },
		func(o *dynamodb.QueryOutput) []types.ConsumedCapacity { return one(o.ConsumedCapacity) })
}

func (m metered) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return pass(ctx, false, &in.ReturnConsumedCapacity, func() (*dynamodb.BatchGetItemOutput, error) { return m.db.BatchGetItem(ctx, in, opts...) },
		func(o *dynamodb.BatchGetItemOutput) []types.ConsumedCapacity { return o.ConsumedCapacity })
}

func (m metered) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return pass(ctx, true, &in.ReturnConsumedCapacity, func() (*dynamodb.TransactWriteItemsOutput, error) { return m.db.TransactWriteItems(ctx, in, opts...) },
		func(o *dynamodb.TransactWriteItemsOutput) []types.ConsumedCapacity { return o.ConsumedCapacity })
}

func (m metered) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	return pass(ctx, false, &in.ReturnConsumedCapacity, func() (*dynamodb.TransactGetItemsOutput, error) { return m.db.TransactGetItems(ctx, in, opts...) },
		func(o *dynamodb.TransactGetItemsOutput) []types.ConsumedCapacity { return o.ConsumedCapacity })
}
