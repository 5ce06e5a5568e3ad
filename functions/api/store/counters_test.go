package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/users"
)

// TestUnreadableCounterLeavesTheProductServed: a counter on a catalog item
// that is not an integer (written by hand, or by a tool outside the
// product) is not the shopper's problem: the page, the category list and an
// order of the product are served, the counter shown as if none had been
// counted, and an error names the product and the attribute for the
// operator (make audit REPAIR=1 sets it from its markers).
func TestUnreadableCounterLeavesTheProductServed(t *testing.T) {
	ctx := context.Background()
	prefix := stacktest.Tables(t)
	db := stacktest.DynamoDB(t)
	var logs bytes.Buffer
	st := store.New(db, store.Config{Tables: store.TablesWithPrefix(prefix), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	p, err := st.CreateProduct(ctx, products.New{Name: "Kettle", Description: "Boils", Category: "kitchen", PriceCents: ptr[int64](500), Stock: ptr[int64](10)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateUser(ctx, "buyer", users.New{Email: "buyer@example.com", Name: "Buyer"}); err != nil {
		t.Fatal(err)
	}
	// unitsSold as text, reviewCount a fraction, ratingTotal fine.
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(tables.Physical(prefix, tables.Products)),
		Key:              map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: p.ProductID}},
		UpdateExpression: aws.String("SET unitsSold = :u, reviewCount = :c, ratingTotal = :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":u": &types.AttributeValueMemberS{Value: "lots"},
			":c": &types.AttributeValueMemberN{Value: "1.5"},
			":t": &types.AttributeValueMemberN{Value: "9"},
		},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(tables.Physical(prefix, tables.Users)),
		Key:                       map[string]types.AttributeValue{"userId": &types.AttributeValueMemberS{Value: "buyer"}},
		UpdateExpression:          aws.String("SET orderCount = :c"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberS{Value: "many"}},
	}); err != nil {
		t.Fatal(err)
	}
	settle()

	if u, err := st.GetUser(ctx, "buyer"); err != nil || u.OrderCount != 0 || u.Name != "Buyer" {
		t.Errorf("user: %+v, %v; want Buyer with the unreadable count as none counted", u, err)
	}
	got, err := st.GetProduct(ctx, p.ProductID)
	if err != nil {
		t.Fatalf("page: %v, want the product", err)
	}
	if got.Name != "Kettle" || got.Stock != 10 || got.UnitsSold != 0 || got.ReviewCount != 0 || got.RatingAverage != nil {
		t.Errorf("page: %+v, want Kettle, stock 10, the unreadable counters as none counted, no rating", got)
	}
	list, err := st.ListProductsByCategory(ctx, "kitchen", 10, nil)
	if err != nil || len(list.Items) != 1 || list.Items[0].Stock != 10 {
		t.Errorf("category list: %+v, %v; want the product with its stock", list.Items, err)
	}
	if _, err := st.PlaceOrder(ctx, "buyer", orders.Request{Items: []orders.Item{{ProductID: p.ProductID, Quantity: 2}}}, nil); err != nil {
		t.Errorf("order: %v, want it placed", err)
	}

	named := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct {
			Level     string `json:"level"`
			ProductID string `json:"productId"`
			UserID    string `json:"userId"`
			Attribute string `json:"attribute"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "ERROR" {
			named[rec.ProductID+rec.UserID+" "+rec.Attribute] = true
		}
	}
	for _, want := range []string{p.ProductID + " unitsSold", p.ProductID + " reviewCount", "buyer orderCount"} {
		if !named[want] {
			t.Errorf("no error logged for %s; logged %v", want, named)
		}
	}
	if named[p.ProductID+" ratingTotal"] {
		t.Error("an error logged for ratingTotal, which holds an integer")
	}
	// Read many times (the page, the list, the order), each counter is
	// logged once a minute by an instance, not at every read.
	if n := strings.Count(logs.String(), `"attribute":"unitsSold"`); n != 1 {
		t.Errorf("unitsSold logged %d times, want once", n)
	}
}
