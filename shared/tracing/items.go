package tracing

import (
	"context"
	"encoding/hex"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/shopstream/shopstream/shared/tables"
)

// ItemAttr is the attribute a written item carries its writer's W3C
// traceparent in ("00-<trace id>-<span id>-01", 55 bytes; 57 with the
// name). It is optional: items without it (earlier releases', unsampled
// requests') are processed as before, under a new root.
const ItemAttr = "tp"

// Traceparent is the W3C traceparent of ctx's span, or "" when the span is
// not sampled (tracing off, or a request the sampler dropped): an item then
// carries nothing.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	var b [55]byte
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	copy(b[52:], "-01")
	return string(b[:])
}

// ParseTraceparent reads a W3C traceparent (version 00). ok is false for an
// empty or malformed one, or one with an all-zero id.
func ParseTraceparent(s string) (sc trace.SpanContext, ok bool) {
	if len(s) != 55 || s[0:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if _, err := hex.Decode(tid[:], []byte(s[3:35])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(sid[:], []byte(s[36:52])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(flags[:], []byte(s[53:55])); err != nil {
		return trace.SpanContext{}, false
	}
	sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
	return sc, sc.IsValid()
}

// FromImage is the span context a stream record's image carries (ItemAttr);
// ok is false when it has none or a malformed one.
func FromImage(image map[string]events.DynamoDBAttributeValue) (trace.SpanContext, bool) {
	v, present := image[ItemAttr]
	if !present || v.DataType() != events.DataTypeString {
		return trace.SpanContext{}, false
	}
	return ParseTraceparent(v.String())
}

// StreamedTables are the physical names, among n, of the tables with a
// stream (orders, reviews, products, carts): the items the processors
// follow, which Stamp marks.
func StreamedTables(n tables.Names) []string {
	var names []string
	for _, t := range tables.All() {
		if p := n.Of(t.Name); p != "" && t.Stream != tables.NoStream {
			names = append(names, p)
		}
	}
	return names
}

// Stamp returns the client option that writes the call's traceparent
// (Traceparent of its context) on every item a write puts or updates in
// tables (physical names): PutItem, UpdateItem, BatchWriteItem's puts and
// TransactWriteItems' puts and updates. Given after the client's DynamoDB
// option (tr.DynamoDB()), the traceparent is the write call's own span, so a
// processor's link points at the very call that wrote the record. A delete
// carries none: its stream
// record's old image holds the traceparent of the item's last writer. Outside
// a sampled span nothing is written.
func Stamp(tables ...string) func(*dynamodb.Options) {
	set := make(map[string]bool, len(tables))
	for _, t := range tables {
		set[t] = true
	}
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("shopstream/traceparent",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if tp := Traceparent(ctx); tp != "" {
						if ids := stampInput(in.Parameters, set, tp); len(ids) > 0 {
							trace.SpanFromContext(ctx).SetAttributes(attribute.StringSlice(AttrWritten, ids))
						}
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	}
}

// stampInput stamps a write's items in tables and returns their ids
// (ItemID).
func stampInput(in any, tables map[string]bool, tp string) (ids []string) {
	switch v := in.(type) {
	case *dynamodb.PutItemInput:
		if tables[aws.ToString(v.TableName)] {
			v.Item = stampItem(v.Item, tp)
			ids = append(ids, avItemID(v.Item))
		}
	case *dynamodb.UpdateItemInput:
		if tables[aws.ToString(v.TableName)] {
			v.UpdateExpression, v.ExpressionAttributeNames, v.ExpressionAttributeValues =
				stampUpdate(v.UpdateExpression, v.ExpressionAttributeNames, v.ExpressionAttributeValues, tp)
			ids = append(ids, avItemID(v.Key))
		}
	case *dynamodb.BatchWriteItemInput:
		for name, rs := range v.RequestItems {
			if !tables[name] {
				continue
			}
			for _, r := range rs {
				if r.PutRequest != nil {
					r.PutRequest.Item = stampItem(r.PutRequest.Item, tp)
					ids = append(ids, avItemID(r.PutRequest.Item))
				}
			}
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, a := range v.TransactItems {
			switch {
			case a.Put != nil && tables[aws.ToString(a.Put.TableName)]:
				a.Put.Item = stampItem(a.Put.Item, tp)
				ids = append(ids, avItemID(a.Put.Item))
			case a.Update != nil && tables[aws.ToString(a.Update.TableName)]:
				a.Update.UpdateExpression, a.Update.ExpressionAttributeNames, a.Update.ExpressionAttributeValues =
					stampUpdate(a.Update.UpdateExpression, a.Update.ExpressionAttributeNames, a.Update.ExpressionAttributeValues, tp)
				ids = append(ids, avItemID(a.Update.Key))
			}
		}
	}
	return ids
}

func avItemID(item map[string]types.AttributeValue) string {
	return itemID(func(name string) string {
		if s, ok := item[name].(*types.AttributeValueMemberS); ok {
			return s.Value
		}
		return ""
	})
}

func stampItem(item map[string]types.AttributeValue, tp string) map[string]types.AttributeValue {
	if item == nil {
		item = map[string]types.AttributeValue{}
	}
	item[ItemAttr] = &types.AttributeValueMemberS{Value: tp}
	return item
}

// setClause returns where the assignments of an update expression's SET
// clause start, or -1 without one. SET is a reserved word, so it cannot be an
// attribute name; the expression builder starts each clause on a line of its
// own.
func setClause(e string) int {
	for i := 0; i+4 <= len(e); i++ {
		if (i == 0 || isSpace(e[i-1])) && strings.EqualFold(e[i:i+3], "SET") && isSpace(e[i+3]) {
			j := i + 3
			for j < len(e) && isSpace(e[j]) {
				j++
			}
			return j
		}
	}
	return -1
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// The placeholders of the stamp; the expression builder numbers its own
// (#0, :0), so these cannot collide with them.
const (
	namePlaceholder  = "#traceparent"
	valuePlaceholder = ":traceparent"
)

// stampUpdate adds "tp = <traceparent>" to an update expression's SET clause,
// or a SET clause of its own. The expression builder cannot extend a built
// expression, so this one assignment is written here, with placeholders.
func stampUpdate(expr *string, names map[string]string, values map[string]types.AttributeValue, tp string) (*string, map[string]string, map[string]types.AttributeValue) {
	if names == nil {
		names = map[string]string{}
	}
	if values == nil {
		values = map[string]types.AttributeValue{}
	}
	_, done := names[namePlaceholder]
	names[namePlaceholder] = ItemAttr
	values[valuePlaceholder] = &types.AttributeValueMemberS{Value: tp}
	if done {
		return expr, names, values // a retry of the same input
	}
	assign := namePlaceholder + " = " + valuePlaceholder
	e := aws.ToString(expr)
	if at := setClause(e); at >= 0 {
		e = e[:at] + assign + ", " + e[at:]
	} else {
		e = "SET " + assign + "\n" + e
	}
	return aws.String(e), names, values
}
