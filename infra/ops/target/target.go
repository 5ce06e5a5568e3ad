// Package target says what an operator command works on: `make run`'s local
// stack (endpoints from the same environment variables as docs/contract.md#1-local-stack) or a
// deployed stage (STAGE=dev: names from the CloudFormation stack's outputs).
// Every operator command (replay, audit, reindex) resolves its target here,
// so they all see the same tables, buckets, functions and search endpoint.
package target

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// ErrIncomplete is wrapped by a command's error when it ran to its end but
// left something undone (records that still fail, drift that remains): the
// command exits with status 1, any other error with status 2.
var ErrIncomplete = errors.New("incomplete")

// Target is a resolved local stack or deployed stage.
type Target struct {
	// Stage is "" for the local stack, else the deployed stage's name.
	Stage string
	// AWS is the SDK configuration; for the local stack, dummy credentials.
	AWS aws.Config
	// DynamoDBURL and S3URL are the local endpoints ("" on AWS).
	DynamoDBURL, S3URL string
	// Tables maps each logical table (shared/tables) to its physical name.
	Tables map[string]string
	// TablePrefix is the local stack's TABLE_PREFIX ("" on a stage, whose
	// names come from its outputs).
	TablePrefix string
	// Functions maps each function (shared/wiring) to its deployed name
	// (locally, its own name: the stream functions run in-process).
	Functions map[string]string
	// MappingIDs maps each mapping (shared/wiring) to its event-source
	// mapping UUID, the first segment of its failure objects' keys.
	MappingIDs                   map[string]string
	FailureBucket, ArchiveBucket string
	// SearchURL is the search endpoint; SearchSigned says whether requests
	// to it are SigV4-signed (Amazon OpenSearch Service).
	SearchURL    string
	SearchSigned bool
	// UserPoolID is the stage's Cognito user pool ("" locally: the local
	// stack signs its own tokens).
	UserPoolID string
}

// Local defaults, as `make run` has them.
const (
	localDefaultFailureBucket = "shopstream-failures"
	localRegion               = "us-east-1"
)

// Resolve reads the target from the environment: with STAGE set, the stack
// shopstream-<STAGE>'s outputs (STACK_NAME overrides the name); without it,
// the local stack's ports, TABLE_PREFIX, FAILURE_BUCKET and ARCHIVE_BUCKET.
func Resolve(ctx context.Context, getenv func(string) string) (*Target, error) {
	if stage := getenv("STAGE"); stage != "" {
		return resolveStage(ctx, getenv, stage)
	}
	return resolveLocal(getenv)
}

func resolveLocal(getenv func(string) string) (*Target, error) {
	port := func(env string, def int) (string, error) {
		p := def
		if v := getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 65535 {
				return "", fmt.Errorf("%s=%q: want a port number", env, v)
			}
			p = n
		}
		return "http://127.0.0.1:" + strconv.Itoa(p), nil
	}
	t := &Target{
		AWS:    aws.Config{Region: localRegion, Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")},
		Tables: tables.WithPrefix(getenv("TABLE_PREFIX")).Map(), TablePrefix: getenv("TABLE_PREFIX"), Functions: map[string]string{}, MappingIDs: map[string]string{},
		FailureBucket: or(getenv("FAILURE_BUCKET"), localDefaultFailureBucket),
		ArchiveBucket: or(getenv(envcontract.ArchiveBucket), envcontract.LocalArchiveBucket),
	}
	var err error
	if t.DynamoDBURL, err = port("DYNAMODB_PORT", 8000); err != nil {
		return nil, err
	}
	if t.S3URL, err = port("S3_PORT", 9000); err != nil {
		return nil, err
	}
	if t.SearchURL, err = port("SEARCH_PORT", 9200); err != nil {
		return nil, err
	}
	for _, fn := range wiring.Functions() {
		t.Functions[fn] = fn
	}
	for _, m := range wiring.Mappings() {
		t.MappingIDs[m.Name] = failures.LocalMappingID(m.Name)
	}
	return t, nil
}

type stackDescriber interface {
	DescribeStacks(context.Context, *cloudformation.DescribeStacksInput, ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

func resolveStage(ctx context.Context, getenv func(string) string, stage string) (*Target, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	name := or(getenv("STACK_NAME"), "shopstream-"+stage)
	outputs, err := stackOutputs(ctx, cloudformation.NewFromConfig(cfg), name)
	if err != nil {
		return nil, err
	}
	return fromOutputs(cfg, stage, outputs)
}

// stackOutputs returns the stack's outputs by key.
func stackOutputs(ctx context.Context, cf stackDescriber, stack string) (map[string]string, error) {
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if err != nil {
		return nil, fmt.Errorf("describe stack %s: %w", stack, err)
	}
	if len(out.Stacks) != 1 {
		return nil, fmt.Errorf("describe stack %s: %d stacks", stack, len(out.Stacks))
	}
	m := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		m[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return m, nil
}

// Output names of the CDK app's stack: CamelCase of the shared/tables or
// shared/wiring name and a suffix (docs/deploy.md lists them).
const (
	OutputFailureBucket  = "FailureBucketName"
	OutputArchiveBucket  = "ArchiveBucketName"
	OutputSearchEndpoint = "SearchEndpoint"
	OutputUserPool       = "UserPoolId"
)

// TableOutput, FunctionOutput and MappingOutput name a stack output.
func TableOutput(table string) string     { return Camel(table) + "TableName" }
func FunctionOutput(fn string) string     { return Camel(fn) + "FunctionName" }
func MappingOutput(mapping string) string { return Camel(mapping) + "MappingId" }

// Camel turns "stream-indexer" into "StreamIndexer".
func Camel(name string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '-' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// fromOutputs builds a stage's target from its stack's outputs; a missing
// output is an error naming it.
func fromOutputs(cfg aws.Config, stage string, out map[string]string) (*Target, error) {
	var missing []string
	get := func(key string) string {
		v := out[key]
		if v == "" {
			missing = append(missing, key)
		}
		return v
	}
	t := &Target{Stage: stage, AWS: cfg, Tables: map[string]string{}, Functions: map[string]string{}, MappingIDs: map[string]string{},
		FailureBucket: get(OutputFailureBucket), ArchiveBucket: get(OutputArchiveBucket), UserPoolID: get(OutputUserPool)}
	for _, tb := range tables.All() {
		t.Tables[tb.Name] = get(TableOutput(tb.Name))
	}
	for _, fn := range wiring.Functions() {
		t.Functions[fn] = get(FunctionOutput(fn))
	}
	for _, m := range wiring.Mappings() {
		t.MappingIDs[m.Name] = get(MappingOutput(m.Name))
	}
	if host := get(OutputSearchEndpoint); host != "" {
		t.SearchURL = "https://" + strings.TrimPrefix(host, "https://")
		t.SearchSigned = true
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("stack of stage %s lacks outputs %s", stage, strings.Join(missing, ", "))
	}
	return t, nil
}

// Local reports whether the target is `make run`'s stack.
func (t *Target) Local() bool { return t.Stage == "" }

// String names the target for reports.
func (t *Target) String() string {
	if t.Local() {
		return "local stack (DynamoDB " + t.DynamoDBURL + ", S3 " + t.S3URL + ")"
	}
	return "stage " + t.Stage
}

// DynamoDB returns a client for the target's tables, patient with
// throttling (Patient).
func (t *Target) DynamoDB() *dynamodb.Client {
	return dynamodb.NewFromConfig(t.AWS, func(o *dynamodb.Options) {
		o.Retryer, o.RetryMaxAttempts = Patient(), 0 // AWS_MAX_ATTEMPTS does not cut it short
		if t.DynamoDBURL != "" {
			o.BaseEndpoint = aws.String(t.DynamoDBURL)
		}
	})
}

// FunctionDynamoDB and FunctionS3 are clients of the target configured as
// the stream functions configure theirs on Lambda (the counters' adaptive
// retry mode, the SDK's 3 attempts; the archiver's defaults): what runs the
// functions in-process for a local replay, so that a replay meets
// throttling as the deployed functions meet it, not with the operator
// commands' patience.
func (t *Target) FunctionDynamoDB() *dynamodb.Client {
	return dynamodb.NewFromConfig(t.AWS, func(o *dynamodb.Options) {
		o.Retryer = retry.NewAdaptiveMode()
		if t.DynamoDBURL != "" {
			o.BaseEndpoint = aws.String(t.DynamoDBURL)
		}
	})
}

// FunctionS3 is the archiver's S3 client (see FunctionDynamoDB).
func (t *Target) FunctionS3() *s3.Client {
	return s3.NewFromConfig(t.AWS, func(o *s3.Options) {
		if t.S3URL != "" {
			o.BaseEndpoint = aws.String(t.S3URL)
			o.UsePathStyle = true
		}
	})
}

// PatientAttempts is how often an operator command's call is tried.
const PatientAttempts = 12

// Patient is the retryer of the operator commands' clients. The audit and
// the reindex scan whole tables at the cap a stage sets on them (maximum
// throughput), and S3 answers SlowDown under a burst: with the SDK's
// default 3 attempts, and its retry quota, which refuses retries once
// throttles outnumber successes, one page throttled three times ended a
// run of hours with exit 2. Here a call is tried PatientAttempts times with
// no quota: a throttled one backing off up to 20 s, so that a run slows
// down to what the table gives instead of failing; any other retryable
// failure (a 5xx, a dropped connection) up to 1 s, so that an endpoint
// that is gone ends the run in seconds, not minutes.
func Patient() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = PatientAttempts
		o.RateLimiter = ratelimit.None
		o.Backoff = patientBackoff{throttled: retry.NewExponentialJitterBackoff(20 * time.Second)}
	})
}

// patientBackoff waits long after a throttle and briefly after a failure:
// a random wait under 100 ms doubled each attempt, at most 1 s (the SDK's
// own backoff, capped at 1 s, would wait exactly 1 s every time, every
// worker in step).
type patientBackoff struct{ throttled retry.BackoffDelayer }

func (b patientBackoff) BackoffDelay(attempt int, err error) (time.Duration, error) {
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool() {
		return b.throttled.BackoffDelay(attempt, err)
	}
	ceiling := min(time.Second, 100*time.Millisecond<<min(attempt, 10))
	return time.Duration(rand.Int64N(int64(ceiling))) + 1, nil
}

// S3 returns a client for the target's buckets (path-style locally).
func (t *Target) S3() *s3.Client {
	return s3.NewFromConfig(t.AWS, func(o *s3.Options) {
		o.Retryer, o.RetryMaxAttempts = Patient(), 0 // AWS_MAX_ATTEMPTS does not cut it short
		if t.S3URL != "" {
			o.BaseEndpoint = aws.String(t.S3URL)
			o.UsePathStyle = true
		}
	})
}

// Env is the environment the stream functions get: the physical table names
// under their variables, the archive bucket and the search endpoint, as the
// CDK app and the local stack set them.
func (t *Target) Env() map[string]string {
	env := map[string]string{envcontract.ArchiveBucket: t.ArchiveBucket, envcontract.SearchURL: t.SearchURL}
	for _, tb := range tables.All() {
		env[tb.EnvVar] = t.Tables[tb.Name]
	}
	return env
}

// Mapping returns the mapping whose event-source mapping UUID is id.
func (t *Target) Mapping(id string) (wiring.Mapping, bool) {
	for _, m := range wiring.Mappings() {
		if t.MappingIDs[m.Name] == id {
			return m, true
		}
	}
	return wiring.Mapping{}, false
}

// MappingOf returns the stage's mapping that reads table (a physical name)
// into function (a deployed name), whatever its UUID: a failure object of a
// mapping a deploy replaced names both.
func (t *Target) MappingOf(function, table string) (wiring.Mapping, bool) {
	if function == "" || table == "" {
		return wiring.Mapping{}, false
	}
	for _, m := range wiring.Mappings() {
		if t.Functions[m.Function] == function && t.Tables[m.Table] == table {
			return m, true
		}
	}
	return wiring.Mapping{}, false
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
