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

// Response is a stored response, replayed for a repeated idempotency key.
type Response struct {
	Status      int    `dynamodbav:"status"`
	ContentType string `dynamodbav:"contentType"`
	Location    string `dynamodbav:"location,omitempty"`
	Body        string `dynamodbav:"body"`
}

// Remembered is what an idempotency key holds: a fingerprint of the request
// that used it first, and the response it got.
type Remembered struct {
	Key         string      `dynamodbav:"idempotencyKey"`
	RequestHash string      `dynamodbav:"requestHash"`
	Response    Response    `dynamodbav:"response"`
	CreatedAt   string      `dynamodbav:"createdAt"`
	ExpiresAt   clock.Epoch `dynamodbav:"expiresAt"`
	Shape       int         `dynamodbav:"shape,omitempty"`
}

// ErrKeyUsed is returned by a write whose idempotency key another request
// used first; Recall then gives that request's response.
var ErrKeyUsed = errors.New("idempotency key already used")

// Idempotency is an idempotency key to claim in a write: Key (already scoped
// to the caller and route), the request's fingerprint, and how to render the
// response of a successful write.
type Idempotency struct {
	Key         string
	RequestHash string
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

func (s *Store) remembered(idem Idempotency, resp Response) (map[string]types.AttributeValue, error) {
	now := s.now()
	return attributevalue.MarshalMap(Remembered{
		Key: idem.Key, RequestHash: idem.RequestHash, Response: resp,
		CreatedAt: clock.Format(now), ExpiresAt: clock.EpochOf(now.Add(s.cfg.IdempotencyTTL)), Shape: shapes.IdempotencyKey,
	})
}

// claimPut is the transaction action that claims an idempotency key.
func (s *Store) claimPut(idem Idempotency, resp Response) (types.TransactWriteItem, error) {
	item, err := s.remembered(idem, resp)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	c := s.claimCondition()
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.t.IdempotencyKeys), Item: item,
		ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values(),
	}}, nil
}

// Remember stores the response of a request that changed nothing (a refusal
// such as "short of stock"), so a replay gets the same answer. It returns
// ErrKeyUsed when another request claimed the key first.
func (s *Store) Remember(ctx context.Context, idem Idempotency, resp Response) error {
	item, err := s.remembered(idem, resp)
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
