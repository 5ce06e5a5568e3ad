package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/wiring"
)

// archive declares the archive bucket (what TTL removes from the hot tables)
// and the bucket of its server access logs. Both are private, TLS-only,
// encrypted, and retained in every stage: the archive is the only copy of an
// expired order.
func (b *builder) archive() {
	accessLogs := awss3.NewBucket(b.s.Stack, jsii.String("AccessLogsBucket"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		MinimumTLSVersion: jsii.Number(1.2),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("expire-access-logs"),
			Expiration:                          awscdk.Duration_Days(jsii.Number(365)),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(7)),
		}},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE,
	})
	b.accessLogs = accessLogs
	// Versioned: the archive is the only copy of an expired order, so an
	// overwrite or a delete keeps the previous version for a year.
	b.s.Archive = awss3.NewBucket(b.s.Stack, jsii.String("ArchiveBucket"), &awss3.BucketProps{
		Versioned:              jsii.Bool(true),
		BlockPublicAccess:      awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:             jsii.Bool(true),
		MinimumTLSVersion:      jsii.Number(1.2),
		Encryption:             awss3.BucketEncryption_S3_MANAGED,
		ObjectOwnership:        awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		ServerAccessLogsBucket: accessLogs,
		ServerAccessLogsPrefix: jsii.String("archive/"),
		LifecycleRules:         b.archiveRules(),
		RemovalPolicy:          awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE,
	})
}

// ArchiveNoncurrentDays is how long a replaced or deleted archive object's
// previous version is kept.
const ArchiveNoncurrentDays = 365

// AuditDigestNoncurrentDays is how long a rewritten audit digest's previous
// version is kept: every audit run rewrites the digests of the days it read,
// and the digest is a cache the next run rebuilds.
const AuditDigestNoncurrentDays = 1

// archiveRules are the archive bucket's lifecycle: each archived table's
// prefix moves to colder storage and keeps a replaced version for
// ArchiveNoncurrentDays; the audit's digest, read on every run, stays in
// S3 Standard and keeps its previous version a day.
func (b *builder) archiveRules() *[]*awss3.LifecycleRule {
	var rules []*awss3.LifecycleRule
	for _, m := range wiring.Mappings() {
		if m.Function != wiring.Archiver {
			continue
		}
		rules = append(rules, &awss3.LifecycleRule{
			Id:     jsii.String("archive-" + m.Table + "-to-colder-storage"),
			Prefix: jsii.String(m.Table + "/"),
			Transitions: &[]*awss3.Transition{
				{
					StorageClass:    awss3.StorageClass_INFREQUENT_ACCESS(),
					TransitionAfter: awscdk.Duration_Days(jsii.Number(float64(b.cfg.ArchiveInfrequentAfterDays))),
				},
				{
					StorageClass:    awss3.StorageClass_GLACIER_INSTANT_RETRIEVAL(),
					TransitionAfter: awscdk.Duration_Days(jsii.Number(float64(b.cfg.ArchiveGlacierAfterDays))),
				},
			},
			NoncurrentVersionExpiration: awscdk.Duration_Days(jsii.Number(ArchiveNoncurrentDays)),
		})
	}
	rules = append(rules, &awss3.LifecycleRule{
		Id:                          jsii.String("audit-digest-keeps-no-old-versions"),
		Prefix:                      jsii.String(wiring.AuditDigestPrefix),
		NoncurrentVersionExpiration: awscdk.Duration_Days(jsii.Number(AuditDigestNoncurrentDays)),
		// Deleting the digest (docs/operations.md) leaves delete markers:
		// they go once their versions have.
		ExpiredObjectDeleteMarker: jsii.Bool(true),
	}, &awss3.LifecycleRule{
		Id:                                  jsii.String("abort-incomplete-uploads"),
		AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(7)),
	})
	return &rules
}
