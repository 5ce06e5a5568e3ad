package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// OutputFailureBucket names the output holding the failure bucket's name.
const OutputFailureBucket = "FailureBucketName"

// OutputFunctionName names the output holding a function's physical name:
// ApiFunctionName, CountersFunctionName, … (the operator tools invoke it).
func OutputFunctionName(fn string) string { return constructID(fn) + "FunctionName" }

// OutputTableName names the output holding a table's physical name:
// UsersTableName, OrdersTableName, …
func OutputTableName(table string) string { return constructID(table) + "TableName" }

// OutputMappingID names the output holding an event-source mapping's UUID,
// the first segment under aws/lambda/ of its failure objects:
// OrdersCountersMappingId, …
func OutputMappingID(mapping string) string { return constructID(mapping) + "MappingId" }

// outputs declares what the operator tools (make replay, audit, reindex with
// STAGE=<stage>) read from the stack instead of guessing names.
func (b *builder) outputs() {
	out := func(id string, value *string, desc string) {
		awscdk.NewCfnOutput(b.s.Stack, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
	}
	out(OutputFailureBucket, b.s.Failures.BucketName(), "bucket of the discarded stream batches (on-failure destination of every mapping)")
	for _, fn := range wiring.Functions() {
		out(OutputFunctionName(fn), b.s.Functions[fn].FunctionName(), "function "+fn)
	}
	for _, t := range tables.All() {
		out(OutputTableName(t.Name), b.s.Tables[t.Name].TableName(), "table "+t.Name)
	}
	for _, m := range wiring.Mappings() {
		out(OutputMappingID(m.Name), b.s.Mappings[m.Name].EventSourceMappingId(), "event-source mapping "+m.Name+" ("+m.Table+" stream to "+m.Function+")")
	}
}
