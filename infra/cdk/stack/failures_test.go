package stack_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/cdk/stack"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// TestFailureBucket: the on-failure destination of every mapping is private,
// encrypted, TLS-only, versioned, logged, retained, and expires only what
// the replay tagged as replayed (and its markers, previous versions and
// delete markers): a batch not replayed stays, and so does a reindex record.
func TestFailureBucket(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		t.Run(name, func(t *testing.T) {
			id := s.logicalID(s.stack.Failures)
			r := s.resources("AWS::S3::Bucket")[id]
			if r["DeletionPolicy"] != "RetainExceptOnCreate" {
				t.Errorf("DeletionPolicy %v, want RetainExceptOnCreate", r["DeletionPolicy"])
			}
			p := props(r)
			want := map[string]any{
				"PublicAccessBlockConfiguration": map[string]any{
					"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true,
				},
				"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{
					map[string]any{"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"}},
				}},
				"VersioningConfiguration": map[string]any{"Status": "Enabled"},
				// Nothing expires a batch the replay has not tagged.
				"LifecycleConfiguration": map[string]any{"Rules": []any{map[string]any{
					"Id":                          "expire-replayed",
					"Status":                      "Enabled",
					"Prefix":                      failures.Prefix,
					"TagFilters":                  []any{map[string]any{"Key": failures.ReplayedTag, "Value": failures.ReplayedTagValue}},
					"ExpirationInDays":            stack.ReplayedRetentionDays,
					"NoncurrentVersionExpiration": map[string]any{"NoncurrentDays": stack.ReplayedRetentionDays},
				}, map[string]any{
					"Id":                          "expire-replay-markers",
					"Status":                      "Enabled",
					"Prefix":                      failures.ReplayedPrefix,
					"ExpirationInDays":            stack.MarkerRetentionDays,
					"NoncurrentVersionExpiration": map[string]any{"NoncurrentDays": stack.ReplayedRetentionDays},
				}, map[string]any{
					// A request for a reindex never lapses.
					"Id":                          "expire-overwritten-reindex-records",
					"Status":                      "Enabled",
					"Prefix":                      failures.ReindexPrefix,
					"NoncurrentVersionExpiration": map[string]any{"NoncurrentDays": stack.ReplayedRetentionDays},
				}, map[string]any{
					"Id":                             "abort-incomplete-uploads",
					"Status":                         "Enabled",
					"AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 1},
				}, map[string]any{
					"Id":                        "remove-expired-delete-markers",
					"Status":                    "Enabled",
					"ExpiredObjectDeleteMarker": true,
				}}},
			}
			got := map[string]any{}
			for k := range want {
				got[k] = p[k]
			}
			if d := cmp.Diff(asJSON(t, want), asJSON(t, got)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if p["LoggingConfiguration"] == nil {
				t.Error("no server access logging")
			}
			var policy map[string]any
			for _, bp := range s.resources("AWS::S3::BucketPolicy") {
				if slices.Contains(refs(props(bp)["Bucket"]), id) {
					policy = props(bp)["PolicyDocument"].(map[string]any)
				}
			}
			if policy == nil {
				t.Fatal("no bucket policy on the failure bucket")
			}
			var denyPlain, denyOldTLS bool
			for _, st := range policy["Statement"].([]any) {
				st := st.(map[string]any)
				cond := fmt.Sprint(st["Condition"])
				denyPlain = denyPlain || st["Effect"] == "Deny" && strings.Contains(cond, "aws:SecureTransport:false")
				denyOldTLS = denyOldTLS || st["Effect"] == "Deny" && strings.Contains(cond, "s3:TlsVersion:1.2")
				if st["Effect"] == "Allow" {
					t.Errorf("bucket policy allows %v to %v: only the functions' roles may put, by their own policies", st["Action"], st["Principal"])
				}
			}
			if !denyPlain || !denyOldTLS {
				t.Errorf("bucket policy denies plain HTTP %v and TLS < 1.2 %v, want both", denyPlain, denyOldTLS)
			}
		})
	}
}

// TestDiscardAlarms: every mapping has an alarm on records kept in the
// failure bucket and one on records dropped, both on that mapping's own
// metrics (EventSourceMappingUUID), and every stream function an alarm on
// failed deliveries to the bucket.
func TestDiscardAlarms(t *testing.T) {
	s := stages[stack.Dev]
	byMetric := map[string][]string{}
	for _, a := range s.resources("AWS::CloudWatch::Alarm") {
		p := props(a)
		metric, _ := p["MetricName"].(string)
		dims, _ := p["Dimensions"].([]any)
		for _, d := range dims {
			d := d.(map[string]any)
			byMetric[metric] = append(byMetric[metric], fmt.Sprint(d["Name"], "=", refs(d["Value"])))
		}
	}
	var mappingDims, fnDims []string
	for _, m := range wiring.Mappings() {
		mappingDims = append(mappingDims, fmt.Sprint("EventSourceMappingUUID=", []string{s.mappingID(t, m)}))
	}
	for _, fn := range wiring.Functions() {
		if a := stack.Accesses()[fn]; len(a.StreamTables) > 0 {
			fnDims = append(fnDims, fmt.Sprint("FunctionName=", []string{s.logicalID(s.stack.Functions[fn])}))
		}
	}
	for metric, want := range map[string][]string{
		"OnFailureDestinationDeliveredEventCount": mappingDims,
		"DroppedEventCount":                       mappingDims,
		"DestinationDeliveryFailures":             fnDims,
	} {
		if d := cmp.Diff(sorted(want), sorted(byMetric[metric])); d != "" {
			t.Errorf("%s alarms by dimension (-want +got):\n%s", metric, d)
		}
	}
}

// TestOperatorOutputs: the names the operator tools read from the stack.
func TestOperatorOutputs(t *testing.T) {
	s := stages[stack.Dev]
	outputs := s.json["Outputs"].(map[string]any)
	want := map[string]string{
		stack.OutputFailureBucket:  s.logicalID(s.stack.Failures),
		stack.OutputArchiveBucket:  s.logicalID(s.stack.Archive),
		stack.OutputSearchEndpoint: s.logicalID(s.stack.Search),
	}
	for _, fn := range wiring.Functions() {
		want[stack.OutputFunctionName(fn)] = s.logicalID(s.stack.Functions[fn])
	}
	for _, tb := range tables.All() {
		want[stack.OutputTableName(tb.Name)] = s.logicalID(s.stack.Tables[tb.Name])
	}
	for _, m := range wiring.Mappings() {
		want[stack.OutputMappingID(m.Name)] = s.mappingID(t, m)
	}
	for name, id := range want {
		o, ok := outputs[name].(map[string]any)
		if !ok {
			t.Errorf("no output %s", name)
			continue
		}
		if got := refs(o["Value"]); !slices.Equal(got, []string{id}) {
			t.Errorf("output %s refers to %v, want %s", name, got, id)
		}
	}
	// UserPoolId: make admin-add reads it (infra/ops/target.OutputUserPool).
	for _, name := range []string{"FailureBucketName", "ApiFunctionName", "OrdersTableName", "CountersFunctionName", "OrdersCountersMappingId", "UserPoolId"} {
		if _, ok := outputs[name]; !ok {
			t.Errorf("no output %s (the name operators were given)", name)
		}
	}
}

// liveTarget is how a mapping names the live alias of function fn: its
// function name and alias ("shopstream-dev-counters:live"), as CDK renders
// it from the alias's ARN.
func (s *synthesized) liveTarget(fn string) string {
	alias := map[string]any{"Ref": s.logicalID(s.stack.Aliases[fn])}
	name := map[string]any{"Fn::Select": []any{6, map[string]any{"Fn::Split": []any{":", alias}}}}
	return fmt.Sprint(map[string]any{"Fn::Join": []any{"", []any{name, ":" + stack.LiveAlias}}})
}

// mappingID is the logical id of the event-source mapping resource of m.
func (s *synthesized) mappingID(t *testing.T, m wiring.Mapping) string {
	t.Helper()
	fn := s.liveTarget(m.Function)
	stream := fmt.Sprint(map[string]any{"Fn::GetAtt": []any{s.logicalID(s.stack.Tables[m.Table]), "StreamArn"}})
	for id, r := range s.resources("AWS::Lambda::EventSourceMapping") {
		if fmt.Sprint(props(r)["FunctionName"]) == fn && fmt.Sprint(props(r)["EventSourceArn"]) == stream {
			return id
		}
	}
	t.Fatalf("no event-source mapping %s", m.Name)
	return ""
}

// TestDiscardAlarmsSayWhatIsAtStake: the discard alarm says the batch waits
// in the failure bucket until replayed, with the command, and an archiver mapping's drop alarm says the archive lost
// its records for good, where the others' name the repairs.
func TestDiscardAlarmsSayWhatIsAtStake(t *testing.T) {
	s := stages[stack.Dev]
	for _, m := range wiring.Mappings() {
		desc := map[string]string{}
		for _, a := range s.resources("AWS::CloudWatch::Alarm") {
			p := props(a)
			name, _ := p["AlarmDescription"].(string)
			if strings.HasPrefix(name, "records of "+m.Name+" ") {
				desc[p["MetricName"].(string)] = name
			}
		}
		if d := desc["OnFailureDestinationDeliveredEventCount"]; !strings.Contains(d, "until replayed") || !strings.Contains(d, "make replay MAPPING="+m.Name) {
			t.Errorf("%s: discard alarm %q: want \"until replayed\" and the replay command", m.Name, d)
		}
		archived := strings.Contains(desc["DroppedEventCount"], "missing from the archive for good")
		if archived != (m.Function == wiring.Archiver) {
			t.Errorf("%s: drop alarm %q: says the archive lost them: %v, want %v", m.Name, desc["DroppedEventCount"], archived, m.Function == wiring.Archiver)
		}
	}
}
