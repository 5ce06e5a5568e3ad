package invoke

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrMissingTables is returned when a function's environment names tables its
// DynamoDB endpoint does not have.
var ErrMissingTables = errors.New("tables missing")

// localDynamoDB is a client for the DynamoDB endpoint env names
// (AWS_ENDPOINT_URL_DYNAMODB), with env's region and credentials; nil when
// env names none (the function would reach AWS itself).
func localDynamoDB(env map[string]string) *dynamodb.Client {
	url := env["AWS_ENDPOINT_URL_DYNAMODB"]
	if url == "" {
		return nil
	}
	region := env["AWS_REGION"]
	if region == "" {
		region = "us-east-1"
	}
	return dynamodb.NewFromConfig(aws.Config{
		Region:           region,
		Credentials:      credentials.NewStaticCredentialsProvider(or(env["AWS_ACCESS_KEY_ID"], "local"), or(env["AWS_SECRET_ACCESS_KEY"], "local"), ""),
		RetryMaxAttempts: 1,
	}, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(url) })
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// CheckTables asks the DynamoDB endpoint of env for every table env names
// (variables ending in _TABLE) and fails, naming them, when any is missing:
// a function run against tables that are not there reports every record
// failed or answers 500, which says nothing of the cause. Without a local
// endpoint it checks nothing.
func CheckTables(ctx context.Context, env map[string]string) error {
	db := localDynamoDB(env)
	if db == nil {
		return nil
	}
	var names []string
	for k, v := range env {
		if strings.HasSuffix(k, "_TABLE") && v != "" {
			names = append(names, v)
		}
	}
	sort.Strings(names)
	var missing []string
	for _, name := range names {
		_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		var notFound *types.ResourceNotFoundException
		switch {
		case err == nil:
		case errors.As(err, &notFound):
			missing = append(missing, name)
		default:
			return fmt.Errorf("DynamoDB at %s (is make run up?): describe table %s: %w", env["AWS_ENDPOINT_URL_DYNAMODB"], name, err)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w at %s: %s; the samples and events/sam-env.json name the dev stage's tables: run the stack with TABLE_PREFIX=shopstream-dev- make run, or pass ENV_VARS=<file> naming yours",
			ErrMissingTables, env["AWS_ENDPOINT_URL_DYNAMODB"], strings.Join(missing, ", "))
	}
	return nil
}
