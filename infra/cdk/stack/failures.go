package stack

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/failures"
)

// ReplayedRetentionDays is how long a replayed object stays after Lambda
// wrote it, and its previous version after that (failures.ReplayedKept);
// MarkerRetentionDays how long the replay tool's marker stays
// (failures.MarkerKept). An object not replayed never expires.
var (
	ReplayedRetentionDays = int(failures.ReplayedKept / (24 * time.Hour))
	MarkerRetentionDays   = int(failures.MarkerKept / (24 * time.Hour))
)

// FailurePrefix is where Lambda writes the invocation records of discarded
// batches in an S3 on-failure destination (failures.Prefix:
// aws/lambda/<ESM-UUID>/<shardID>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<UUID>, Lambda
// developer guide, "Retain discarded records for a DynamoDB event source in
// Lambda"). The functions' roles may never put objects under
// failures.ReplayedPrefix.
const FailurePrefix = failures.Prefix

// failureBucket declares the on-failure destination of every event-source
// mapping: private, TLS 1.2+ only, SSE-S3, versioned (an object is the only
// copy of a batch the stream no longer holds: an overwrite or a delete by
// mistake leaves the previous version). Its lifecycle never expires a batch
// that was not replayed, nor any version of one: only objects the replay
// tagged as replayed (failures.ReplayedTag) and their previous versions,
// the replay's markers, incomplete uploads, and delete markers left alone. It is retained when the stack goes, like the
// archive.
func (b *builder) failureBucket(accessLogs awss3.IBucket) {
	days := func(n int) awscdk.Duration { return awscdk.Duration_Days(jsii.Number(n)) }
	b.s.Failures = awss3.NewBucket(b.s.Stack, jsii.String("FailureBucket"), &awss3.BucketProps{
		BlockPublicAccess:      awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:             jsii.Bool(true),
		MinimumTLSVersion:      jsii.Number(1.2),
		Encryption:             awss3.BucketEncryption_S3_MANAGED,
		ObjectOwnership:        awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		Versioned:              jsii.Bool(true),
		ServerAccessLogsBucket: accessLogs,
		ServerAccessLogsPrefix: jsii.String("failures/"),
		LifecycleRules: &[]*awss3.LifecycleRule{{
			// A version keeps its tags: a replayed object's previous
			// version goes too, an untagged one (a batch overwritten or
			// deleted by mistake before any replay) stays.
			Id:                          jsii.String("expire-replayed"),
			Prefix:                      jsii.String(FailurePrefix),
			TagFilters:                  &map[string]any{failures.ReplayedTag: failures.ReplayedTagValue},
			Expiration:                  days(ReplayedRetentionDays),
			NoncurrentVersionExpiration: days(ReplayedRetentionDays),
		}, {
			Id:                          jsii.String("expire-replay-markers"),
			Prefix:                      jsii.String(failures.ReplayedPrefix),
			Expiration:                  days(MarkerRetentionDays),
			NoncurrentVersionExpiration: days(ReplayedRetentionDays),
		}, {
			// The reindex records never expire (failures.ReindexPrefix): a
			// request for a reindex never lapses unanswered. A need written
			// again by a rerun leaves a previous version, which goes.
			Id:                          jsii.String("expire-overwritten-reindex-records"),
			Prefix:                      jsii.String(failures.ReindexPrefix),
			NoncurrentVersionExpiration: days(ReplayedRetentionDays),
		}, {
			Id:                                  jsii.String("abort-incomplete-uploads"),
			AbortIncompleteMultipartUploadAfter: days(1),
		}, {
			Id:                        jsii.String("remove-expired-delete-markers"),
			ExpiredObjectDeleteMarker: jsii.Bool(true),
		}},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE,
	})
}

// grantFailureDestination lets Lambda, acting with fn's role, deliver
// discarded batches of fn's mappings: what the developer guide asks for an
// S3 destination (s3:PutObject and s3:ListBucket), both only on a bucket of
// this account (the guide's s3:ResourceAccount condition: a bucket of that
// name re-created elsewhere never receives our records). PutObject is on the
// bucket's objects, as the guide's example policy grants it, not only under
// FailurePrefix: Lambda checks the role when it creates or updates a mapping,
// and a grant scoped to aws/lambda/* has been reported to fail that check
// (docs/decisions.md). An explicit deny keeps the role off the replay's
// markers (failures.ReplayedPrefix), which say what was replayed, and off the
// reindex records (failures.ReindexPrefix), which say what a reindex must
// answer.
func (b *builder) grantFailureDestination(fn awslambda.IFunction) {
	account := &map[string]any{"StringEquals": map[string]any{"s3:ResourceAccount": b.s.Stack.Account()}}
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:    jsii.Strings("s3:PutObject"),
		Resources:  jsii.Strings(*b.s.Failures.ArnForObjects(jsii.String("*"))),
		Conditions: account,
	}))
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:  awsiam.Effect_DENY,
		Actions: jsii.Strings("s3:PutObject"),
		Resources: jsii.Strings(*b.s.Failures.ArnForObjects(jsii.String(failures.ReplayedPrefix + "*")),
			*b.s.Failures.ArnForObjects(jsii.String(failures.ReindexPrefix + "*"))),
	}))
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:    jsii.Strings("s3:ListBucket"),
		Resources:  &[]*string{b.s.Failures.BucketArn()},
		Conditions: account,
	}))
}

// s3Destination is an S3 on-failure destination that grants nothing itself
// (CDK's S3OnFailureDestination grants read and write on the whole bucket):
// grantFailureDestination grants what delivery needs.
type s3Destination struct{ bucket awss3.IBucket }

func (d *s3Destination) Bind(awslambda.IEventSourceMapping, awslambda.IFunction) *awslambda.DlqDestinationConfig {
	return &awslambda.DlqDestinationConfig{Destination: d.bucket.BucketArn()}
}
