package tracing

import (
	"context"
	"errors"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Span attributes of an AWS call, beside OpenTelemetry's rpc.* and aws.*.
const (
	AttrOutcome  = "shopstream.outcome"   // ok, conflict, throttled, condition_failed, error
	AttrRetries  = "shopstream.retries"   // attempts after the first
	AttrThrottle = "shopstream.throttles" // attempts refused for throughput
	AttrUnits    = "aws.dynamodb.consumed_capacity.units"
	AttrTables   = "aws.dynamodb.table_names"
	AttrIndex    = "aws.dynamodb.index_name"
	AttrItems    = "aws.dynamodb.items" // actions of a transaction or batch
	AttrBucket   = "aws.s3.bucket"
)

// AWSMiddleware adds the span middleware to one operation's stack (a
// client's APIOptions).
func (t *Tracing) AWSMiddleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("shopstream/tracing",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			// Only within a sampled span: a process's housekeeping (a table
			// check at start) makes no traces of one span.
			if !trace.SpanContextFromContext(ctx).IsSampled() {
				return next.HandleInitialize(ctx, in)
			}
			service, op := middleware.GetServiceID(ctx), middleware.GetOperationName(ctx)
			ctx, span := t.tracer.Start(ctx, service+"."+op, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("rpc.system", "aws-api"), attribute.String("rpc.service", service), attribute.String("rpc.method", op)))
			defer span.End()
			span.SetAttributes(inputAttrs(in.Parameters)...)
			out, md, err := next.HandleInitialize(ctx, in)
			span.SetAttributes(outputAttrs(out.Result)...)
			retries, throttles := 0, 0
			if ar, ok := retry.GetAttemptResults(md); ok {
				retries = max(len(ar.Results)-1, 0)
				for _, r := range ar.Results {
					if r.Err != nil && outcome(r.Err) == "throttled" {
						throttles++
					}
				}
			}
			span.SetAttributes(attribute.Int(AttrRetries, retries), attribute.Int(AttrThrottle, throttles), attribute.String(AttrOutcome, outcome(err)))
			if err != nil {
				span.SetStatus(codes.Error, errCode(err))
			}
			return out, md, err
		}), middleware.After)
}

// outcome sorts an AWS error into what an operator acts on.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		o := "error"
		for _, r := range tc.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "TransactionConflict":
				return "conflict"
			case "ThrottlingError", "ProvisionedThroughputExceeded":
				o = "throttled"
			case "ConditionalCheckFailed":
				if o == "error" {
					o = "condition_failed"
				}
			}
		}
		return o
	}
	switch errCode(err) {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded", "SlowDown":
		return "throttled"
	case "TransactionConflictException":
		return "conflict"
	case "ConditionalCheckFailedException":
		return "condition_failed"
	}
	return "error"
}

func errCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "DeadlineExceeded"
	}
	return "error"
}

// inputAttrs names the tables, index or bucket of a call (never a key or an
// item: they may hold personal data), and asks DynamoDB for the consumed
// capacity, which costs nothing.
func inputAttrs(in any) []attribute.KeyValue {
	var tables []string
	var index *string
	items := 0
	switch v := in.(type) {
	case *dynamodb.GetItemInput:
		tables, v.ReturnConsumedCapacity = []string{aws.ToString(v.TableName)}, orTotal(v.ReturnConsumedCapacity)
	case *dynamodb.PutItemInput:
		tables, v.ReturnConsumedCapacity = []string{aws.ToString(v.TableName)}, orTotal(v.ReturnConsumedCapacity)
	case *dynamodb.UpdateItemInput:
		tables, v.ReturnConsumedCapacity = []string{aws.ToString(v.TableName)}, orTotal(v.ReturnConsumedCapacity)
	case *dynamodb.DeleteItemInput:
		tables, v.ReturnConsumedCapacity = []string{aws.ToString(v.TableName)}, orTotal(v.ReturnConsumedCapacity)
	case *dynamodb.QueryInput:
		tables, index, v.ReturnConsumedCapacity = []string{aws.ToString(v.TableName)}, v.IndexName, orTotal(v.ReturnConsumedCapacity)
	case *dynamodb.ScanInput:
		tables, index, v.ReturnConsumedCapacity = []string{aws.ToString(v.TableName)}, v.IndexName, orTotal(v.ReturnConsumedCapacity)
	case *dynamodb.BatchGetItemInput:
		for name, ka := range v.RequestItems {
			tables = append(tables, name)
			items += len(ka.Keys)
		}
		v.ReturnConsumedCapacity = orTotal(v.ReturnConsumedCapacity)
	case *dynamodb.BatchWriteItemInput:
		for name, rs := range v.RequestItems {
			tables = append(tables, name)
			items += len(rs)
		}
		v.ReturnConsumedCapacity = orTotal(v.ReturnConsumedCapacity)
	case *dynamodb.TransactWriteItemsInput:
		for _, a := range v.TransactItems {
			tables = append(tables, writeTable(a))
		}
		items = len(v.TransactItems)
		v.ReturnConsumedCapacity = orTotal(v.ReturnConsumedCapacity)
	case *dynamodb.TransactGetItemsInput:
		for _, a := range v.TransactItems {
			if a.Get != nil {
				tables = append(tables, aws.ToString(a.Get.TableName))
			}
		}
		items = len(v.TransactItems)
		v.ReturnConsumedCapacity = orTotal(v.ReturnConsumedCapacity)
	case *s3.PutObjectInput:
		return []attribute.KeyValue{attribute.String(AttrBucket, aws.ToString(v.Bucket))}
	case *s3.GetObjectInput:
		return []attribute.KeyValue{attribute.String(AttrBucket, aws.ToString(v.Bucket))}
	case *s3.ListObjectsV2Input:
		return []attribute.KeyValue{attribute.String(AttrBucket, aws.ToString(v.Bucket))}
	default:
		return nil
	}
	slices.Sort(tables)
	attrs := []attribute.KeyValue{attribute.StringSlice(AttrTables, slices.Compact(tables))}
	if index != nil {
		attrs = append(attrs, attribute.String(AttrIndex, *index))
	}
	if items > 0 {
		attrs = append(attrs, attribute.Int(AttrItems, items))
	}
	return attrs
}

func orTotal(v types.ReturnConsumedCapacity) types.ReturnConsumedCapacity {
	if v == "" {
		return types.ReturnConsumedCapacityTotal
	}
	return v
}

func writeTable(a types.TransactWriteItem) string {
	switch {
	case a.Put != nil:
		return aws.ToString(a.Put.TableName)
	case a.Update != nil:
		return aws.ToString(a.Update.TableName)
	case a.Delete != nil:
		return aws.ToString(a.Delete.TableName)
	case a.ConditionCheck != nil:
		return aws.ToString(a.ConditionCheck.TableName)
	}
	return ""
}

// outputAttrs are the consumed capacity units of a DynamoDB answer.
func outputAttrs(out any) []attribute.KeyValue {
	var ccs []types.ConsumedCapacity
	switch v := out.(type) {
	case *dynamodb.GetItemOutput:
		ccs = one(v.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		ccs = one(v.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		ccs = one(v.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		ccs = one(v.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		ccs = one(v.ConsumedCapacity)
	case *dynamodb.ScanOutput:
		ccs = one(v.ConsumedCapacity)
	case *dynamodb.BatchGetItemOutput:
		ccs = v.ConsumedCapacity
	case *dynamodb.BatchWriteItemOutput:
		ccs = v.ConsumedCapacity
	case *dynamodb.TransactWriteItemsOutput:
		ccs = v.ConsumedCapacity
	case *dynamodb.TransactGetItemsOutput:
		ccs = v.ConsumedCapacity
	default:
		return nil
	}
	if len(ccs) == 0 {
		return nil
	}
	var units float64
	for _, cc := range ccs {
		units += aws.ToFloat64(cc.CapacityUnits)
	}
	return []attribute.KeyValue{attribute.Float64(AttrUnits, units)}
}

func one(cc *types.ConsumedCapacity) []types.ConsumedCapacity {
	if cc == nil {
		return nil
	}
	return []types.ConsumedCapacity{*cc}
}

// DynamoDB is the DynamoDB client option that gives every call its own
// client span (DynamoDB.PutItem, ...): the tables, the consumed capacity
// units (DynamoDB is asked for them), the retries and their throttles, and
// the outcome. With tracing off it adds nothing.
// dynamodb.NewFromConfig(cfg, tr.DynamoDB()).
func (t *Tracing) DynamoDB() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		if t.On() {
			o.APIOptions = append(o.APIOptions, t.AWSMiddleware)
		}
	}
}

// S3 is the S3 client option that gives every call its own client span
// (S3.PutObject: the bucket, retries, outcome): s3.NewFromConfig(cfg, tr.S3()).
func (t *Tracing) S3() func(*s3.Options) {
	return func(o *s3.Options) {
		if t.On() {
			o.APIOptions = append(o.APIOptions, t.AWSMiddleware)
		}
	}
}
