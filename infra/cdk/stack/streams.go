package stack

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/wiring"
)

// streams declares every event-source mapping of shared/wiring, each with the
// failure bucket as on-failure destination (Lambda writes there the whole
// invocation record of a discarded batch, its payload included) and its
// EventCount metrics on (the discarded-batch alarms read them).
func (b *builder) streams() error {
	ms := wiring.Mappings()
	if err := wiring.Validate(ms); err != nil {
		return fmt.Errorf("stream wiring: %w", err)
	}
	granted := map[string]bool{}
	for _, m := range ms {
		table, ok := b.s.Tables[m.Table]
		if !ok {
			return fmt.Errorf("mapping %s: table %s not in the stack", m.Name, m.Table)
		}
		fn, ok := b.s.Functions[m.Function]
		if !ok {
			return fmt.Errorf("mapping %s: function %s not in the stack", m.Name, m.Function)
		}

		start, err := startingPosition(m.StartingPosition)
		if err != nil {
			return fmt.Errorf("mapping %s: %w", m.Name, err)
		}
		props := &awslambdaeventsources.DynamoEventSourceProps{
			StartingPosition:        start,
			BatchSize:               jsii.Number(float64(m.BatchSize)),
			MaxBatchingWindow:       awscdk.Duration_Seconds(jsii.Number(m.BatchingWindow.Seconds())),
			BisectBatchOnError:      jsii.Bool(m.BisectOnError),
			ReportBatchItemFailures: jsii.Bool(m.ReportBatchItemFailures),
			ParallelizationFactor:   jsii.Number(float64(m.ParallelizationFactor)),
			OnFailure:               &s3Destination{bucket: b.s.Failures},
			MetricsConfig:           &awslambda.MetricsConfig{Metrics: &[]awslambda.MetricType{awslambda.MetricType_EVENT_COUNT}},
		}
		if m.RetryAttempts >= 0 {
			props.RetryAttempts = jsii.Number(float64(m.RetryAttempts))
		}
		if m.MaxRecordAge > 0 {
			props.MaxRecordAge = awscdk.Duration_Seconds(jsii.Number(m.MaxRecordAge.Round(time.Second).Seconds()))
		}
		if len(m.Filters) > 0 {
			// The patterns go through as written in shared/wiring: a Go map
			// would reorder keys from one synth to the next.
			filters := make([]*map[string]interface{}, len(m.Filters))
			for i, f := range m.Filters {
				filters[i] = &map[string]interface{}{"pattern": f}
			}
			props.Filters = &filters
		}
		src := awslambdaeventsources.NewDynamoEventSource(table, props)
		live, ok := b.s.Aliases[m.Function]
		if !ok {
			return fmt.Errorf("mapping %s: no live alias of %s", m.Name, m.Function)
		}
		live.AddEventSource(src)
		b.s.Mappings[m.Name] = src
		if !granted[m.Function] {
			granted[m.Function] = true
			b.grantFailureDestination(fn)
		}
	}
	return nil
}

func startingPosition(s string) (awslambda.StartingPosition, error) {
	switch s {
	case "TRIM_HORIZON":
		return awslambda.StartingPosition_TRIM_HORIZON, nil
	case "LATEST":
		return awslambda.StartingPosition_LATEST, nil
	}
	return "", fmt.Errorf("starting position %q: want TRIM_HORIZON or LATEST", s)
}
