package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/tables"
)

// tables declares every table of shared/tables: on demand, point-in-time
// recovery, encrypted with the AWS-managed key, with its stream, TTL and indexes.
// Every table and global index has the stage's maximum throughput, and the
// sale's warm throughput where it asks for one (docs/deploy.md, "Sale day").
func (b *builder) tables() {
	for _, t := range tables.All() {
		limit := b.cfg.MaxThroughputOf(t.Name)
		props := &awsdynamodb.TableProps{
			TableName:    jsii.String(tables.Physical(b.cfg.TablePrefix(), t.Name)),
			PartitionKey: attribute(t.PartitionKey),
			BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
			PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
				PointInTimeRecoveryEnabled: jsii.Bool(true),
				RecoveryPeriodInDays:       jsii.Number(b.cfg.PITRRecoveryDays),
			},
			MaxReadRequestUnits:  units(limit.Reads),
			MaxWriteRequestUnits: units(limit.Writes),
			WarmThroughput:       b.cfg.warmThroughput(t.Name),
			DeletionProtection:   jsii.Bool(b.cfg.DeletionProtection),
			Encryption:           awsdynamodb.TableEncryption_AWS_MANAGED,
			RemovalPolicy:        b.cfg.RemovalPolicy(),
		}
		if t.SortKey != nil {
			props.SortKey = attribute(*t.SortKey)
		}
		if t.Stream != tables.NoStream {
			props.Stream = awsdynamodb.StreamViewType(t.Stream)
		}
		if t.TTLAttribute != "" {
			props.TimeToLiveAttribute = jsii.String(t.TTLAttribute)
		}
		table := awsdynamodb.NewTable(b.s.Stack, jsii.String(constructID(t.Name)+"Table"), props)
		for _, ix := range t.GlobalIndexes {
			target := IndexTarget(t.Name, ix.Name)
			ixLimit := b.cfg.MaxThroughputOf(target)
			gp := &awsdynamodb.GlobalSecondaryIndexProps{
				IndexName:            jsii.String(ix.Name),
				PartitionKey:         attribute(ix.PartitionKey),
				ProjectionType:       awsdynamodb.ProjectionType(ix.Projection.Type),
				MaxReadRequestUnits:  units(ixLimit.Reads),
				MaxWriteRequestUnits: units(ixLimit.Writes),
				WarmThroughput:       b.cfg.warmThroughput(target),
			}
			if ix.SortKey != nil {
				gp.SortKey = attribute(*ix.SortKey)
			}
			if len(ix.Projection.NonKey) > 0 {
				gp.NonKeyAttributes = jsii.Strings(ix.Projection.NonKey...)
			}
			table.AddGlobalSecondaryIndex(gp)
		}
		for _, ix := range t.LocalIndexes {
			lp := &awsdynamodb.LocalSecondaryIndexProps{
				IndexName:      jsii.String(ix.Name),
				SortKey:        attribute(*ix.SortKey),
				ProjectionType: awsdynamodb.ProjectionType(ix.Projection.Type),
			}
			if len(ix.Projection.NonKey) > 0 {
				lp.NonKeyAttributes = jsii.Strings(ix.Projection.NonKey...)
			}
			table.AddLocalSecondaryIndex(lp)
		}
		b.s.Tables[t.Name] = table
	}
}

func attribute(k tables.Key) *awsdynamodb.Attribute {
	return &awsdynamodb.Attribute{Name: jsii.String(k.Name), Type: attributeTypes[k.Type]}
}

var attributeTypes = map[tables.AttrType]awsdynamodb.AttributeType{
	tables.String: awsdynamodb.AttributeType_STRING,
	tables.Number: awsdynamodb.AttributeType_NUMBER,
	tables.Binary: awsdynamodb.AttributeType_BINARY,
}

// constructID turns a logical name such as "user-emails" into "UserEmails".
func constructID(name string) string {
	out := make([]byte, 0, len(name))
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '-' || c == '_' || c == '/' || c == ' ' {
			upper = true
			continue
		}
		if upper && c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		upper = false
		out = append(out, c)
	}
	return string(out)
}
