package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shopstream/shopstream/shared/carts"
	"github.com/shopstream/shopstream/shared/clock"
	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/shapes"
)

// getCart returns the user's cart as stored (Version 0: none). A cart past its
// expiry that TTL has not removed yet (TTL may lag by up to two days) reads as
// empty but keeps its version, so a write replaces it conditionally.
func (s *Store) getCart(ctx context.Context, userID string, consistent bool) (carts.Cart, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.t.Carts), Key: userKey(userID), ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return carts.Cart{}, fmt.Errorf("get cart %s: %w", userID, classify(err))
	}
	c := carts.Cart{UserID: userID, Lines: map[string]carts.Line{}}
	if out.Item == nil {
		return c, nil
	}
	if err := attributevalue.UnmarshalMap(out.Item, &c); err != nil {
		return carts.Cart{}, fmt.Errorf("get cart %s: %w", userID, err)
	}
	if c.Lines == nil || int64(c.ExpiresAt) <= s.nowEpoch() {
		c.Lines = map[string]carts.Line{}
	}
	return c, nil
}

// SetCartLine puts quantity of productID in userID's cart (0 removes it) and
// renews the cart's expiry. A cart is created only for a registered user,
// as an order is placed only for one; a removal from no cart writes
// nothing. Codes: NotFound (product, user not registered), Conflict (cart
// full).
func (s *Store) SetCartLine(ctx context.Context, userID, productID string, quantity int) (carts.View, error) {
	if quantity > 0 {
		_, err := s.getProduct(ctx, productID, false)
		if err != nil && errcode.Of(err) == errcode.NotFound {
			// An eventually consistent read may lag the product's creation:
			// a miss is read again strongly consistent before it is a 404.
			_, err = s.getProduct(ctx, productID, true)
		}
		if err != nil {
			return carts.View{}, fmt.Errorf("set cart line: %w", err)
		}
	}
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		c, err := s.getCart(ctx, userID, true)
		if err != nil {
			return carts.View{}, fmt.Errorf("set cart line: %w", err)
		}
		if c.Version == 0 {
			if quantity == 0 {
				return s.view(ctx, c) // nothing to take out of no cart
			}
			if err := s.registered(ctx, userID); err != nil {
				return carts.View{}, fmt.Errorf("set cart line: %w", err)
			}
		}
		now := s.now()
		if err := c.Set(productID, quantity, clock.Format(now)); err != nil {
			return carts.View{}, err
		}
		cond := notExists("userId")
		if c.Version > 0 {
			cond = mustBuild(expression.NewBuilder().WithCondition(expression.Name("version").Equal(expression.Value(c.Version))))
		}
		c.Version++
		c.Shape = shapes.Cart
		c.UpdatedAt = clock.Format(now)
		c.ExpiresAt = clock.EpochOf(now.Add(s.cfg.CartTTL))
		item, err := attributevalue.MarshalMap(c)
		if err != nil {
			return carts.View{}, fmt.Errorf("set cart line %s: %w", userID, err)
		}
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(s.t.Carts), Item: item,
			ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values(),
		})
		if _, ok := isConditionFailed(err); ok {
			continue // changed since read
		}
		if err != nil {
			return carts.View{}, fmt.Errorf("set cart line %s: %w", userID, classify(err))
		}
		return s.view(ctx, c)
	}
	return carts.View{}, contention("set cart line")
}

// GetCart returns userID's cart with current product names and prices; a
// line of a product that no longer exists (read strongly consistent) is
// shown unavailable, outside the total. A user without a cart has an
// empty one. The cart is read strongly consistent: a line the user just
// added shows at once (an eventually consistent read may miss it).
func (s *Store) GetCart(ctx context.Context, userID string) (carts.View, error) {
	c, err := s.getCart(ctx, userID, true)
	if err != nil {
		return carts.View{}, err
	}
	return s.view(ctx, c)
}

func (s *Store) view(ctx context.Context, c carts.Cart) (carts.View, error) {
	v := carts.View{UserID: c.UserID, Lines: []carts.ViewLine{}, Version: c.Version}
	if len(c.Lines) == 0 {
		return v, nil
	}
	v.ExpiresAt = c.ExpiresAt
	// The products strongly consistent too: the cart shows each line as
	// an order from it would take it now, a product deleted, renamed or
	// repriced a moment ago included (an eventually consistent read could
	// show a line available whose order is refused, or a price the order
	// does not charge). 1 RRU a product of up to 4 KB instead of 0.5.
	ids := c.ProductIDs()
	ps, err := s.getProducts(ctx, ids, true)
	if err != nil {
		return carts.View{}, fmt.Errorf("cart %s: %w", c.UserID, err)
	}
	for _, id := range ids {
		l := c.Lines[id]
		p, ok := ps[id]
		if !ok {
			// Deleted since it was added: an order from the cart names it.
			v.Lines = append(v.Lines, carts.ViewLine{ProductID: id, Quantity: l.Quantity, AddedAt: l.AddedAt})
			continue
		}
		vl := carts.ViewLine{
			ProductID: id, ProductName: p.Name, UnitPriceCents: p.PriceCents, Quantity: l.Quantity,
			LineTotalCents: p.PriceCents * int64(l.Quantity), AddedAt: l.AddedAt, Available: true,
		}
		v.Lines = append(v.Lines, vl)
		v.TotalCents += vl.LineTotalCents
	}
	return v, nil
}

// registered checks that userID is a registered user (a strongly
// consistent read of the user's key: one written just before is found).
// Codes: NotFound.
func (s *Store) registered(ctx context.Context, userID string) error {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.t.Users), Key: userKey(userID), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("userId"),
	})
	if err != nil {
		return fmt.Errorf("read user %s: %w", userID, classify(err))
	}
	if out.Item == nil {
		return errcode.Errorf(errcode.NotFound, "user %s is not registered", userID)
	}
	return nil
}
