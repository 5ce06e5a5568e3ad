// Package replicas gives tests a DynamoDB client whose eventually
// consistent reads come from a replica behind: DynamoDB may answer such a
// read with an item as it was before a recent write, and reads of
// different items are each behind or not on their own. DynamoDB Local
// never does either, so tests of what the store makes of such reads wrap
// their client in Behind.
package replicas

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
)

// Behind answers the eventually consistent GetItem and BatchGetItem reads
// of the items it holds with those items as they were; every other call
// goes to DB.
type Behind struct {
	store.DB
	// Items are the items as they were, by table, then by the value of
	// their key attribute (tables with a partition key only).
	Items map[string]map[string]map[string]types.AttributeValue
}

// old is the item Behind holds for key in table.
func (b *Behind) old(table string, key map[string]types.AttributeValue) (map[string]types.AttributeValue, bool) {
	if len(key) != 1 {
		return nil, false
	}
	for _, v := range key {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			it, ok := b.Items[table][s.Value]
			return it, ok
		}
	}
	return nil, false
}

// GetItem answers an eventually consistent read of an item held with it
// as it was.
func (b *Behind) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if !aws.ToBool(in.ConsistentRead) {
		if it, ok := b.old(aws.ToString(in.TableName), in.Key); ok {
			return &dynamodb.GetItemOutput{Item: it}, nil
		}
	}
	return b.DB.GetItem(ctx, in, opts...)
}

// BatchGetItem answers the items held of an eventually consistent batch
// with them as they were, and reads the rest.
func (b *Behind) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	rest := map[string]types.KeysAndAttributes{}
	for table, ka := range in.RequestItems {
		var keys []map[string]types.AttributeValue
		for _, k := range ka.Keys {
			if it, ok := b.old(table, k); ok && !aws.ToBool(ka.ConsistentRead) {
				out.Responses[table] = append(out.Responses[table], it)
			} else {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			ka.Keys = keys
			rest[table] = ka
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	more, err := b.DB.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: rest, ReturnConsumedCapacity: in.ReturnConsumedCapacity}, opts...)
	if err != nil {
		return nil, fmt.Errorf("batch get of the items not behind (%d tables): %w", len(rest), err)
	}
	for table, items := range more.Responses {
		out.Responses[table] = append(out.Responses[table], items...)
	}
	out.UnprocessedKeys = more.UnprocessedKeys
	out.ConsumedCapacity = more.ConsumedCapacity
	return out, nil
}
