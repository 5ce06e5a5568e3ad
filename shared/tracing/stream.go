package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Attributes of a stream batch's span and of its links.
const (
	AttrFunction    = "faas.name"
	AttrRecords     = "messaging.batch.message_count"
	AttrFailures    = "shopstream.failures"
	AttrUnlinked    = "shopstream.unlinked" // records without a (valid) traceparent
	AttrAgeMaxMs    = "shopstream.age.max_ms"
	AttrAgeP99Ms    = "shopstream.age.p99_ms"
	AttrItem        = "shopstream.item"   // on a link: the item's id (ItemID)
	AttrWritten     = "shopstream.items"  // on a write: the ids of the items it stamped (ItemID)
	AttrEvent       = "shopstream.event"  // on a link: INSERT, MODIFY, REMOVE, TTL
	AttrAgeMs       = "shopstream.age_ms" // on a link: now minus the record's creation time
	AttrMessageID   = "messaging.message.id"
	AttrSource      = "messaging.destination.name" // the table whose stream it is
	AttrRoute       = "http.route"
	AttrStatus      = "http.response.status_code"
	AttrMethod      = "http.request.method"
	AttrProblemType = "shopstream.problem"
)

// StreamHandler is a stream function's handler.
type StreamHandler func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// Stream wraps a stream function's handler in one span per batch ("process
// <table>"), a new root with a link per record to the span that wrote it
// (the traceparent of its new image, or of its old image for a removal).
// Each link says the record's item, event and age (freshness: now minus the
// record's ApproximateCreationDateTime). A record without a traceparent, or
// with a malformed one, gets no link and is processed all the same. The
// handler's calls (DynamoDB, S3, search) are the span's children.
func (t *Tracing) Stream(function string, h StreamHandler) StreamHandler {
	if !t.On() {
		return h
	}
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		now := time.Now()
		links, ages, unlinked := Links(ev, now)
		source := ""
		if len(ev.Records) > 0 {
			source = TableOf(ev.Records[0].EventSourceArn)
		}
		ctx, span := t.tracer.Start(ctx, "process "+source, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithNewRoot(), trace.WithLinks(links...),
			trace.WithAttributes(
				attribute.String(AttrFunction, function),
				attribute.String(AttrSource, source),
				attribute.Int(AttrRecords, len(ev.Records)),
				attribute.Int(AttrUnlinked, unlinked),
				attribute.Int64(AttrAgeMaxMs, Percentile(ages, 1).Milliseconds()),
				attribute.Int64(AttrAgeP99Ms, Percentile(ages, 0.99).Milliseconds()),
			))
		defer span.End()
		resp, err := h(ctx, ev)
		span.SetAttributes(attribute.Int(AttrFailures, len(resp.BatchItemFailures)))
		switch {
		case err != nil:
			span.SetStatus(codes.Error, "batch failed")
			span.SetAttributes(attribute.String(AttrOutcome, "error"))
		case len(resp.BatchItemFailures) > 0:
			span.SetStatus(codes.Error, "records failed")
			span.SetAttributes(attribute.String(AttrOutcome, "partial"))
		default:
			span.SetAttributes(attribute.String(AttrOutcome, "ok"))
		}
		return resp, err
	}
}

// Links are a batch's links to the spans that wrote its records, with the
// ages of all its records and how many records carried no valid
// traceparent.
func Links(ev events.DynamoDBEvent, now time.Time) (links []trace.Link, ages []time.Duration, unlinked int) {
	links = make([]trace.Link, 0, len(ev.Records))
	ages = make([]time.Duration, 0, len(ev.Records))
	for _, r := range ev.Records {
		age := time.Duration(0)
		if c := r.Change.ApproximateCreationDateTime.Time; !c.IsZero() {
			age = max(now.Sub(c), 0)
			ages = append(ages, age)
		}
		image, event := r.Change.NewImage, r.EventName
		if r.EventName == string(events.DynamoDBOperationTypeRemove) {
			image = r.Change.OldImage
			if r.UserIdentity != nil && r.UserIdentity.Type == "Service" && r.UserIdentity.PrincipalID == "dynamodb.amazonaws.com" {
				event = "TTL"
			}
		}
		sc, ok := FromImage(image)
		if !ok {
			unlinked++
			continue
		}
		links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
			attribute.String(AttrItem, ItemID(r.Change.Keys)),
			attribute.String(AttrEvent, event),
			attribute.String(AttrMessageID, r.EventID),
			attribute.Int64(AttrAgeMs, age.Milliseconds()),
		}})
	}
	return links, ages, unlinked
}

// ItemID names a record's item as `make trace` is given it, from its key:
// an order by its orderId, a review by productId/<user>, a product by its
// productId, a cart by <user>; <user> is UserHash of the user id, so no
// span holds one.
func ItemID(keys map[string]events.DynamoDBAttributeValue) string {
	return itemID(func(name string) string {
		if v, ok := keys[name]; ok && v.DataType() == events.DataTypeString {
			return v.String()
		}
		return ""
	})
}

func itemID(get func(string) string) string {
	order, product, user := get("orderId"), get("productId"), get("userId")
	switch {
	case order != "":
		return order
	case product != "" && user != "":
		return product + "/" + UserHash(user)
	case product != "":
		return product
	case user != "":
		return UserHash(user)
	}
	return ""
}

// UserHash stands for a user id in spans: the first 16 hex digits of its
// SHA-256, enough to tell users apart in one trace, and no user id.
func UserHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8])
}

// ReviewID is the item id of a review as spans hold it (ItemID), from the
// ids a user knows.
func ReviewID(productID, userID string) string { return productID + "/" + UserHash(userID) }

// TableOf is the table name of a stream ARN
// (arn:aws:dynamodb:region:account:table/NAME/stream/LABEL).
func TableOf(arn string) string {
	_, rest, ok := strings.Cut(arn, ":table/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// Percentile is the p-th (0 < p ≤ 1) of ds by the nearest-rank method; zero
// for none. ds is sorted in place.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(float64(len(ds))*p+0.999999) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}
