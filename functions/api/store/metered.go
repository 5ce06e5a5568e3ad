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

const total = types.ReturnConsumedCapacityTotal

func record(ctx context.Context, write bool, ccs ...types.ConsumedCapacity) {
	if m := meterOf(ctx); m != nil {
		m.add(write, ccs...)
	}
}

func one(cc *types.ConsumedCapacity) []types.ConsumedCapacity {
	if cc == nil {
		return nil
	}
	return []types.ConsumedCapacity{*cc}
}

func (m metered) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	in.ReturnConsumedCapacity = total
	out, err := m.db.GetItem(ctx, in, opts...)
	if out != nil {
		record(ctx, false, one(out.ConsumedCapacity)...)
	} else {
		record(ctx, false)
	}
	return out, err
}

func (m metered) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	in.ReturnConsumedCapacity = total
	out, err := m.db.PutItem(ctx, in, opts...)
	if out != nil {
		record(ctx, true, one(out.ConsumedCapacity)...)
	} else {
		record(ctx, true)
	}
	return out, err
}

func (m metered) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	in.ReturnConsumedCapacity = total
	out, err := m.db.UpdateItem(ctx, in, opts...)
	if out != nil {
		record(ctx, true, one(out.ConsumedCapacity)...)
	} else {
		record(ctx, true)
	}
	return out, err
}

func (m metered) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	in.ReturnConsumedCapacity = total
	out, err := m.db.DeleteItem(ctx, in, opts...)
	if out != nil {
		record(ctx, true, one(out.ConsumedCapacity)...)
	} else {
		record(ctx, true)
	}
	return out, err
}

func (m metered) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	in.ReturnConsumedCapacity = total
	out, err := m.db.Query(ctx, in, opts...)
	if out != nil {
		record(ctx, false, one(out.ConsumedCapacity)...)
	} else {
		record(ctx, false)
	}
	return out, err
}

func (m metered) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	in.ReturnConsumedCapacity = total
	out, err := m.db.BatchGetItem(ctx, in, opts...)
	if out != nil {
		record(ctx, false, out.ConsumedCapacity...)
	} else {
		record(ctx, false)
	}
	return out, err
}

func (m metered) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	in.ReturnConsumedCapacity = total
	out, err := m.db.TransactWriteItems(ctx, in, opts...)
	if out != nil {
		record(ctx, true, out.ConsumedCapacity...)
	} else {
		record(ctx, true)
	}
	return out, err
}

func (m metered) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	in.ReturnConsumedCapacity = total
	out, err := m.db.TransactGetItems(ctx, in, opts...)
	if out != nil {
		record(ctx, false, out.ConsumedCapacity...)
	} else {
		record(ctx, false)
	}
	return out, err
}
