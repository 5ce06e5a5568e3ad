package tables

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateInput returns the CreateTable request for the table under its physical
// name: on-demand billing, its indexes and its stream. TTL is a separate call
// (UpdateTimeToLive); Create makes both.
func (t Table) CreateInput(physical string) *dynamodb.CreateTableInput {
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(physical),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema:   keySchema(t.PartitionKey, t.SortKey),
	}
	for _, a := range t.Attributes() {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{
			AttributeName: aws.String(a.Name),
			AttributeType: types.ScalarAttributeType(a.Type),
		})
	}
	for _, ix := range t.GlobalIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  keySchema(ix.PartitionKey, ix.SortKey),
			Projection: projection(ix.Projection),
		})
	}
	for _, ix := range t.LocalIndexes {
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, types.LocalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  keySchema(ix.PartitionKey, ix.SortKey),
			Projection: projection(ix.Projection),
		})
	}
	if t.Stream != NoStream {
		in.StreamSpecification = &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewType(t.Stream),
		}
	}
	return in
}

func keySchema(pk Key, sk *Key) []types.KeySchemaElement {
	ks := []types.KeySchemaElement{{AttributeName: aws.String(pk.Name), KeyType: types.KeyTypeHash}}
	if sk != nil {
		ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(sk.Name), KeyType: types.KeyTypeRange})
	}
	return ks
}

func projection(p Projection) *types.Projection {
	out := &types.Projection{ProjectionType: types.ProjectionType(p.Type)}
	if p.Type == ProjectInclude {
		out.NonKeyAttributes = p.NonKey
	}
	return out
}

// Creator is the part of the DynamoDB client that Create uses.
type Creator interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// Create creates every table under prefix with its TTL setting. A table that
// already exists is left as it is, so Create is safe to run on every start.
func Create(ctx context.Context, c Creator, prefix string) error {
	for _, t := range All() {
		name := Physical(prefix, t.Name)
		_, err := c.CreateTable(ctx, t.CreateInput(name))
		var inUse *types.ResourceInUseException
		switch {
		case errors.As(err, &inUse):
			continue
		case err != nil:
			return fmt.Errorf("create table %s: %w", name, err)
		}
		if t.TTLAttribute == "" {
			continue
		}
		if _, err := c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName: aws.String(name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{
				AttributeName: aws.String(t.TTLAttribute),
				Enabled:       aws.Bool(true),
			},
		}); err != nil {
			return fmt.Errorf("enable ttl on %s: %w", name, err)
		}
	}
	return nil
}
