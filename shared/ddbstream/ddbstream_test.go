package ddbstream

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestValueCoversEveryType(t *testing.T) {
	// Lambda delivers images as DynamoDB JSON; decode them the way the runtime does.
	const img = `{
		"s": {"S": "text"}, "n": {"N": "12.5"}, "b": {"B": "AQI="}, "t": {"BOOL": true},
		"z": {"NULL": true}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]}, "bs": {"BS": ["AQ=="]},
		"l": {"L": [{"S": "x"}, {"N": "1"}, {"M": {"k": {"BOOL": false}}}]},
		"m": {"M": {"inner": {"L": [{"NULL": true}]}, "n": {"N": "-3"}}}
	}`
	var in map[string]events.DynamoDBAttributeValue
	if err := json.Unmarshal([]byte(img), &in); err != nil {
		t.Fatal(err)
	}
	got, err := Image(in)
	if err != nil {
		t.Fatalf("image: %v", err)
	}
	want := map[string]types.AttributeValue{
		"s":  &types.AttributeValueMemberS{Value: "text"},
		"n":  &types.AttributeValueMemberN{Value: "12.5"},
		"b":  &types.AttributeValueMemberB{Value: []byte{1, 2}},
		"t":  &types.AttributeValueMemberBOOL{Value: true},
		"z":  &types.AttributeValueMemberNULL{Value: true},
		"ss": &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns": &types.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1}}},
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberS{Value: "x"}, &types.AttributeValueMemberN{Value: "1"},
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberBOOL{Value: false}}},
		}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"inner": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberNULL{Value: true}}},
			"n":     &types.AttributeValueMemberN{Value: "-3"},
		}},
	}
	opts := cmpopts.IgnoreUnexported(
		types.AttributeValueMemberS{}, types.AttributeValueMemberN{}, types.AttributeValueMemberB{},
		types.AttributeValueMemberBOOL{}, types.AttributeValueMemberNULL{}, types.AttributeValueMemberSS{},
		types.AttributeValueMemberNS{}, types.AttributeValueMemberBS{}, types.AttributeValueMemberL{}, types.AttributeValueMemberM{})
	if d := cmp.Diff(want, got, opts); d != "" {
		t.Errorf("image (-want +got):\n%s", d)
	}
	// And back: EventImage is Image's inverse, to the JSON.
	back, err := json.Marshal(EventImage(got))
	if err != nil {
		t.Fatal(err)
	}
	var again map[string]events.DynamoDBAttributeValue
	if err := json.Unmarshal(back, &again); err != nil {
		t.Fatal(err)
	}
	round, err := Image(again)
	if err != nil {
		t.Fatalf("image of %s: %v", back, err)
	}
	if d := cmp.Diff(want, round, opts); d != "" {
		t.Errorf("round trip through EventImage (-want +got):\n%s", d)
	}
}

func TestDecode(t *testing.T) {
	in := map[string]events.DynamoDBAttributeValue{
		"orderId": events.NewStringAttribute("o1"),
		"total":   events.NewNumberAttribute("1500"),
		"lines": events.NewListAttribute([]events.DynamoDBAttributeValue{
			events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"qty": events.NewNumberAttribute("2")}),
		}),
	}
	var got struct {
		OrderID string `dynamodbav:"orderId"`
		Total   int64  `dynamodbav:"total"`
		Lines   []struct {
			Qty int `dynamodbav:"qty"`
		} `dynamodbav:"lines"`
	}
	if err := Decode(in, &got); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if got.OrderID != "o1" || got.Total != 1500 || len(got.Lines) != 1 || got.Lines[0].Qty != 2 {
		t.Errorf("got %+v", got)
	}
	if err := Decode(map[string]events.DynamoDBAttributeValue{"total": events.NewStringAttribute("x")}, &got); err == nil {
		t.Errorf("a string into an int: got nil error, want one")
	}
}

func TestIsTTLRemoval(t *testing.T) {
	svc := &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}
	tests := []struct {
		name string
		rec  events.DynamoDBEventRecord
		want bool
	}{
		{"ttl removal", events.DynamoDBEventRecord{EventName: "REMOVE", UserIdentity: svc}, true},
		{"user delete", events.DynamoDBEventRecord{EventName: "REMOVE"}, false},
		{"lowercase service", events.DynamoDBEventRecord{EventName: "REMOVE", UserIdentity: &events.DynamoDBUserIdentity{Type: "service", PrincipalID: "dynamodb.amazonaws.com"}}, false},
		{"other principal", events.DynamoDBEventRecord{EventName: "REMOVE", UserIdentity: &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "lambda.amazonaws.com"}}, false},
		{"modify", events.DynamoDBEventRecord{EventName: "MODIFY", UserIdentity: svc}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsTTLRemoval(tt.rec); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTableName(t *testing.T) {
	for arn, want := range map[string]string{
		"arn:aws:dynamodb:us-east-1:123456789012:table/shopstream-dev-orders/stream/2026-11-22T10:49:09.424": "shopstream-dev-orders",
		"arn:aws:dynamodb:ddblocal:000000000000:table/orders/stream/x":                                       "orders",
		"arn:aws:dynamodb:us-east-1:123456789012:table/no-stream-label":                                      "no-stream-label",
		"not an arn": "",
		"":           "",
	} {
		if got := TableName(events.DynamoDBEventRecord{EventSourceArn: arn}); got != want {
			t.Errorf("%s: got %q, want %q", arn, got, want)
		}
	}
}

func TestMalformedValuesAreErrors(t *testing.T) {
	tests := []struct {
		name string
		img  map[string]events.DynamoDBAttributeValue
	}{
		{"zero value", map[string]events.DynamoDBAttributeValue{"x": {}}},
		{"zero value in a list", map[string]events.DynamoDBAttributeValue{"l": events.NewListAttribute([]events.DynamoDBAttributeValue{{}})}},
		{"zero value in a map", map[string]events.DynamoDBAttributeValue{"m": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"k": {}})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Image(tt.img); err == nil {
				t.Errorf("got %v, nil error; want an error", got)
			}
			var out map[string]any
			if err := Decode(tt.img, &out); err == nil {
				t.Errorf("decode: got nil error, want one")
			}
		})
	}
	if _, err := Value(events.DynamoDBAttributeValue{}); err == nil {
		t.Errorf("value: got nil error, want one")
	}
}

func TestEmptyCollectionsAndBinaries(t *testing.T) {
	got, err := Image(map[string]events.DynamoDBAttributeValue{
		"l": events.NewListAttribute(nil), "m": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{}),
		"b": events.NewBinaryAttribute([]byte{}),
	})
	if err != nil {
		t.Fatalf("image: %v", err)
	}
	if l, ok := got["l"].(*types.AttributeValueMemberL); !ok || len(l.Value) != 0 {
		t.Errorf("l: got %#v, want an empty list", got["l"])
	}
	if m, ok := got["m"].(*types.AttributeValueMemberM); !ok || len(m.Value) != 0 {
		t.Errorf("m: got %#v, want an empty map", got["m"])
	}
	if b, ok := got["b"].(*types.AttributeValueMemberB); !ok || len(b.Value) != 0 {
		t.Errorf("b: got %#v, want empty bytes", got["b"])
	}
}
