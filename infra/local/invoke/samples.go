package invoke

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/products"
)

// SampleProduct is the product the API samples of events/ order and read.
const SampleProduct = "01HZZZZZZZZZZZZZZZZZZZZZZZ"

// SampleItem is one item the samples of events/ expect in place, in the table
// the variable Table of the function's environment names.
type SampleItem struct {
	Table string // USERS_TABLE, PRODUCTS_TABLE, PRODUCT_STOCK_TABLE
	Key   map[string]any
	Item  any
}

// SampleItems are the items the samples of events/ expect: the counters'
// sample-user and sample-product, the user other-user the forbidden sample
// asks for, and the product the order samples buy, with 10 units in stock.
func SampleItems() []SampleItem {
	return []SampleItem{
		{"USERS_TABLE", map[string]any{"userId": "sample-user"}, map[string]any{"userId": "sample-user", "version": 1}},
		{"USERS_TABLE", map[string]any{"userId": "other-user"}, map[string]any{"userId": "other-user", "version": 1}},
		{"PRODUCTS_TABLE", map[string]any{"productId": "sample-product"}, map[string]any{"productId": "sample-product", "version": 1}},
		{"PRODUCTS_TABLE", map[string]any{"productId": SampleProduct}, products.Product{ProductID: SampleProduct, Name: "Copper Kettle",
			Description: "A copper kettle that whistles", Category: "kitchen", PriceCents: 4900, StockBuckets: 1,
			CreatedAt: "2026-11-22T09:00:00Z", UpdatedAt: "2026-11-22T09:00:00Z", Version: 1}},
		{"PRODUCT_STOCK_TABLE", map[string]any{"bucketId": SampleProduct + "#0"}, map[string]any{"bucketId": SampleProduct + "#0",
			"productId": SampleProduct, "bucket": 0, "units": 10, "priceCents": 4900, "name": "Copper Kettle", "version": 0}},
	}
}

type itemWriter interface {
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// PutSamples writes SampleItems into the tables tableOf names (anew: a sample
// run's counters start again from zero) and returns how many it wrote.
func PutSamples(ctx context.Context, db itemWriter, tableOf func(variable string) string) (int, error) {
	for i, s := range SampleItems() {
		av, err := attributevalue.MarshalMap(s.Item)
		if err != nil {
			return i, err
		}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tableOf(s.Table)), Item: av}); err != nil {
			return i, fmt.Errorf("put sample %v into %s: %w", s.Key, tableOf(s.Table), err)
		}
	}
	return len(SampleItems()), nil
}

// DeleteSamples deletes SampleItems from the tables tableOf names, whatever
// the samples did to them since, and returns how many were there.
func DeleteSamples(ctx context.Context, db itemWriter, tableOf func(variable string) string) (int, error) {
	n := 0
	for _, s := range SampleItems() {
		key, err := attributevalue.MarshalMap(s.Key)
		if err != nil {
			return n, err
		}
		out, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tableOf(s.Table)), Key: key, ReturnValues: types.ReturnValueAllOld})
		if err != nil {
			return n, fmt.Errorf("delete sample %v from %s: %w", s.Key, tableOf(s.Table), err)
		}
		if len(out.Attributes) > 0 {
			n++
		}
	}
	return n, nil
}

// SamplesCommand is `make samples` (`go run ./infra/local samples`): it puts
// the items the samples of events/ expect into the tables and at the DynamoDB
// endpoint an --env-vars file names (events/sam-env.json: the dev stage's
// tables on `TABLE_PREFIX=shopstream-dev- make run`), or with -clean takes
// them away. The shell's AWS_ENDPOINT_URL_DYNAMODB and *_TABLE variables win
// over the file's, as they do for `make invoke`.
func SamplesCommand(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("samples", flag.ContinueOnError)
	fs.SetOutput(stderr)
	envVars := fs.String("env-vars", "events/sam-env.json", "JSON file of variable values, as sam local invoke --env-vars")
	clean := fs.Bool("clean", false, "delete the sample items instead")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return errors.New("samples takes no arguments")
	}
	file, err := ReadEnvVars(*envVars)
	if err != nil {
		return err
	}
	env := map[string]string{}
	for k, v := range file["Parameters"] {
		env[k] = stringify(v)
	}
	for _, k := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "USERS_TABLE", "PRODUCTS_TABLE", "PRODUCT_STOCK_TABLE"} {
		if v, ok := lookup(k); ok && v != "" {
			env[k] = v
		}
	}
	db := localDynamoDB(env)
	if db == nil {
		return fmt.Errorf("%s names no AWS_ENDPOINT_URL_DYNAMODB: the samples go into a local stack only", *envVars)
	}
	check := map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": env["AWS_ENDPOINT_URL_DYNAMODB"]}
	for _, s := range SampleItems() {
		if env[s.Table] == "" {
			return fmt.Errorf("%s names no %s", *envVars, s.Table)
		}
		check[s.Table] = env[s.Table]
	}
	if err := CheckTables(ctx, check); err != nil {
		return err
	}
	tableOf := func(v string) string { return env[v] }
	if *clean {
		n, err := DeleteSamples(ctx, db, tableOf)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "samples: %d of %d sample items deleted from %s\n", n, len(SampleItems()), env["AWS_ENDPOINT_URL_DYNAMODB"])
		return err
	}
	n, err := PutSamples(ctx, db, tableOf)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "samples: %d sample items put at %s (users sample-user, other-user; products sample-product, %s with 10 units)\n",
		n, env["AWS_ENDPOINT_URL_DYNAMODB"], SampleProduct)
	return err
}
