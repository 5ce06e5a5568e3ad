package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/reviews"
	"github.com/shopstream/shopstream/shared/shapes"
	"github.com/shopstream/shopstream/shared/tables"
)

func reviewKey(productID, userID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"productId": &types.AttributeValueMemberS{Value: productID},
		"userId":    &types.AttributeValueMemberS{Value: userID},
	}
}

func (s *Store) getReview(ctx context.Context, productID, userID string) (*reviews.Review, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.t.Reviews), Key: reviewKey(productID, userID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get review %s/%s: %w", productID, userID, classify(err))
	}
	if out.Item == nil {
		return nil, nil
	}
	var r reviews.Review
	if err := attributevalue.UnmarshalMap(out.Item, &r); err != nil {
		return nil, fmt.Errorf("get review %s/%s: %w", productID, userID, err)
	}
	return &r, nil
}

// PutReview writes userID's review of productID, replacing an earlier one; it
// reports whether the review is new. Product and user must exist, checked in
// the same transaction. Codes: NotFound (product or user).
func (s *Store) PutReview(ctx context.Context, productID, userID string, in reviews.Input) (reviews.Review, bool, error) {
	productCheck := mustBuild(expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name("productId"))))
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		old, err := s.getReview(ctx, productID, userID)
		if err != nil {
			return reviews.Review{}, false, fmt.Errorf("put review: %w", err)
		}
		now := s.stamp()
		r := reviews.Review{
			ProductID: productID, UserID: userID, Rating: *in.Rating,
			Title: strings.TrimSpace(in.Title), Body: in.Body,
			CreatedAt: now, UpdatedAt: now, Version: 1, Shape: shapes.Review,
		}
		cond := notExists("userId")
		if old != nil {
			r.CreatedAt, r.Version = old.CreatedAt, old.Version+1
			cond = mustBuild(expression.NewBuilder().WithCondition(expression.Name("version").Equal(expression.Value(old.Version))))
		}
		item, err := attributevalue.MarshalMap(r)
		if err != nil {
			return reviews.Review{}, false, fmt.Errorf("put review %s/%s: %w", productID, userID, err)
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{ConditionCheck: &types.ConditionCheck{
				TableName: aws.String(s.t.Products), Key: productKey(productID),
				ConditionExpression: productCheck.Condition(), ExpressionAttributeNames: productCheck.Names(),
			}},
			s.userExists(userID),
			{Put: &types.Put{
				TableName: aws.String(s.t.Reviews), Item: item,
				ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values(),
			}},
		}})
		c, ok := cancelled(err)
		switch {
		case err == nil:
			return r, old == nil, nil
		case ok && c.failed(0):
			return reviews.Review{}, false, errcode.Errorf(errcode.NotFound, "product %s not found", productID)
		case ok && c.failed(1):
			return reviews.Review{}, false, errcode.Errorf(errcode.NotFound, "user %s is not registered", userID)
		case ok && c.failed(2):
			// Written by someone else since the read: read again.
		case ok && c.retryable():
			if err := s.backoff(ctx, attempt); err != nil {
				return reviews.Review{}, false, err
			}
		default:
			return reviews.Review{}, false, fmt.Errorf("put review %s/%s: %w", productID, userID, classify(err))
		}
	}
	return reviews.Review{}, false, contention("put review")
}

// DeleteReview removes userID's review of productID. Codes: NotFound.
func (s *Store) DeleteReview(ctx context.Context, productID, userID string) error {
	e := mustBuild(expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name("userId"))))
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.t.Reviews), Key: reviewKey(productID, userID),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(),
	})
	if _, ok := isConditionFailed(err); ok {
		return errcode.Errorf(errcode.NotFound, "no review of product %s by user %s", productID, userID)
	}
	if err != nil {
		return fmt.Errorf("delete review %s/%s: %w", productID, userID, classify(err))
	}
	return nil
}

// ListProductReviews returns a product's reviews, newest first. Codes: Invalid
// (a position of another list).
func (s *Store) ListProductReviews(ctx context.Context, productID string, limit int, after *Position) (Page[reviews.Review], error) {
	return s.queryReviews(ctx, tables.ReviewsByTime, "productId", productID, limit, after)
}

// ListUserReviews returns a user's reviews, newest first. Codes: Invalid.
func (s *Store) ListUserReviews(ctx context.Context, userID string, limit int, after *Position) (Page[reviews.Review], error) {
	return s.queryReviews(ctx, tables.ReviewsByUser, "userId", userID, limit, after)
}

func (s *Store) queryReviews(ctx context.Context, index, attr, value string, limit int, after *Position) (Page[reviews.Review], error) {
	var start map[string]string
	if after != nil {
		if err := checkKey(after.Key, "productId", "userId", "createdAt"); err != nil || len(after.Shards) > 0 {
			return Page[reviews.Review]{}, badCursor()
		}
		start = after.Key
	}
	e := mustBuild(expression.NewBuilder().WithKeyCondition(expression.Key(attr).Equal(expression.Value(value))))
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.t.Reviews), IndexName: aws.String(index),
		KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ScanIndexForward: aws.Bool(false), Limit: aws.Int32(ClampLimit(limit) + 1), ExclusiveStartKey: keyToAV(start),
	})
	if err != nil {
		return Page[reviews.Review]{}, fmt.Errorf("list reviews by %s %s: %w", attr, value, classify(err))
	}
	items := make([]reviews.Review, 0, len(out.Items))
	if err := attributevalue.UnmarshalListOfMaps(out.Items, &items); err != nil {
		return Page[reviews.Review]{}, fmt.Errorf("list reviews by %s %s: %w", attr, value, err)
	}
	page, err := pageOf(items, int(ClampLimit(limit)), out.LastEvaluatedKey, func(r reviews.Review) map[string]string {
		return map[string]string{"productId": r.ProductID, "userId": r.UserID, "createdAt": r.CreatedAt}
	})
	if err != nil {
		return Page[reviews.Review]{}, fmt.Errorf("list reviews by %s %s: %w", attr, value, err)
	}
	return page, nil
}
