// Package ddbstream turns the DynamoDB stream records Lambda delivers
// (aws-lambda-go's events types) into aws-sdk-go-v2 attribute values and
// domain structs, and back (EventImage), and says which records are TTL
// removals.
package ddbstream

import (
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Value converts one stream attribute value to the SDK's type. A value the
// runtime could not have decoded (the zero value, built in process) is an
// error, not a panic: aws-lambda-go's accessors panic on it.
func Value(v events.DynamoDBAttributeValue) (av types.AttributeValue, err error) {
	defer func() {
		if r := recover(); r != nil {
			av, err = nil, fmt.Errorf("malformed attribute value: %v", r)
		}
	}()
	return value(v)
}

func value(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeList:
		list := v.List()
		out := make([]types.AttributeValue, len(list))
		for i, e := range list {
			av, err := value(e)
			if err != nil {
				return nil, fmt.Errorf("list element %d: %w", i, err)
			}
			out[i] = av
		}
		return &types.AttributeValueMemberL{Value: out}, nil
	case events.DataTypeMap:
		m, err := image(v.Map())
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	default:
		return nil, fmt.Errorf("unsupported attribute data type %v", v.DataType())
	}
}

// Image converts a stream image (Keys, NewImage or OldImage) to an SDK item.
func Image(img map[string]events.DynamoDBAttributeValue) (item map[string]types.AttributeValue, err error) {
	defer func() {
		if r := recover(); r != nil {
			item, err = nil, fmt.Errorf("malformed attribute value: %v", r)
		}
	}()
	return image(img)
}

func image(img map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		av, err := value(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

// EventImage converts an SDK item to events' attribute values, whose JSON is
// DynamoDB's own (the inverse of Image).
func EventImage(item map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	out := make(map[string]events.DynamoDBAttributeValue, len(item))
	for k, v := range item {
		out[k] = EventValue(v)
	}
	return out
}

// EventValue converts one SDK attribute value (the inverse of Value); a nil
// or unknown member is NULL.
func EventValue(v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = EventValue(e)
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(EventImage(v.Value))
	}
	return events.NewNullAttribute()
}

// Decode unmarshals a stream image into out (a pointer to a struct with
// dynamodbav tags, or to a map).
func Decode(img map[string]events.DynamoDBAttributeValue, out any) error {
	item, err := Image(img)
	if err != nil {
		return err
	}
	if err := attributevalue.UnmarshalMap(item, out); err != nil {
		return fmt.Errorf("decode image: %w", err)
	}
	return nil
}

// IsTTLRemoval reports whether DynamoDB's TTL removed the item: a REMOVE made
// by the service principal. "Service" is case-sensitive.
func IsTTLRemoval(r events.DynamoDBEventRecord) bool {
	return r.EventName == string(events.DynamoDBOperationTypeRemove) &&
		r.UserIdentity != nil &&
		r.UserIdentity.Type == "Service" &&
		r.UserIdentity.PrincipalID == "dynamodb.amazonaws.com"
}

// TableName reads the table's name out of a record's eventSourceARN
// ("arn:aws:dynamodb:region:account:table/NAME/stream/LABEL"); "" when the
// ARN names no table.
func TableName(r events.DynamoDBEventRecord) string {
	_, rest, ok := strings.Cut(r.EventSourceArn, ":table/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}
