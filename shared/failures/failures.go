// Package failures holds what an event-source mapping leaves in the failure
// bucket when it gives up on a stream batch: the object Lambda writes to an S3
// on-failure destination (the invocation record with the batch's payload), its
// key layout, and how long such an object can be replayed. The local mappings
// write these objects and the replay tool reads them; both use this package.
//
// AWS describes the layout in the Lambda developer guide ("Retain discarded
// records for a DynamoDB event source in Lambda", services-dynamodb-errors, and
// its Kinesis twin, kinesis-on-failure-destination); docs/pipeline.md cites them.
package failures

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// A failed batch stays in the failure bucket until it is replayed: nothing
// expires an object the replay has not tagged. The replay tags an object it
// has replayed with ReplayedTag=ReplayedTagValue, then writes its marker;
// the bucket's lifecycle expires a tagged object ReplayedKept after Lambda
// wrote it (at once when it is older), keeps its previous version as long
// again, and expires a marker MarkerKept after the replay, by then its
// object is gone. (The counters' dedupe markers are kept for the life of
// their facts, so a replay never counts a record twice, whatever its age:
// docs/counters.md.)
const (
	ReplayedTag      = "shopstream-replayed"
	ReplayedTagValue = "true"
	ReplayedKept     = 14 * 24 * time.Hour
	MarkerKept       = 30 * 24 * time.Hour
)

// Prefix starts every key Lambda writes to an S3 on-failure destination.
const Prefix = "aws/lambda/"

// ReplayedPrefix starts the replay tool's markers: replayed/<object key> says
// the object was replayed (docs/operations.md).
const ReplayedPrefix = "replayed/"

// Version is the invocation record's format version.
const Version = "1.0"

// Conditions under which Lambda discards records.
const (
	ConditionRetriesExhausted = "RetryAttemptsExhausted"
	ConditionRecordAge        = "RecordAgeExceeded"
)

// MaxObjectSize bounds what Parse accepts: Lambda's 6 MB payload limit plus
// the record around it, with room to spare.
const MaxObjectSize = 8 << 20

// ErrMalformed is wrapped by every error Parse and ParseKey return for an
// object or key that is not an on-failure record of a DynamoDB stream batch.
var ErrMalformed = errors.New("not an on-failure record of a DynamoDB stream batch")

// Object is one discarded batch: AWS's invocation record plus the payload.
type Object struct {
	Version         string
	Timestamp       time.Time
	RequestContext  RequestContext
	ResponseContext ResponseContext
	Batch           BatchInfo
	// Payload is the event the function was given, every discarded record.
	Payload events.DynamoDBEvent
}

// RequestContext says which function gave up on the batch, and why.
type RequestContext struct {
	RequestID   string `json:"requestId"`
	FunctionArn string `json:"functionArn"`
	// Condition is ConditionRetriesExhausted or ConditionRecordAge.
	Condition              string `json:"condition"`
	ApproximateInvokeCount int    `json:"approximateInvokeCount"`
}

// ResponseContext is the function's last answer (zero when it was never invoked).
type ResponseContext struct {
	StatusCode      int    `json:"statusCode"`
	ExecutedVersion string `json:"executedVersion"`
	// FunctionError is "Unhandled" when the function failed the invocation
	// and null (never omitted) when it answered with batchItemFailures, as
	// Lambda writes it.
	FunctionError *string `json:"functionError"`
}

// BatchInfo locates the discarded records in the stream.
type BatchInfo struct {
	ShardID                         string
	StartSequenceNumber             string
	EndSequenceNumber               string
	ApproximateArrivalOfFirstRecord time.Time
	ApproximateArrivalOfLastRecord  time.Time
	BatchSize                       int
	StreamArn                       string
}

// Function is the function's name, from its ARN.
func (o Object) Function() string {
	arn := o.RequestContext.FunctionArn
	i := strings.Index(arn, ":function:")
	if i < 0 {
		return ""
	}
	name := arn[i+len(":function:"):]
	if j := strings.IndexByte(name, ':'); j >= 0 { // a qualifier: version or alias
		name = name[:j]
	}
	return name
}

// Table is the stream's table name, from the stream ARN.
func (o Object) Table() string {
	_, rest, ok := strings.Cut(o.Batch.StreamArn, ":table/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/stream/")
	return name
}

// Oldest is the creation time of the batch's oldest record.
func (o Object) Oldest() time.Time {
	var t time.Time
	for _, r := range o.Payload.Records {
		c := r.Change.ApproximateCreationDateTime.Time
		if t.IsZero() || c.Before(t) {
			t = c
		}
	}
	return t
}

// The wire forms: AWS writes the record's timestamp with milliseconds and the
// arrival times to the second.
const (
	timestampLayout = "2006-01-02T15:04:05.000Z"
	arrivalLayout   = "2006-01-02T15:04:05Z"
)

type wire struct {
	RequestContext  *RequestContext  `json:"requestContext"`
	ResponseContext *ResponseContext `json:"responseContext"`
	Version         string           `json:"version"`
	Timestamp       string           `json:"timestamp"`
	Batch           *wireBatch       `json:"DDBStreamBatchInfo"`
	Payload         json.RawMessage  `json:"payload"`
}

type wireBatch struct {
	ShardID                         string `json:"shardId"`
	StartSequenceNumber             string `json:"startSequenceNumber"`
	EndSequenceNumber               string `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
	ApproximateArrivalOfLastRecord  string `json:"approximateArrivalOfLastRecord"`
	BatchSize                       int    `json:"batchSize"`
	StreamArn                       string `json:"streamArn"`
}

// Encode returns the object's JSON as Lambda writes it.
func (o Object) Encode() ([]byte, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	payload, err := json.Marshal(o.Payload)
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	payload = javaEpochs(payload)
	rc, resp := o.RequestContext, o.ResponseContext
	b, err := json.Marshal(wire{
		RequestContext: &rc, ResponseContext: &resp,
		Version: o.Version, Timestamp: o.Timestamp.UTC().Format(timestampLayout),
		Batch: &wireBatch{
			ShardID: o.Batch.ShardID, StartSequenceNumber: o.Batch.StartSequenceNumber, EndSequenceNumber: o.Batch.EndSequenceNumber,
			ApproximateArrivalOfFirstRecord: o.Batch.ApproximateArrivalOfFirstRecord.UTC().Format(arrivalLayout),
			ApproximateArrivalOfLastRecord:  o.Batch.ApproximateArrivalOfLastRecord.UTC().Format(arrivalLayout),
			BatchSize:                       o.Batch.BatchSize, StreamArn: o.Batch.StreamArn,
		},
		Payload: payload,
	})
	if err != nil {
		return nil, fmt.Errorf("encode on-failure record: %w", err)
	}
	return b, nil
}

// Parse reads an object of the failure bucket. Anything that is not a
// complete on-failure record of a DynamoDB stream batch, with its payload
// matching its batch info, is an error wrapping ErrMalformed.
func Parse(b []byte) (Object, error) {
	if len(b) > MaxObjectSize {
		return Object{}, malformed("object of %d bytes, over %d", len(b), MaxObjectSize)
	}
	var w wire
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&w); err != nil {
		return Object{}, malformed("not JSON: %v", err)
	}
	if dec.More() {
		return Object{}, malformed("more than one JSON value")
	}
	if w.RequestContext == nil || w.Batch == nil || len(w.Payload) == 0 || w.Version == "" {
		return Object{}, malformed("requestContext, DDBStreamBatchInfo, payload and version are required")
	}
	o := Object{Version: w.Version, RequestContext: *w.RequestContext}
	if w.ResponseContext != nil {
		o.ResponseContext = *w.ResponseContext
	}
	var err error
	if o.Timestamp, err = time.Parse(time.RFC3339Nano, w.Timestamp); err != nil {
		return Object{}, malformed("timestamp %q: %v", w.Timestamp, err)
	}
	o.Batch = BatchInfo{ShardID: w.Batch.ShardID, StartSequenceNumber: w.Batch.StartSequenceNumber,
		EndSequenceNumber: w.Batch.EndSequenceNumber, BatchSize: w.Batch.BatchSize, StreamArn: w.Batch.StreamArn}
	if o.Batch.ApproximateArrivalOfFirstRecord, err = time.Parse(time.RFC3339Nano, w.Batch.ApproximateArrivalOfFirstRecord); err != nil {
		return Object{}, malformed("approximateArrivalOfFirstRecord: %v", err)
	}
	if o.Batch.ApproximateArrivalOfLastRecord, err = time.Parse(time.RFC3339Nano, w.Batch.ApproximateArrivalOfLastRecord); err != nil {
		return Object{}, malformed("approximateArrivalOfLastRecord: %v", err)
	}
	payload := []byte(w.Payload)
	// The payload is the event as JSON; a payload written as a JSON string
	// holding that JSON is read too.
	if payload[0] == '"' {
		var s string
		if err := json.Unmarshal(payload, &s); err != nil {
			return Object{}, malformed("payload: %v", err)
		}
		payload = []byte(s)
	}
	if err := decodePayload(payload, &o.Payload); err != nil {
		return Object{}, malformed("payload: %v", err)
	}
	if err := o.validate(); err != nil {
		return Object{}, err
	}
	return o, nil
}

// decodePayload decodes the event; aws-lambda-go's attribute decoder panics on
// some malformed values, which must be an error here.
func decodePayload(b []byte, ev *events.DynamoDBEvent) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed record: %v", r)
		}
	}()
	// encoding/json matches field names without regard to case: check the
	// exact name first.
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	if _, ok := probe["Records"]; !ok {
		return errors.New("no Records")
	}
	return json.Unmarshal(b, ev)
}

func (o Object) validate() error {
	if o.Version != Version {
		return malformed("version %q, want %q", o.Version, Version)
	}
	rc := o.RequestContext
	if !strings.HasPrefix(rc.FunctionArn, "arn:") || o.Function() == "" {
		return malformed("functionArn %q is not a Lambda function ARN", rc.FunctionArn)
	}
	if rc.Condition != ConditionRetriesExhausted && rc.Condition != ConditionRecordAge {
		return malformed("condition %q", rc.Condition)
	}
	b := o.Batch
	if b.ShardID == "" || b.StartSequenceNumber == "" || b.EndSequenceNumber == "" {
		return malformed("DDBStreamBatchInfo without shardId or sequence numbers")
	}
	if o.Table() == "" {
		return malformed("streamArn %q is not a DynamoDB stream ARN", b.StreamArn)
	}
	recs := o.Payload.Records
	if len(recs) == 0 {
		return malformed("payload without records")
	}
	if b.BatchSize != len(recs) {
		return malformed("batchSize %d, payload holds %d records", b.BatchSize, len(recs))
	}
	if recs[0].Change.SequenceNumber != b.StartSequenceNumber || recs[len(recs)-1].Change.SequenceNumber != b.EndSequenceNumber {
		return malformed("payload's sequence numbers %s..%s, batch info says %s..%s",
			recs[0].Change.SequenceNumber, recs[len(recs)-1].Change.SequenceNumber, b.StartSequenceNumber, b.EndSequenceNumber)
	}
	for i, r := range recs {
		if r.EventID == "" || r.Change.SequenceNumber == "" {
			return malformed("record %d without eventID or sequence number", i)
		}
		if r.EventSource != "aws:dynamodb" {
			return malformed("record %d from %q, not aws:dynamodb", i, r.EventSource)
		}
	}
	return nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Key is where an object lives in the bucket:
// aws/lambda/<mapping UUID>/<shard id>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<UUID>,
// the date and time being when the batch was discarded (UTC).
type Key struct {
	MappingID string
	ShardID   string
	Time      time.Time
	ID        string
}

const keyTimeLayout = "2006-01-02T15.04.05"

// NewKey returns a key for a batch of the mapping's shard discarded at t,
// with a random UUID.
func NewKey(mappingID, shardID string, t time.Time) Key {
	return Key{MappingID: mappingID, ShardID: shardID, Time: t.UTC().Truncate(time.Second), ID: randomUUID()}
}

// String returns the object key.
func (k Key) String() string {
	t := k.Time.UTC()
	return Prefix + k.MappingID + "/" + k.ShardID + "/" + t.Format("2006/01/02") + "/" + t.Format(keyTimeLayout) + "-" + k.ID
}

// ParseKey reads an object key; a key of another layout is an error wrapping
// ErrMalformed.
func ParseKey(s string) (Key, error) {
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		return Key{}, malformed("key %q is not under %s", s, Prefix)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 6 {
		return Key{}, malformed("key %q: want %s<mapping>/<shard>/YYYY/MM/DD/<time>-<uuid>", s, Prefix)
	}
	k := Key{MappingID: parts[0], ShardID: parts[1]}
	if !isUUID(k.MappingID) || k.ShardID == "" {
		return Key{}, malformed("key %q: mapping %q or shard %q", s, k.MappingID, k.ShardID)
	}
	name := parts[5]
	if len(name) != len(keyTimeLayout)+1+36 || name[len(keyTimeLayout)] != '-' {
		return Key{}, malformed("key %q: object name %q", s, name)
	}
	t, err := time.Parse(keyTimeLayout, name[:len(keyTimeLayout)])
	if err != nil {
		return Key{}, malformed("key %q: time: %v", s, err)
	}
	if t.Format("2006/01/02") != strings.Join(parts[2:5], "/") {
		return Key{}, malformed("key %q: date path does not match the time", s)
	}
	k.Time, k.ID = t, name[len(keyTimeLayout)+1:]
	if !isUUID(k.ID) {
		return Key{}, malformed("key %q: %q is not a UUID", s, k.ID)
	}
	return k, nil
}

// LocalMappingID is the UUID the local stack gives a mapping: derived from
// its name, so it is the same at every start (AWS assigns its own; the
// stack's outputs name them).
func LocalMappingID(mapping string) string {
	return uuidFrom("shopstream mapping " + mapping)
}

// RemainderKey is the key of the object that holds the records (by sequence
// number) a replay of the object at k could not apply: derived from both, so
// a replay interrupted and run again writes the same object for the same
// records, never a second one, and another set of records gets a key of its
// own.
func RemainderKey(k Key, sequenceNumbers []string) Key {
	return Key{MappingID: k.MappingID, ShardID: k.ShardID, Time: k.Time,
		ID: uuidFrom("remainder of " + k.String() + " " + strings.Join(sequenceNumbers, ","))}
}

func uuidFrom(s string) string {
	sum := sha1.Sum([]byte(s))
	var b [16]byte
	copy(b[:], sum[:16])
	b[6], b[8] = b[6]&0x0f|0x50, b[8]&0x3f|0x80 // version 5 layout
	return format(b)
}

func randomUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return format(b)
}

func format(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// creationTime matches a record's ApproximateCreationDateTime as
// aws-lambda-go writes it: a plain number.
var creationTime = regexp.MustCompile(`"ApproximateCreationDateTime":(-?[0-9][0-9.eE+-]*)`)

// javaEpochs writes each record's ApproximateCreationDateTime as Lambda
// does, a JSON number in Java's double notation (1.795493734E9, recorded
// against AWS); aws-lambda-go writes 1795493734. Both are the same number.
func javaEpochs(payload []byte) []byte {
	return creationTime.ReplaceAllFunc(payload, func(m []byte) []byte {
		raw := m[len(`"ApproximateCreationDateTime":`):]
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return m
		}
		return append([]byte(`"ApproximateCreationDateTime":`), javaDouble(f)...)
	})
}

// javaDouble formats f as Java's Double.toString does for magnitudes of
// 10^7 and over: the shortest digits, one before the point, at least one
// after it, and an exponent without sign or padding ("1.0E9").
func javaDouble(f float64) string {
	if a := math.Abs(f); a < 1e7 && a >= 1e-3 || f == 0 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // 1.795493734e+09
	mant, exp, _ := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}
