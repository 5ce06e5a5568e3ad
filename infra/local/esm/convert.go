package esm

import (
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// toEvent turns a DynamoDB Streams record into the record Lambda delivers.
func toEvent(r streamtypes.Record, streamArn string) events.DynamoDBEventRecord {
	ev := events.DynamoDBEventRecord{
		AWSRegion:      "us-east-1",
		EventID:        aws.ToString(r.EventID),
		EventName:      string(r.EventName),
		EventSource:    "aws:dynamodb",
		EventVersion:   aws.ToString(r.EventVersion),
		EventSourceArn: streamArn,
	}
	if r.UserIdentity != nil {
		ev.UserIdentity = &events.DynamoDBUserIdentity{Type: aws.ToString(r.UserIdentity.Type), PrincipalID: aws.ToString(r.UserIdentity.PrincipalId)}
	}
	if d := r.Dynamodb; d != nil {
		ev.Change = events.DynamoDBStreamRecord{
			Keys:           image(d.Keys),
			NewImage:       image(d.NewImage),
			OldImage:       image(d.OldImage),
			SequenceNumber: aws.ToString(d.SequenceNumber),
			SizeBytes:      aws.ToInt64(d.SizeBytes),
			StreamViewType: string(d.StreamViewType),
		}
		if d.ApproximateCreationDateTime != nil {
			ev.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
		}
	}
	return ev
}

func image(m map[string]streamtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = value(v)
	}
	return out
}

func value(v streamtypes.AttributeValue) events.DynamoDBAttributeValue {
	switch x := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return events.NewStringAttribute(x.Value)
	case *streamtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(x.Value)
	case *streamtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(x.Value)
	case *streamtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(x.Value)
	case *streamtypes.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *streamtypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(x.Value)
	case *streamtypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(x.Value)
	case *streamtypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(x.Value)
	case *streamtypes.AttributeValueMemberL:
		list := make([]events.DynamoDBAttributeValue, len(x.Value))
		for i, e := range x.Value {
			list[i] = value(e)
		}
		return events.NewListAttribute(list)
	case *streamtypes.AttributeValueMemberM:
		return events.NewMapAttribute(image(x.Value))
	default:
		return events.NewNullAttribute()
	}
}
