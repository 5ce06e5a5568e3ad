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
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/tables"
)

func productKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: id}}
}

func decodeProduct(item map[string]types.AttributeValue) (products.Product, error) {
	var p products.Product
	if err := attributevalue.UnmarshalMap(item, &p); err != nil {
		return products.Product{}, err
	}
	p.Derive()
	return p, nil
}

// CreateProduct adds a product with a new id.
func (s *Store) CreateProduct(ctx context.Context, n products.New) (products.Product, error) {
	now := s.stamp()
	p := products.Product{
		ProductID: s.cfg.NewID(), Name: strings.TrimSpace(n.Name), Description: n.Description,
		Category: n.Category, PriceCents: *n.PriceCents, Stock: *n.Stock,
		CreatedAt: now, UpdatedAt: now, Version: 1,
	}
	item, err := attributevalue.MarshalMap(p)
	if err != nil {
		return products.Product{}, fmt.Errorf("create product: %w", err)
	}
	cond := notExists("productId")
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.t.Products), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
	}); err != nil {
		return products.Product{}, fmt.Errorf("create product %s: %w", p.ProductID, classify(err))
	}
	return p, nil
}

// GetProduct returns product id. Codes: NotFound.
func (s *Store) GetProduct(ctx context.Context, id string) (products.Product, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.t.Products), Key: productKey(id)})
	if err != nil {
		return products.Product{}, fmt.Errorf("get product %s: %w", id, classify(err))
	}
	if out.Item == nil {
		return products.Product{}, errcode.Errorf(errcode.NotFound, "product %s not found", id)
	}
	p, err := decodeProduct(out.Item)
	if err != nil {
		return products.Product{}, fmt.Errorf("get product %s: %w", id, err)
	}
	return p, nil
}

// PatchProduct changes the given fields of product id. A StockDelta is added
// in the same write, on the condition that the stock stays within 0 and
// products.MaxStock. Codes: NotFound, PreconditionFailed, Conflict (the delta
// would take the stock out of range).
func (s *Store) PatchProduct(ctx context.Context, id string, p products.Patch, ifMatch *int64) (products.Product, error) {
	upd := expression.Set(expression.Name("updatedAt"), expression.Value(s.stamp())).
		Add(expression.Name("version"), expression.Value(1))
	if p.Name != nil {
		upd = upd.Set(expression.Name("name"), expression.Value(strings.TrimSpace(*p.Name)))
	}
	if p.Description != nil {
		upd = upd.Set(expression.Name("description"), expression.Value(*p.Description))
	}
	if p.Category != nil {
		upd = upd.Set(expression.Name("category"), expression.Value(*p.Category))
	}
	if p.PriceCents != nil {
		upd = upd.Set(expression.Name("priceCents"), expression.Value(*p.PriceCents))
	}
	if p.Stock != nil {
		upd = upd.Set(expression.Name("stock"), expression.Value(*p.Stock))
	}
	cond := expression.AttributeExists(expression.Name("productId"))
	if ifMatch != nil {
		cond = cond.And(expression.Name("version").Equal(expression.Value(*ifMatch)))
	}
	if d := p.StockDelta; d != nil {
		upd = upd.Add(expression.Name("stock"), expression.Value(*d))
		if *d < 0 {
			cond = cond.And(expression.Name("stock").GreaterThanEqual(expression.Value(-*d)))
		} else {
			cond = cond.And(expression.Name("stock").LessThanEqual(expression.Value(products.MaxStock - *d)))
		}
	}
	e := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.t.Products), Key: productKey(id),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if ccf, ok := isConditionFailed(err); ok {
		if ccf.Item == nil {
			return products.Product{}, errcode.Errorf(errcode.NotFound, "product %s not found", id)
		}
		old, err := decodeProduct(ccf.Item)
		switch {
		case err != nil:
			return products.Product{}, fmt.Errorf("patch product %s: %w", id, err)
		case ifMatch != nil && old.Version != *ifMatch:
			return products.Product{}, errcode.Errorf(errcode.PreconditionFailed, "product %s is not at version %d", id, *ifMatch)
		case p.StockDelta == nil:
			return products.Product{}, fmt.Errorf("patch product %s: condition failed at version %d: %w", id, old.Version, err)
		}
		return products.Product{}, &errcode.Error{
			Code: errcode.Conflict, Products: []string{id},
			Message: fmt.Sprintf("product %s has %d in stock: a change of %d would take it out of 0..%d", id, old.Stock, *p.StockDelta, products.MaxStock),
		}
	}
	if err != nil {
		return products.Product{}, fmt.Errorf("patch product %s: %w", id, classify(err))
	}
	prod, err := decodeProduct(out.Attributes)
	if err != nil {
		return products.Product{}, fmt.Errorf("patch product %s: %w", id, err)
	}
	return prod, nil
}

// DeleteProduct removes product id. Codes: NotFound, PreconditionFailed.
func (s *Store) DeleteProduct(ctx context.Context, id string, ifMatch *int64) error {
	cond := expression.AttributeExists(expression.Name("productId"))
	if ifMatch != nil {
		cond = cond.And(expression.Name("version").Equal(expression.Value(*ifMatch)))
	}
	e := mustBuild(expression.NewBuilder().WithCondition(cond))
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.t.Products), Key: productKey(id),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if ccf, ok := isConditionFailed(err); ok {
		if ccf.Item == nil {
			return errcode.Errorf(errcode.NotFound, "product %s not found", id)
		}
		return errcode.Errorf(errcode.PreconditionFailed, "product %s is not at version %d", id, *ifMatch)
	}
	if err != nil {
		return fmt.Errorf("delete product %s: %w", id, classify(err))
	}
	return nil
}

// ListProductsByCategory returns the products of a category, oldest first.
// Codes: Invalid (a position of another list).
func (s *Store) ListProductsByCategory(ctx context.Context, category string, limit int, after *Position) (Page[products.Product], error) {
	var start map[string]string
	if after != nil {
		if err := checkKey(after.Key, "category", "productId"); err != nil || len(after.Shards) > 0 {
			return Page[products.Product]{}, badCursor()
		}
		start = after.Key
	}
	kc := expression.Key("category").Equal(expression.Value(category))
	e := mustBuild(expression.NewBuilder().WithKeyCondition(kc))
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.t.Products), IndexName: aws.String(tables.ProductsByCategory),
		KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		Limit: aws.Int32(ClampLimit(limit) + 1), ExclusiveStartKey: keyToAV(start),
	})
	if err != nil {
		return Page[products.Product]{}, fmt.Errorf("list category %s: %w", category, classify(err))
	}
	items := make([]products.Product, 0, len(out.Items))
	for _, it := range out.Items {
		p, err := decodeProduct(it)
		if err != nil {
			return Page[products.Product]{}, fmt.Errorf("list category %s: %w", category, err)
		}
		items = append(items, p)
	}
	page, err := pageOf(items, int(ClampLimit(limit)), out.LastEvaluatedKey, func(p products.Product) map[string]string {
		return map[string]string{"category": p.Category, "productId": p.ProductID}
	})
	if err != nil {
		return Page[products.Product]{}, fmt.Errorf("list category %s: %w", category, err)
	}
	return page, nil
}

// getProducts reads products by id (strongly consistent when asked); missing
// ids are absent from the map.
func (s *Store) getProducts(ctx context.Context, ids []string, consistent bool) (map[string]products.Product, error) {
	out := make(map[string]products.Product, len(ids))
	for start := 0; start < len(ids); start += 100 {
		chunk := ids[start:min(start+100, len(ids))]
		keys := make([]map[string]types.AttributeValue, 0, len(chunk))
		for _, id := range chunk {
			keys = append(keys, productKey(id))
		}
		req := map[string]types.KeysAndAttributes{s.t.Products: {Keys: keys, ConsistentRead: aws.Bool(consistent)}}
		for attempt := 1; len(req) > 0; attempt++ {
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("get products: %w", classify(err))
			}
			for _, it := range res.Responses[s.t.Products] {
				p, err := decodeProduct(it)
				if err != nil {
					return nil, fmt.Errorf("get products: %w", err)
				}
				out[p.ProductID] = p
			}
			req = res.UnprocessedKeys
			if len(req) > 0 {
				if attempt >= s.cfg.MaxAttempts {
					return nil, contention("get products")
				}
				if err := s.backoff(ctx, attempt); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}
