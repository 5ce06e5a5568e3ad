package store_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/functions/api/store/replicas"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/users"
)

// TestCartShowsProductsAsAnOrderWouldTakeThem: a cart read just after an
// admin deleted one of its products and repriced another shows them as an
// order from the cart would take them (unavailable, the new price), even
// where an eventually consistent read, which AWS allows to lag, still
// returns the products as they were.
func TestCartShowsProductsAsAnOrderWouldTakeThem(t *testing.T) {
	ctx := context.Background()
	prefix := stacktest.Tables(t)
	db := stacktest.DynamoDB(t)
	catalog := tables.Physical(prefix, tables.Products)
	sw := &switchable{DB: db}
	st := store.New(sw, store.Config{Tables: store.TablesWithPrefix(prefix)})
	if _, err := st.CreateUser(ctx, "u1", users.New{Email: "u1@example.com", Name: "U1"}); err != nil {
		t.Fatal(err)
	}
	gone, err := st.CreateProduct(ctx, products.New{Name: "Kettle", Category: "kitchen", PriceCents: ptr[int64](500), Stock: ptr[int64](10)})
	if err != nil {
		t.Fatal(err)
	}
	repriced, err := st.CreateProduct(ctx, products.New{Name: "Mug", Category: "kitchen", PriceCents: ptr[int64](300), Stock: ptr[int64](10)})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{gone.ProductID, repriced.ProductID} {
		if _, err := st.SetCartLine(ctx, "u1", id, 1); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]map[string]types.AttributeValue{}
	for _, id := range []string{gone.ProductID, repriced.ProductID} {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(catalog), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: id}}})
		if err != nil {
			t.Fatal(err)
		}
		before[id] = out.Item
	}
	if err := st.DeleteProduct(ctx, gone.ProductID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PatchProduct(ctx, repriced.ProductID, products.Patch{PriceCents: ptr[int64](350)}, nil); err != nil {
		t.Fatal(err)
	}
	// Eventually consistent reads of the catalog answer as a replica that
	// has seen neither change.
	sw.behind.Store(&replicas.Behind{DB: db, Items: map[string]map[string]map[string]types.AttributeValue{catalog: before}})
	v, err := st.GetCart(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range v.Lines {
		switch l.ProductID {
		case gone.ProductID:
			if l.Available {
				t.Errorf("line of the deleted product: %+v, want unavailable", l)
			}
		case repriced.ProductID:
			if !l.Available || l.UnitPriceCents != 350 {
				t.Errorf("line of the repriced product: %+v, want available at 350", l)
			}
		}
	}
	if v.TotalCents != 350 {
		t.Errorf("total %d, want 350: the repriced line alone", v.TotalCents)
	}
}
