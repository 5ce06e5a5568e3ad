package stack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/batchmetrics"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// Alarm thresholds.
const (
	// iteratorAgeAlarmMs: stream records older than this mean counters, search
	// or the archive fall behind the tables.
	iteratorAgeAlarmMs = 5 * 60 * 1000
	// apiLatencyAlarmMs is the p99 end-to-end latency of the HTTP API.
	apiLatencyAlarmMs = 2000
	// api5xxAlarm is the 5xx count per five minutes.
	api5xxAlarm = 5
	// freshnessAlarmMs is the p99 age of the records a stream function
	// processes (now minus ApproximateCreationDateTime, batchmetrics'
	// freshness), three periods in a row. Locally the p99 is 0.7 s (make
	// trace); on AWS add the creation time's rounding down to the second
	// (up to 1 s), the mapping's polling (4 times a second) and batching
	// window (1 s at most, shared/wiring): about 3 s. 5 s leaves room for a
	// cold start and alarms long before the iterator age's 5 minutes
	// (docs/operations.md).
	freshnessAlarmMs = 5000
)

// monitoring declares an alarm topic, alarms on every failure mode the
// operator must hear of, and one dashboard with the same metrics.
func (b *builder) monitoring(email string) {
	// A key of our own: CloudWatch cannot publish to a topic under the
	// AWS-managed SNS key, whose policy nobody can change. This key lets
	// CloudWatch alarms of this account use it for the topic, nothing else.
	key := awskms.NewKey(b.s.Stack, jsii.String("AlarmTopicKey"), &awskms.KeyProps{
		Description:       jsii.String("shopstream " + b.cfg.Stage + " alarm topic"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     b.cfg.RemovalPolicy(),
	})
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": b.s.Stack.Account()}},
	}), nil)
	b.s.AlarmKey = key
	topic := awssns.NewTopic(b.s.Stack, jsii.String("AlarmTopic"), &awssns.TopicProps{
		TopicName:  b.name("alarms"),
		EnforceSSL: jsii.Bool(true),
		MasterKey:  key,
	})
	// EnforceSSL gives the topic a policy of its own, which replaces SNS's
	// default one, the one that let this account's services publish:
	// without this statement no alarm of the stack would reach the topic
	// ("not authorized to perform: SNS:Publish ... because no resource-based
	// policy allows the SNS:Publish action", in the alarm's history). Only
	// this stack's alarms, by name, of this account and region.
	topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsOfThisStage"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  &[]*string{topic.TopicArn()},
		Conditions: &map[string]any{
			"StringEquals": map[string]any{"aws:SourceAccount": b.s.Stack.Account()},
			"ArnLike": map[string]any{"aws:SourceArn": awscdk.Fn_Join(jsii.String(""), &[]*string{
				jsii.String("arn:"), b.s.Stack.Partition(), jsii.String(":cloudwatch:"), b.s.Stack.Region(),
				jsii.String(":"), b.s.Stack.Account(), jsii.String(":alarm:"), b.name("*"),
			})},
		},
	}))
	b.s.AlarmTopic = topic
	if email != "" {
		awssns.NewSubscription(b.s.Stack, jsii.String("AlarmEmail"), &awssns.SubscriptionProps{
			Topic:    topic,
			Protocol: awssns.SubscriptionProtocol_EMAIL,
			Endpoint: jsii.String(email),
		})
	}
	action := awscloudwatchactions.NewSnsAction(topic)
	period := awscdk.Duration_Minutes(jsii.Number(5))
	alarm := func(id string, m awscloudwatch.IMetric, threshold float64, periods float64, desc string) {
		a := awscloudwatch.NewAlarm(b.s.Stack, jsii.String(id+"Alarm"), &awscloudwatch.AlarmProps{
			AlarmName:          b.name(id),
			AlarmDescription:   jsii.String(desc),
			Metric:             m,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(periods),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		a.AddAlarmAction(action)
		a.AddOkAction(action)
	}
	sum := &awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("Sum")}

	var fnErrors, fnThrottles, iterAge, freshness, discarded, lost, ddbThrottles []awscloudwatch.IMetric
	for _, name := range wiring.Functions() {
		fn := b.s.Functions[name]
		id := constructID(name)
		errs := fn.MetricErrors(sum)
		thr := fn.MetricThrottles(sum)
		alarm(id+"Errors", errs, 1, 1, name+" returned errors (a failed batch or invocation)")
		alarm(id+"Throttles", thr, 1, 1, name+" was throttled")
		fnErrors = append(fnErrors, errs)
		fnThrottles = append(fnThrottles, thr)
	}
	streamFns := map[string]bool{}
	for _, m := range wiring.Mappings() {
		streamFns[m.Function] = true
		// The event-source mapping's own EventCount metrics (MetricsConfig),
		// by mapping: records delivered to the failure bucket, and records
		// dropped without reaching it.
		esm := func(metric string) awscloudwatch.Metric {
			return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace:     jsii.String("AWS/Lambda"),
				MetricName:    jsii.String(metric),
				DimensionsMap: &map[string]*string{"EventSourceMappingUUID": b.s.Mappings[m.Name].EventSourceMappingId()},
				Period:        period,
				Statistic:     jsii.String("Sum"),
			})
		}
		kept := esm("OnFailureDestinationDeliveredEventCount")
		alarm(constructID(m.Name)+"Discarded", kept, 1, 1, "records of "+m.Name+" were discarded after their retries and are kept in the failure bucket until replayed: fix the cause, then make replay MAPPING="+m.Name)
		gone := "make audit and make reindex repair what they touched"
		if m.Function == wiring.Archiver {
			gone = "what TTL removed in them is missing from the archive for good"
		}
		dropped := esm("DroppedEventCount")
		alarm(constructID(m.Name)+"Dropped", dropped, 1, 1, "records of "+m.Name+" were discarded and did not reach the failure bucket (see DestinationDeliveryFailures): they are lost from the stream; "+gone)
		// Labelled on the dashboard only: a labelled metric makes the alarm
		// a metric-math alarm.
		label := &awscloudwatch.MetricOptions{Label: jsii.String(m.Name)}
		discarded = append(discarded, kept.With(label))
		lost = append(lost, dropped.With(label))
	}
	for _, name := range wiring.Functions() {
		if !streamFns[name] {
			continue
		}
		failed := b.s.Functions[name].Metric(jsii.String("DestinationDeliveryFailures"), sum)
		alarm(constructID(name)+"DestinationDeliveryFailures", failed, 1, 1, name+" could not write a discarded batch to the failure bucket")
		lost = append(lost, failed)
	}
	for _, name := range wiring.Functions() {
		if !streamFns[name] {
			continue
		}
		age := b.s.Functions[name].Metric(jsii.String("IteratorAge"), &awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("Maximum")})
		alarm(constructID(name)+"IteratorAge", age, iteratorAgeAlarmMs, 3, name+" falls behind its streams")
		iterAge = append(iterAge, age)
		fresh := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     jsii.String(batchmetrics.Namespace),
			MetricName:    jsii.String(batchmetrics.FreshnessMetric),
			DimensionsMap: &map[string]*string{"function": jsii.String(name)},
			Period:        period,
			Statistic:     jsii.String("p99"),
		})
		alarm(constructID(name)+"Freshness", fresh, freshnessAlarmMs, 3, name+"'s p99 freshness (the age of the records it processes) is above its service level: find a slow batch with make trace or the trace search")
		freshness = append(freshness, fresh)
	}
	for i, t := range tables.All() {
		table := b.s.Tables[t.Name]
		// Ids unique across tables: the dashboard graphs them together.
		r, w := fmt.Sprintf("r%d", i), fmt.Sprintf("w%d", i)
		throttled := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(r + " + " + w),
			UsingMetrics: &map[string]awscloudwatch.IMetric{
				r: table.Metric(jsii.String("ReadThrottleEvents"), sum),
				w: table.Metric(jsii.String("WriteThrottleEvents"), sum),
			},
			Label:  jsii.String(t.Name + " throttled"),
			Period: period,
		})
		alarm(constructID(t.Name)+"Throttles", throttled, 1, 1, "DynamoDB throttled requests on "+t.Name)
		ddbThrottles = append(ddbThrottles, throttled)
	}
	b.searchAlarms(action)
	api5xx := b.api.api.MetricServerError(sum)
	alarm("Api5xx", api5xx, api5xxAlarm, 1, "the HTTP API answered 5xx")
	p99 := b.api.api.MetricLatency(&awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("p99")})
	alarm("ApiLatency", p99, apiLatencyAlarmMs, 3, "the HTTP API's p99 latency is high")

	graph := func(title string, ms []awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title),
			Left:  &ms,
			Width: jsii.Number(12),
		})
	}
	dash := awscloudwatch.NewDashboard(b.s.Stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: b.name("overview"),
	})
	dash.AddWidgets(
		graph("API requests and 5xx", []awscloudwatch.IMetric{b.api.api.MetricCount(sum), api5xx}),
		graph("API latency p99 (ms)", []awscloudwatch.IMetric{p99}),
	)
	dash.AddWidgets(graph("Function errors", fnErrors), graph("Function throttles", fnThrottles))
	dash.AddWidgets(graph("Stream iterator age (ms)", iterAge), graph("Records discarded, kept in the failure bucket", discarded))
	dash.AddWidgets(graph("Freshness p99 (ms): record age when processed", freshness), b.traceLinks())
	dash.AddWidgets(graph("Records lost (dropped, destination delivery failures)", lost))
	dash.AddWidgets(graph("DynamoDB throttled requests", ddbThrottles))
}

// traceLinks is the dashboard's way to the traces: X-Ray's trace search and
// CloudWatch's Transaction Search over every span (aws/spans), in the
// stack's region. Every log line carries traceId and spanId, so a line found
// in Logs Insights opens its trace there too.
func (b *builder) traceLinks() awscloudwatch.IWidget {
	console := awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("https://console.aws.amazon.com/cloudwatch/home?region="), awscdk.Aws_REGION()})
	md := awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("### Traces\n[Trace search]("), console,
		jsii.String("#xray:traces/query) (an order id is a link's shopstream.item) · [Transaction Search]("), console,
		jsii.String("#application-signals:transaction-search) · [Trace map]("), console,
		jsii.String("#xray:service-map/map)\n\nLocally: make trace ID=<order id>."),
	})
	return awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{Markdown: md, Width: jsii.Number(12), Height: jsii.Number(4)})
}

// searchAlarms declares AWS's recommended alarms for the OpenSearch domain
// ("Recommended CloudWatch alarms for Amazon OpenSearch Service"): red
// cluster, yellow cluster (only with two or more data nodes: one node can
// never place a replica, yellow is its normal state), free storage under a
// quarter of a node's volume, JVM memory pressure, blocked writes and failed
// automated snapshots.
func (b *builder) searchAlarms(action awscloudwatch.IAlarmAction) {
	d := b.s.Search
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	opts := func(stat string, period awscdk.Duration) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Statistic: jsii.String(stat), Period: period}
	}
	type searchAlarm struct {
		id        string
		metric    awscloudwatch.Metric
		op        awscloudwatch.ComparisonOperator
		threshold float64
		periods   float64
		desc      string
	}
	gte := awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
	freeMiB := float64(b.cfg.Search.VolumeGiB) * 1024 / 4
	alarms := []searchAlarm{
		{"SearchClusterRed", d.MetricClusterStatusRed(opts("Maximum", minute)), gte, 1, 1, "search cluster red: a primary shard is not allocated; search and indexing fail for it"},
		{"SearchFreeStorage", d.MetricFreeStorageSpace(opts("Minimum", minute)), awscloudwatch.ComparisonOperator_LESS_THAN_OR_EQUAL_TO_THRESHOLD, freeMiB, 1, "a search node has less than a quarter of its volume free"},
		{"SearchJvmPressure", d.MetricJVMMemoryPressure(opts("Maximum", minute)), gte, 95, 3, "search JVM memory pressure at 95%: out-of-memory errors are near"},
		{"SearchWritesBlocked", d.MetricClusterIndexWritesBlocked(opts("Maximum", awscdk.Duration_Minutes(jsii.Number(5)))), gte, 1, 1, "the search cluster blocks writes: the indexer's batches fail and go to the failure bucket"},
		{"SearchSnapshotFailed", d.MetricAutomatedSnapshotFailure(opts("Maximum", minute)), gte, 1, 1, "an automated snapshot of the search domain failed"},
	}
	if b.cfg.Search.DataNodes >= 2 {
		alarms = append(alarms, searchAlarm{"SearchClusterYellow", d.MetricClusterStatusYellow(opts("Maximum", minute)), gte, 1, 5, "search cluster yellow: a replica shard is not allocated"})
	}
	for _, a := range alarms {
		al := awscloudwatch.NewAlarm(b.s.Stack, jsii.String(a.id+"Alarm"), &awscloudwatch.AlarmProps{
			AlarmName:          b.name(a.id),
			AlarmDescription:   jsii.String(a.desc),
			Metric:             a.metric,
			Threshold:          jsii.Number(a.threshold),
			EvaluationPeriods:  jsii.Number(a.periods),
			ComparisonOperator: a.op,
			TreatMissingData:   awscloudwatch.TreatMissingData_MISSING,
		})
		al.AddAlarmAction(action)
		al.AddOkAction(action)
	}
}
