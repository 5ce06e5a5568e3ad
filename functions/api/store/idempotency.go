package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/clock"
	"github.com/shopstream/shopstream/shared/shapes"
)

// Remembered is what an idempotency key holds: a fingerprint of the request
// that used it first, and what its caller kept for a replay, as the caller
// gave it (the store never reads into it).
type Remembered struct {
	Key         string      `dynamodbav:"idempotencyKey"`
	RequestHash string      `dynamodbav:"requestHash"`
	CreatedAt   string      `dynamodbav:"createdAt"`
	ExpiresAt   clock.Epoch `dynamodbav:"expiresAt"`
	Shape       int         `dynamodbav:"shape,omitempty"`
	// Kept is the item's "response" attribute: opaque to the store.
	Kept types.AttributeValue `dynamodbav:"-"`
}

// ErrKeyUsed is returned by a write whose idempotency key another request
// used first; Recall then gives what that request kept.
var ErrKeyUsed = errors.New("idempotency key already used")

// Claim is an idempotency key that a write claims in its own transaction:
// Key (already scoped to the caller and route), the request's fingerprint,
// and Keep, which makes from the write's result what a replay gets back.
// The store keeps what Keep returns as it is given.
type Claim[T any] struct {
	Key         string
	RequestHash string
	Keep        func(T) (types.AttributeValue, error)
}

func idemKey(k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"idempotencyKey": &types.AttributeValueMemberS{Value: k}}
}

// Recall returns what key remembers; ok is false when the key is unused or
// expired (TTL may lag: expired records are ignored).
func (s *Store) Recall(ctx context.Context, key string) (Remembered, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.t.IdempotencyKeys), Key: idemKey(key), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Remembered{}, false, fmt.Errorf("recall idempotency key: %w", classify(err))
	}
	if out.Item == nil {
		return Remembered{}, false, nil
	}
	var r Remembered
	if err := attributevalue.UnmarshalMap(out.Item, &r); err != nil {
		return Remembered{}, false, fmt.Errorf("recall idempotency key: %w", err)
	}
	r.Kept = out.Item[keptAttr]
	if int64(r.ExpiresAt) <= s.nowEpoch() {
		return Remembered{}, false, nil
	}
	return r, true, nil
}

// claimCondition lets a key be written when unused or expired.
func (s *Store) claimCondition() expression.Expression {
	c := expression.AttributeNotExists(expression.Name("idempotencyKey")).
		Or(expression.Name("expiresAt").LessThanEqual(expression.Value(s.nowEpoch())))
	return mustBuild(expression.NewBuilder().WithCondition(c))
}

// keptAttr is the attribute that holds what a key's first request kept.
const keptAttr = "response"

func (s *Store) remembered(key, requestHash string, kept types.AttributeValue) (map[string]types.AttributeValue, error) {
	if kept == nil {
		return nil, errors.New("nothing to keep")
	}
	now := s.now()
	item, err := attributevalue.MarshalMap(Remembered{
		Key: key, RequestHash: requestHash,
		CreatedAt: clock.Format(now), ExpiresAt: clock.EpochOf(now.Add(s.cfg.IdempotencyTTL)), Shape: shapes.IdempotencyKey,
	})
	if err != nil {
		return nil, err
	}
	item[keptAttr] = kept
	return item, nil
}

// claimPut is the transaction action that claims an idempotency key.
func (s *Store) claimPut(key, requestHash string, kept types.AttributeValue) (types.TransactWriteItem, error) {
	item, err := s.remembered(key, requestHash, kept)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	c := s.claimCondition()
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.t.IdempotencyKeys), Item: item,
		ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values(),
	}}, nil
}

// Remember keeps what a request that changed nothing (a refusal such as
// "short of stock") is to replay under key, so a replay gets the same
// answer. It returns ErrKeyUsed when another request claimed the key first.
func (s *Store) Remember(ctx context.Context, key, requestHash string, kept types.AttributeValue) error {
	item, err := s.remembered(key, requestHash, kept)
	if err != nil {
		return fmt.Errorf("remember idempotency key: %w", err)
	}
	c := s.claimCondition()
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.t.IdempotencyKeys), Item: item,
		ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values(),
	})
	if _, ok := isConditionFailed(err); ok {
		return ErrKeyUsed
	}
	if err != nil {
		return fmt.Errorf("remember idempotency key: %w", classify(err))
	}
	return nil
}
