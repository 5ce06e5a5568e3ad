package stack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/shopstream/shopstream/infra/cdk/stack"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// synthesized is one stage's stack, synthesized once for every test.
type synthesized struct {
	stack    *stack.Stack
	template assertions.Template
	// json is the template as plain data, for checks the matchers cannot express.
	json map[string]any
	nag  assertions.Annotations
}

var stages map[string]*synthesized

// standInDist holds a stand-in bootstrap for every function, for stacks
// that tests synthesize beyond the stages.
var standInDist string

// samTemplate is the SAM template at the repository root.
var samTemplate = filepath.Join("..", "..", "..", "template.yaml")

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	// jsii.Close is not called: in jsii-runtime-go v1.128.0 it waits for the
	// kernel process while the runtime's own goroutine waits for it too, a
	// data race that fails `go test -race`. The kernel exits when this process
	// closes its pipes. The runtime it unpacked (1.6 MB, at package init, so
	// under the TMPDIR the process started with) stays: `make test` gives the
	// tests a TMPDIR of their own and removes it.
	dist, err := os.MkdirTemp("", "shopstream-dist-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dist)
	standInDist = dist
	for _, fn := range stack.BuiltFunctions() {
		if err := os.MkdirAll(filepath.Join(dist, fn), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(dist, fn, stack.Handler), []byte("#!/bin/sh\n# stand-in for "+fn+"\n"), 0o755); err != nil {
			return 0, err
		}
	}
	stages = map[string]*synthesized{}
	for _, name := range stack.Stages() {
		cfg, err := stack.StageConfig(name)
		if err != nil {
			return 0, err
		}
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(dist, "cdk.out-"+name))})
		s, err := stack.New(app, cfg.Name, stack.Props{Config: cfg, DistDir: dist, Routes: stack.DeclaredRoutes()})
		if err != nil {
			return 0, err
		}
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
		tpl := assertions.Template_FromStack(s.Stack, nil)
		raw, err := json.Marshal(tpl.ToJSON())
		if err != nil {
			return 0, err
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return 0, err
		}
		stages[name] = &synthesized{stack: s, template: tpl, json: doc, nag: assertions.Annotations_FromStack(s.Stack)}
	}
	return m.Run(), nil
}

// resources returns the template's resources of a type by logical id.
func (s *synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.json["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

// logicalID is the template id of a construct's CloudFormation resource.
func (s *synthesized) logicalID(c constructs.IConstruct) string {
	return *s.stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// asJSON round-trips v through JSON so that Go values compare with template data.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func stageNames() []string { return stack.Stages() }

func TestNag(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		t.Run(name, func(t *testing.T) {
			errs := s.nag.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
			for _, m := range *errs {
				t.Errorf("unsuppressed error at %s: %v", *m.Id, m.Entry.Data)
			}
			warns := s.nag.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
			for _, m := range *warns {
				t.Errorf("unsuppressed warning at %s: %v", *m.Id, m.Entry.Data)
			}
		})
	}
}

// TestNagSuppressionsHaveReasons reads every suppression back from the
// template's metadata: each names a rule and says why in a sentence.
func TestNagSuppressionsHaveReasons(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		count := 0
		for id, r := range s.json["Resources"].(map[string]any) {
			md, _ := r.(map[string]any)["Metadata"].(map[string]any)
			nag, _ := md["cdk_nag"].(map[string]any)
			rules, _ := nag["rules_to_suppress"].([]any)
			for _, x := range rules {
				rule := x.(map[string]any)
				count++
				reason, _ := rule["reason"].(string)
				if len(strings.Fields(reason)) < 8 {
					t.Errorf("%s %s: suppression of %v has reason %q, want a sentence saying why", name, id, rule["id"], reason)
				}
				if ruleID, _ := rule["id"].(string); !strings.HasPrefix(ruleID, "AwsSolutions-") {
					t.Errorf("%s %s: suppression of %q, want an AwsSolutions rule", name, id, ruleID)
				}
			}
		}
		if count == 0 {
			t.Errorf("%s: no suppressions found in the template metadata", name)
		}
	}
}

func TestTablesMatchSharedDefinitions(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		cfg, _ := stack.StageConfig(name)
		byName := map[string]map[string]any{}
		byNameRes := map[string]map[string]any{}
		for _, r := range s.resources("AWS::DynamoDB::Table") {
			n, _ := props(r)["TableName"].(string)
			byName[n] = props(r)
			byNameRes[n] = r
		}
		if got, want := len(byName), len(tables.All()); got != want {
			t.Errorf("%s: got %d tables, want %d", name, got, want)
		}
		for _, def := range tables.All() {
			t.Run(name+"/"+def.Name, func(t *testing.T) {
				physical := tables.Physical(cfg.TablePrefix(), def.Name)
				p, ok := byName[physical]
				if !ok {
					t.Fatalf("no table %s", physical)
				}
				checkTable(t, def, p)
				if got := p["DeletionProtectionEnabled"]; got != cfg.DeletionProtection {
					t.Errorf("%s: DeletionProtectionEnabled %v, want %v", physical, got, cfg.DeletionProtection)
				}
				wantPolicy := "Delete"
				if cfg.RetainData {
					wantPolicy = "RetainExceptOnCreate"
				}
				if got := byNameRes[physical]["DeletionPolicy"]; got != wantPolicy {
					t.Errorf("%s: got DeletionPolicy %v, want %s", physical, got, wantPolicy)
				}
			})
		}
	}
}

// checkTable compares a table resource's properties with its shared definition.
func checkTable(t *testing.T, def tables.Table, p map[string]any) {
	t.Helper()
	want := map[string]any{
		"KeySchema":            keySchema(def.PartitionKey, def.SortKey),
		"AttributeDefinitions": attributeDefinitions(def),
		"BillingMode":          "PAY_PER_REQUEST",
		"PointInTimeRecoverySpecification": map[string]any{
			"PointInTimeRecoveryEnabled": true,
		},
		"SSESpecification": map[string]any{"SSEEnabled": true},
	}
	if def.Stream != tables.NoStream {
		want["StreamSpecification"] = map[string]any{"StreamViewType": string(def.Stream)}
	}
	if def.TTLAttribute != "" {
		want["TimeToLiveSpecification"] = map[string]any{"AttributeName": def.TTLAttribute, "Enabled": true}
	}
	if gsis := indexes(def.GlobalIndexes); len(gsis) > 0 {
		want["GlobalSecondaryIndexes"] = gsis
	}
	if lsis := indexes(def.LocalIndexes); len(lsis) > 0 {
		want["LocalSecondaryIndexes"] = lsis
	}
	got := map[string]any{}
	for k := range want {
		got[k] = p[k]
	}
	// Capacity is the stage's, not a table fact: the recovery period,
	// maximum and warm throughput are checked in saleday_test.go.
	if pitr, ok := got["PointInTimeRecoverySpecification"].(map[string]any); ok {
		got["PointInTimeRecoverySpecification"] = map[string]any{"PointInTimeRecoveryEnabled": pitr["PointInTimeRecoveryEnabled"]}
	}
	if gsis, ok := got["GlobalSecondaryIndexes"].([]any); ok {
		var shapes []any
		for _, g := range gsis {
			g := g.(map[string]any)
			shapes = append(shapes, map[string]any{"IndexName": g["IndexName"], "KeySchema": g["KeySchema"], "Projection": g["Projection"]})
		}
		got["GlobalSecondaryIndexes"] = shapes
	}
	for _, k := range []string{"StreamSpecification", "TimeToLiveSpecification", "GlobalSecondaryIndexes", "LocalSecondaryIndexes"} {
		if _, inWant := want[k]; !inWant && p[k] != nil {
			t.Errorf("%s: unexpected %s %v", def.Name, k, p[k])
		}
	}
	anyOrder := cmpopts.SortSlices(func(a, b any) bool { return fmt.Sprint(a) < fmt.Sprint(b) })
	if d := cmp.Diff(asJSON(t, want), asJSON(t, got), anyOrder); d != "" {
		t.Errorf("%s differs from shared/tables (-want +got):\n%s", def.Name, d)
	}
	for _, ix := range def.LocalIndexes {
		if ix.PartitionKey != def.PartitionKey {
			t.Errorf("%s: local index %s has partition key %v, want the table's %v", def.Name, ix.Name, ix.PartitionKey, def.PartitionKey)
		}
	}
}

func keySchema(pk tables.Key, sk *tables.Key) []map[string]any {
	ks := []map[string]any{{"AttributeName": pk.Name, "KeyType": "HASH"}}
	if sk != nil {
		ks = append(ks, map[string]any{"AttributeName": sk.Name, "KeyType": "RANGE"})
	}
	return ks
}

func attributeDefinitions(def tables.Table) []map[string]any {
	var out []map[string]any
	for _, a := range def.Attributes() {
		out = append(out, map[string]any{"AttributeName": a.Name, "AttributeType": string(a.Type)})
	}
	return out
}

func indexes(ixs []tables.Index) []map[string]any {
	var out []map[string]any
	for _, ix := range ixs {
		proj := map[string]any{"ProjectionType": ix.Projection.Type}
		if len(ix.Projection.NonKey) > 0 {
			proj["NonKeyAttributes"] = ix.Projection.NonKey
		}
		out = append(out, map[string]any{
			"IndexName":  ix.Name,
			"KeySchema":  keySchema(ix.PartitionKey, ix.SortKey),
			"Projection": proj,
		})
	}
	return out
}

func TestMappingsMatchWiring(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		esms := s.resources("AWS::Lambda::EventSourceMapping")
		if got, want := len(esms), len(wiring.Mappings()); got != want {
			t.Errorf("%s: got %d event-source mappings, want %d", name, got, want)
		}
		if n := len(s.resources("AWS::SQS::Queue")); n != 0 {
			t.Errorf("%s: got %d SQS queues, want none (failed batches go to the failure bucket)", name, n)
		}
		bucketID := s.logicalID(s.stack.Failures)
		for _, m := range wiring.Mappings() {
			t.Run(name+"/"+m.Name, func(t *testing.T) {
				fnID := s.logicalID(s.stack.Functions[m.Function])
				tableID := s.logicalID(s.stack.Tables[m.Table])
				var found map[string]any
				for _, r := range esms {
					p := props(r)
					if fmt.Sprint(p["FunctionName"]) == s.liveTarget(m.Function) &&
						fmt.Sprint(p["EventSourceArn"]) == fmt.Sprint(map[string]any{"Fn::GetAtt": []any{tableID, "StreamArn"}}) {
						found = p
					}
				}
				if found == nil {
					t.Fatalf("no mapping from %s (%s) to %s (%s)", m.Table, tableID, m.Function, fnID)
				}
				want := map[string]any{
					"BatchSize":                      m.BatchSize,
					"MaximumBatchingWindowInSeconds": int(m.BatchingWindow.Seconds()),
					"StartingPosition":               m.StartingPosition,
					"BisectBatchOnFunctionError":     m.BisectOnError,
					"MaximumRetryAttempts":           m.RetryAttempts,
					"MaximumRecordAgeInSeconds":      int(m.MaxRecordAge.Seconds()),
					"ParallelizationFactor":          m.ParallelizationFactor,
					"DestinationConfig": map[string]any{"OnFailure": map[string]any{
						"Destination": map[string]any{"Fn::GetAtt": []any{bucketID, "Arn"}},
					}},
					"MetricsConfig": map[string]any{"Metrics": []string{"EventCount"}},
				}
				if m.ReportBatchItemFailures {
					want["FunctionResponseTypes"] = []string{"ReportBatchItemFailures"}
				}
				got := map[string]any{}
				for k := range want {
					got[k] = found[k]
				}
				if d := cmp.Diff(asJSON(t, want), asJSON(t, got)); d != "" {
					t.Errorf("mapping %s differs from shared/wiring (-want +got):\n%s", m.Name, d)
				}
				var patterns []any
				if fc, ok := found["FilterCriteria"].(map[string]any); ok {
					for _, f := range fc["Filters"].([]any) {
						var pat any
						if err := json.Unmarshal([]byte(f.(map[string]any)["Pattern"].(string)), &pat); err != nil {
							t.Fatalf("filter pattern: %v", err)
						}
						patterns = append(patterns, pat)
					}
				}
				var wantPatterns []any
				for _, f := range m.Filters {
					var pat any
					if err := json.Unmarshal([]byte(f), &pat); err != nil {
						t.Fatalf("wiring filter %q: %v", f, err)
					}
					wantPatterns = append(wantPatterns, pat)
				}
				if d := cmp.Diff(wantPatterns, patterns); d != "" {
					t.Errorf("filters differ from shared/wiring (-want +got):\n%s", d)
				}
			})
		}
	}
}

// TestArchiverSeesOnlyTTLRemovals pins the one filter a wrong design gets
// wrong: the archiver's mappings pass only REMOVE records made by DynamoDB's
// TTL service ("Service", capitalised).
func TestArchiverSeesOnlyTTLRemovals(t *testing.T) {
	s := stages[stack.Dev]
	n := 0
	for _, r := range s.resources("AWS::Lambda::EventSourceMapping") {
		p := props(r)
		if fmt.Sprint(p["FunctionName"]) != s.liveTarget(wiring.Archiver) {
			continue
		}
		n++
		filters := p["FilterCriteria"].(map[string]any)["Filters"].([]any)
		if len(filters) != 1 {
			t.Fatalf("got %d filters, want 1", len(filters))
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(filters[0].(map[string]any)["Pattern"].(string)), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"eventName":    []any{"REMOVE"},
			"userIdentity": map[string]any{"type": []any{"Service"}, "principalId": []any{"dynamodb.amazonaws.com"}},
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("archiver filter (-want +got):\n%s", d)
		}
	}
	if n == 0 {
		t.Fatal("no mapping feeds the archiver")
	}
}

func TestFunctions(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		cfg, _ := stack.StageConfig(name)
		fns := s.resources("AWS::Lambda::Function")
		if got, want := len(fns), len(stack.BuiltFunctions()); got != want {
			t.Errorf("%s: got %d functions, want %d (no function CDK adds on its own)", name, got, want)
		}
		for fnName, a := range stack.Accesses() {
			t.Run(name+"/"+fnName, func(t *testing.T) {
				id := s.logicalID(s.stack.Functions[fnName])
				p := props(fns[id])
				want := map[string]any{
					"FunctionName":  cfg.Name + "-" + fnName,
					"Runtime":       "provided.al2023",
					"Architectures": []string{"arm64"},
					"Handler":       stack.Handler,
					"LoggingConfig": map[string]any{"LogFormat": "JSON", "LogGroup": map[string]any{"Ref": p["LoggingConfig"].(map[string]any)["LogGroup"].(map[string]any)["Ref"]}},
					"TracingConfig": map[string]any{"Mode": "Active"},
					"MemorySize":    a.MemoryMiB,
					"Timeout":       int(a.Timeout.Seconds()),
				}
				got := map[string]any{}
				for k := range want {
					got[k] = p[k]
				}
				if d := cmp.Diff(asJSON(t, want), asJSON(t, got)); d != "" {
					t.Errorf("(-want +got):\n%s", d)
				}
				if n, ok := cfg.ReservedConcurrency[fnName]; ok {
					if got := p["ReservedConcurrentExecutions"]; got != float64(n) {
						t.Errorf("reserved concurrency: got %v, want %d", got, n)
					}
				} else if got := p["ReservedConcurrentExecutions"]; got != nil {
					t.Errorf("reserved concurrency: got %v, want none", got)
				}
				vars, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
				var keys []string
				for k := range vars {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				// Exactly the variables of the function's environment contract.
				if d := cmp.Diff(a.Deployed(), keys); d != "" {
					t.Errorf("environment (-contract +cdk):\n%s", d)
				}
				for _, k := range keys {
					if !a.Allows(k) {
						t.Errorf("%s: not in the function's environment contract", k)
					}
				}
				for _, tn := range a.Tables {
					def, _ := tables.ByName(tn)
					want := map[string]any{"Ref": s.logicalID(s.stack.Tables[tn])}
					if d := cmp.Diff(want, vars[def.EnvVar]); d != "" {
						t.Errorf("%s (-want +got):\n%s", def.EnvVar, d)
					}
				}
				roleID := s.logicalID(s.stack.Functions[fnName].Role())
				if mp := props(s.resources("AWS::IAM::Role")[roleID])["ManagedPolicyArns"]; mp != nil {
					t.Errorf("role has managed policies %v, want none", mp)
				}
			})
		}
	}
}

// refs returns the logical ids a template value refers to (Ref, Fn::GetAtt).
func refs(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		if r, ok := x["Ref"].(string); ok && !strings.HasPrefix(r, "AWS::") {
			out = append(out, r)
		}
		if ga, ok := x["Fn::GetAtt"].([]any); ok {
			out = append(out, ga[0].(string))
		}
		for _, e := range x {
			out = append(out, refs(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, refs(e)...)
		}
	}
	return out
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, strs(e)...)
		}
		return out
	}
	return nil
}

// TestLeastPrivilege reads every function role's policy: no wildcard action,
// * as resource only for actions that have no resource-level permissions, and
// no resource but the function's own tables, streams, log group, failure
// bucket prefix, archive prefixes and search index; on the failure bucket,
// exactly what Lambda needs to deliver a discarded batch.
func TestLeastPrivilege(t *testing.T) {
	unscopable := map[string]bool{
		"xray:PutTraceSegments":    true,
		"xray:PutTelemetryRecords": true,
		"dynamodb:ListStreams":     true,
	}
	for _, name := range stageNames() {
		s := stages[name]
		policies := s.resources("AWS::IAM::Policy")
		for fnName, a := range stack.Accesses() {
			t.Run(name+"/"+fnName, func(t *testing.T) {
				fn := s.stack.Functions[fnName]
				roleID := s.logicalID(fn.Role())
				allowed := map[string]string{}
				for _, tn := range a.Tables {
					allowed[s.logicalID(s.stack.Tables[tn])] = "table " + tn
				}
				failuresID := s.logicalID(s.stack.Failures)
				for _, m := range wiring.Mappings() {
					if m.Function == fnName {
						allowed[s.logicalID(s.stack.Tables[m.Table])] = "stream of " + m.Table
						allowed[failuresID] = "failure bucket"
					}
				}
				var failureGrants []string
				if a.Archive {
					allowed[s.logicalID(s.stack.Archive)] = "archive"
				}
				if a.CursorSecret {
					allowed[s.logicalID(s.stack.CursorSecret)] = "cursor secret"
				}
				if a.SearchAccess != stack.SearchNone {
					allowed[s.logicalID(s.stack.Search)] = "search"
				}
				lg := props(s.resources("AWS::Lambda::Function")[s.logicalID(fn)])["LoggingConfig"].(map[string]any)["LogGroup"].(map[string]any)["Ref"].(string)
				allowed[lg] = "log group"

				n := 0
				for pid, pol := range policies {
					p := props(pol)
					if !slices.Contains(refs(p["Roles"]), roleID) {
						continue
					}
					for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
						st := st.(map[string]any)
						n++
						actions := strs(st["Action"])
						for _, act := range actions {
							if act == "*" || strings.HasSuffix(act, ":*") {
								t.Errorf("%s: action %s", pid, act)
							}
						}
						if st["Effect"] != "Allow" {
							if slices.Contains(refs(st["Resource"]), failuresID) {
								failureGrants = append(failureGrants, fmt.Sprint(st["Effect"], " ", actions, " ", st["Resource"], " ", st["Condition"]))
							}
							continue
						}
						if slices.Contains(strs(st["Resource"]), "*") {
							for _, act := range actions {
								if !unscopable[act] {
									t.Errorf("%s: %s on *, want a resource", pid, act)
								}
							}
						}
						for _, id := range refs(st["Resource"]) {
							if _, ok := allowed[id]; !ok {
								t.Errorf("%s: %v on %s, which is not the function's", pid, actions, id)
							}
						}
						if slices.Contains(refs(st["Resource"]), failuresID) {
							cond := fmt.Sprint(st["Condition"])
							if cond != fmt.Sprint(map[string]any{"StringEquals": map[string]any{"s3:ResourceAccount": map[string]any{"Ref": "AWS::AccountId"}}}) {
								t.Errorf("failure bucket grant %v has condition %s, want s3:ResourceAccount of this account", actions, cond)
							}
							for _, act := range actions {
								failureGrants = append(failureGrants, act+" "+fmt.Sprint(st["Resource"]))
							}
						}
						if a.Archive && slices.Contains(refs(st["Resource"]), s.logicalID(s.stack.Archive)) {
							if d := cmp.Diff([]string{"s3:AbortMultipartUpload", "s3:PutObject"}, sorted(actions)); d != "" {
								t.Errorf("archive actions (-want +got):\n%s", d)
							}
						}
					}
				}
				if n == 0 {
					t.Errorf("no policy statement for role %s", roleID)
				}
				var wantFailureGrants []string
				if len(a.StreamTables) > 0 {
					wantFailureGrants = []string{
						"s3:ListBucket " + fmt.Sprint(map[string]any{"Fn::GetAtt": []any{failuresID, "Arn"}}),
						"s3:PutObject " + fmt.Sprint(map[string]any{"Fn::Join": []any{"", []any{map[string]any{"Fn::GetAtt": []any{failuresID, "Arn"}}, "/*"}}}),
					}
					// The replay's markers and the reindex records stay the
					// operator's, whatever the condition.
					objects := func(prefix string) any {
						return map[string]any{"Fn::Join": []any{"", []any{map[string]any{"Fn::GetAtt": []any{failuresID, "Arn"}}, "/" + prefix + "*"}}}
					}
					wantFailureGrants = append([]string{fmt.Sprint("Deny ", []string{"s3:PutObject"}, " ", []any{objects(failures.ReplayedPrefix), objects(failures.ReindexPrefix)}, " ", nil)}, wantFailureGrants...)
				}
				if d := cmp.Diff(wantFailureGrants, sorted(failureGrants)); d != "" {
					t.Errorf("failure bucket grants (-want +got):\n%s", d)
				}
			})
		}
	}
}

func sorted(in []string) []string {
	out := slices.Clone(in)
	sort.Strings(out)
	return out
}

func TestHTTPAPI(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		cfg, _ := stack.StageConfig(name)
		t.Run(name, func(t *testing.T) {
			authorizers := s.resources("AWS::ApiGatewayV2::Authorizer")
			if len(authorizers) != 1 {
				t.Fatalf("got %d authorizers, want 1", len(authorizers))
			}
			var authID string
			for id, a := range authorizers {
				authID = id
				p := props(a)
				if p["AuthorizerType"] != "JWT" {
					t.Errorf("authorizer type %v, want JWT", p["AuthorizerType"])
				}
				cfgJWT := p["JwtConfiguration"].(map[string]any)
				if len(refs(cfgJWT["Audience"])) != 1 || len(refs(cfgJWT["Issuer"])) != 1 {
					t.Errorf("JWT configuration %v, want the user pool as issuer and its client as audience", cfgJWT)
				}
			}
			routes := map[string]map[string]any{}
			for _, r := range s.resources("AWS::ApiGatewayV2::Route") {
				routes[props(r)["RouteKey"].(string)] = props(r)
			}
			declared := stack.DeclaredRoutes()
			if got, want := len(routes), len(declared); got != want {
				t.Errorf("got %d routes, want %d", got, want)
			}
			for _, r := range declared {
				key := r.Method + " " + r.Path
				p, ok := routes[key]
				if !ok {
					t.Errorf("route %s missing", key)
					continue
				}
				if r.Public {
					if p["AuthorizationType"] != "NONE" || p["AuthorizerId"] != nil {
						t.Errorf("%s: public route with authorization %v %v", key, p["AuthorizationType"], p["AuthorizerId"])
					}
					continue
				}
				if p["AuthorizationType"] != "JWT" || fmt.Sprint(p["AuthorizerId"]) != fmt.Sprint(map[string]any{"Ref": authID}) {
					t.Errorf("%s: got authorization %v %v, want JWT by %s", key, p["AuthorizationType"], p["AuthorizerId"], authID)
				}
			}
			groups := s.resources("AWS::Cognito::UserPoolGroup")
			foundAdmin := false
			for _, g := range groups {
				foundAdmin = foundAdmin || props(g)["GroupName"] == stack.AdminGroup
			}
			if !foundAdmin {
				t.Errorf("no %q group in the user pool", stack.AdminGroup)
			}
			s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), map[string]any{
				"StageName":  "$default",
				"AutoDeploy": true,
				"DefaultRouteSettings": map[string]any{
					"ThrottlingRateLimit":  cfg.APIRateLimit,
					"ThrottlingBurstLimit": cfg.APIBurstLimit,
				},
				"AccessLogSettings": map[string]any{
					"DestinationArn": assertions.Match_AnyValue(),
					"Format":         assertions.Match_StringLikeRegexp(jsii.String(`"requestId":"\$context.requestId"`)),
				},
			})
			s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Api"), map[string]any{
				"ProtocolType": "HTTP",
				"CorsConfiguration": map[string]any{
					"AllowOrigins": cfg.CORSOrigins,
					"AllowHeaders": assertions.Match_ArrayWith(&[]any{"authorization", "if-match", "idempotency-key"}),
				},
			})
			s.template.HasOutput(jsii.String(stack.OutputAPIURL), map[string]any{"Value": assertions.Match_AnyValue()})
		})
	}
}

func TestArchiveBucket(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		cfg, _ := stack.StageConfig(name)
		t.Run(name, func(t *testing.T) {
			id := s.logicalID(s.stack.Archive)
			r := s.resources("AWS::S3::Bucket")[id]
			if r["DeletionPolicy"] != "RetainExceptOnCreate" {
				t.Errorf("DeletionPolicy %v, want RetainExceptOnCreate in every stage", r["DeletionPolicy"])
			}
			want := map[string]any{
				"PublicAccessBlockConfiguration": map[string]any{
					"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true,
				},
				"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{
					map[string]any{"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"}},
				}},
			}
			got := map[string]any{}
			for k := range want {
				got[k] = props(r)[k]
			}
			if d := cmp.Diff(asJSON(t, want), asJSON(t, got)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			rules := props(r)["LifecycleConfiguration"].(map[string]any)["Rules"].([]any)
			var classes []string
			for _, rule := range rules {
				trs, _ := rule.(map[string]any)["Transitions"].([]any)
				for _, tr := range trs {
					tr := tr.(map[string]any)
					classes = append(classes, fmt.Sprintf("%v %v@%v", rule.(map[string]any)["Prefix"], tr["StorageClass"], tr["TransitionInDays"]))
				}
			}
			var wantClasses []string
			for _, prefix := range []string{"orders/", "carts/"} {
				wantClasses = append(wantClasses,
					fmt.Sprintf("%s STANDARD_IA@%d", prefix, cfg.ArchiveInfrequentAfterDays),
					fmt.Sprintf("%s GLACIER_IR@%d", prefix, cfg.ArchiveGlacierAfterDays))
			}
			if d := cmp.Diff(wantClasses, classes); d != "" {
				t.Errorf("lifecycle transitions (-want +got):\n%s", d)
			}
			if props(r)["LoggingConfiguration"] == nil {
				t.Error("no server access logging")
			}

			var policy map[string]any
			for _, bp := range s.resources("AWS::S3::BucketPolicy") {
				if slices.Contains(refs(props(bp)["Bucket"]), id) {
					policy = props(bp)["PolicyDocument"].(map[string]any)
				}
			}
			if policy == nil {
				t.Fatal("no bucket policy on the archive")
			}
			var denyPlain, denyOldTLS bool
			for _, st := range policy["Statement"].([]any) {
				st := st.(map[string]any)
				cond := fmt.Sprint(st["Condition"])
				if st["Effect"] == "Deny" && strings.Contains(cond, "aws:SecureTransport:false") {
					denyPlain = true
				}
				if st["Effect"] == "Deny" && strings.Contains(cond, "s3:TlsVersion:1.2") {
					denyOldTLS = true
				}
				if st["Effect"] == "Allow" && strings.Contains(fmt.Sprint(st["Principal"]), "*") {
					t.Errorf("bucket policy allows %v", st["Principal"])
				}
			}
			if !denyPlain || !denyOldTLS {
				t.Errorf("bucket policy denies plain HTTP %v and TLS < 1.2 %v, want both", denyPlain, denyOldTLS)
			}
		})
	}
}

func TestSearchDomain(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		t.Run(name, func(t *testing.T) {
			s.template.HasResourceProperties(jsii.String("AWS::OpenSearchService::Domain"), map[string]any{
				"EncryptionAtRestOptions":     map[string]any{"Enabled": true},
				"NodeToNodeEncryptionOptions": map[string]any{"Enabled": true},
				"DomainEndpointOptions":       map[string]any{"EnforceHTTPS": true, "TLSSecurityPolicy": "Policy-Min-TLS-1-2-2019-07"},
			})
			p := props(s.resources("AWS::OpenSearchService::Domain")[s.logicalID(s.stack.Search)])
			if got := fmt.Sprint(p["AdvancedOptions"]); got != "map[rest.action.multi.allow_explicit_index:false]" {
				t.Errorf("advanced options %s, want no index named in a bulk body", got)
			}
			// One statement per role and grant, with exactly that role's
			// verbs on exactly its paths.
			var got []string
			for _, st := range p["AccessPolicies"].(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				if st["Effect"] != "Allow" {
					t.Errorf("statement effect %v", st["Effect"])
				}
				principals := refs(st["Principal"])
				if len(principals) != 1 {
					t.Errorf("statement for %v, want one role each", principals)
				}
				var paths []string
				res, ok := st["Resource"].([]any)
				if !ok {
					res = []any{st["Resource"]}
				}
				for _, r := range res {
					// Fn::Join of partition, region and account with the
					// literal domain/<name>/<path>.
					_, path, _ := strings.Cut(fmt.Sprint(r), ":domain/"+stageName(name)+"/")
					path, _, _ = strings.Cut(path, "]")
					paths = append(paths, path)
				}
				got = append(got, fmt.Sprint(principals, " ", sorted(strs(st["Action"])), " ", sorted(paths)))
			}
			api := s.logicalID(s.stack.Functions[wiring.API].Role())
			indexer := s.logicalID(s.stack.Functions[wiring.StreamIndexer].Role())
			want := []string{
				fmt.Sprint([]string{api}, " ", []string{"es:ESHttpPost"}, " ", []string{"products/_search"}),
				fmt.Sprint([]string{indexer}, " ", []string{"es:ESHttpPost"}, " ", []string{"products/_bulk"}),
				fmt.Sprint([]string{indexer}, " ", []string{"es:ESHttpPut"}, " ", []string{"products"}),
			}
			if d := cmp.Diff(sorted(want), sorted(got)); d != "" {
				t.Errorf("domain access policy (-want +got):\n%s", d)
			}
			// The roles' own policies hold the same verbs on the same paths.
			for fnName, a := range stack.Accesses() {
				roleID := s.logicalID(s.stack.Functions[fnName].Role())
				var got []string
				for _, pol := range s.resources("AWS::IAM::Policy") {
					if !slices.Contains(refs(props(pol)["Roles"]), roleID) {
						continue
					}
					for _, st := range props(pol)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
						st := st.(map[string]any)
						for _, act := range strs(st["Action"]) {
							if strings.HasPrefix(act, "es:") {
								got = append(got, fmt.Sprint(act, " ", st["Resource"]))
							}
						}
					}
				}
				var want []string
				for _, g := range stack.SearchGrants(a.SearchAccess) {
					for _, act := range g.Actions {
						var res []any
						for _, p := range g.Paths {
							res = append(res, map[string]any{"Fn::Join": []any{"", []any{map[string]any{"Fn::GetAtt": []any{s.logicalID(s.stack.Search), "Arn"}}, "/" + p}}})
						}
						var r any = res
						if len(res) == 1 {
							r = res[0]
						}
						want = append(want, fmt.Sprint(act, " ", r))
					}
				}
				if d := cmp.Diff(sorted(want), sorted(got)); d != "" {
					t.Errorf("%s: search actions in its role's policy (-want +got):\n%s", fnName, d)
				}
			}
		})
	}
}

// stageName is the physical name prefix of a stage.
func stageName(stage string) string {
	cfg, _ := stack.StageConfig(stage)
	return cfg.Name
}

// TestMonitoring checks that every failure mode has an alarm with an action.
func TestMonitoring(t *testing.T) {
	s := stages[stack.Prod]
	counts := map[string]int{}
	for _, a := range s.resources("AWS::CloudWatch::Alarm") {
		p := props(a)
		if p["AlarmActions"] == nil {
			t.Errorf("alarm %v has no action", p["AlarmName"])
		}
		key, _ := p["MetricName"].(string)
		if key == "" {
			key = "expression"
		}
		counts[key]++
	}
	// Releases add, per function, an alarm on its live alias's errors, and
	// on the stream functions' iterator age or the API's p99 duration and
	// 5xx rate (an expression).
	want := map[string]int{
		"Errors":      2 * len(wiring.Functions()),
		"Throttles":   len(wiring.Functions()),
		"IteratorAge": 2 * 3,
		"Duration":    1,
		"OnFailureDestinationDeliveredEventCount": len(wiring.Mappings()),
		"DroppedEventCount":                       len(wiring.Mappings()),
		"DestinationDeliveryFailures":             3,
		"ClusterStatus.red":                       1,
		"ClusterStatus.yellow":                    1,
		"FreeStorageSpace":                        1,
		"JVMMemoryPressure":                       1,
		"ClusterIndexWritesBlocked":               1,
		"AutomatedSnapshotFailure":                1,
		"5xx":                                     1,
		"Latency":                                 1,
		"expression":                              len(tables.All()) + 1,
		"freshness":                               3,
	}
	if d := cmp.Diff(want, counts); d != "" {
		t.Errorf("alarms by metric (-want +got):\n%s", d)
	}
	if n := len(s.resources("AWS::CloudWatch::Dashboard")); n != 1 {
		t.Errorf("got %d dashboards, want 1", n)
	}
}

// TestTracingPerStage: every function exports to X-Ray's OTLP endpoint of
// its region, parent-based, every trace in dev and a ratio in prod, and its
// role may put trace segments (the one action the endpoint authorizes) and no
// other X-Ray action but the telemetry records active tracing adds.
func TestTracingPerStage(t *testing.T) {
	for stage, ratio := range map[string]string{stack.Dev: "1", stack.Prod: "0.05"} {
		s := stages[stage]
		for _, name := range wiring.Functions() {
			c := props(s.resources("AWS::Lambda::Function")[s.logicalID(s.stack.Functions[name])])
			vars := c["Environment"].(map[string]any)["Variables"].(map[string]any)
			if vars[envcontract.TracesSampler] != stack.TracesSampler || vars[envcontract.TracesSamplerArg] != ratio {
				t.Errorf("%s %s: got sampler %v %v, want %s %s", stage, name, vars[envcontract.TracesSampler], vars[envcontract.TracesSamplerArg], stack.TracesSampler, ratio)
			}
			if ep := fmt.Sprint(vars[envcontract.OTLPTracesEndpoint]); !strings.Contains(ep, "https://xray.") || !strings.Contains(ep, "AWS::Region") || !strings.Contains(ep, "/v1/traces") {
				t.Errorf("%s %s: endpoint %s, want X-Ray's OTLP endpoint in the stack's region", stage, name, ep)
			}
		}
		var xray []string
		for _, p := range s.resources("AWS::IAM::Policy") {
			for _, st := range props(p)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				acts := st.(map[string]any)["Action"]
				list, ok := acts.([]any)
				if !ok {
					list = []any{acts}
				}
				for _, a := range list {
					if as := fmt.Sprint(a); strings.HasPrefix(as, "xray:") && !slices.Contains(xray, as) {
						xray = append(xray, as)
					}
				}
			}
		}
		slices.Sort(xray)
		if d := cmp.Diff([]string{"xray:PutTelemetryRecords", "xray:PutTraceSegments"}, xray); d != "" {
			t.Errorf("%s: X-Ray actions (-want +got):\n%s", stage, d)
		}
	}
}

// TestCfnLint runs cfn-lint on every synthesized template and on template.yaml.
func TestCfnLint(t *testing.T) {
	lint, err := exec.LookPath("cfn-lint")
	if err != nil {
		t.Fatalf("cfn-lint not found (pip install cfn-lint aws-sam-translator): %v", err)
	}
	dir := t.TempDir()
	var files []string
	for _, name := range stageNames() {
		raw, err := json.MarshalIndent(stages[name].json, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, name+".template.json")
		if err := os.WriteFile(f, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// W3005: CDK adds a DependsOn on the role next to the GetAtt of its ARN.
	// -c I: the informational checks too (I3011: a stateful resource without
	// an explicit DeletionPolicy and UpdateReplacePolicy). I1022: CDK renders
	// every string concatenation as Fn::Join, never Fn::Sub.
	out, err := exec.Command(lint, append([]string{"--format", "parseable", "-c", "I", "--ignore-checks", "W3005", "--ignore-checks", "I1022", "--"}, files...)...).CombinedOutput()
	if err != nil {
		t.Errorf("cfn-lint on the synthesized templates: %v\n%s", err, out)
	}
	out, err = exec.Command(lint, "--format", "parseable", "-c", "I", "--", samTemplate).CombinedOutput()
	if err != nil {
		t.Errorf("cfn-lint on template.yaml: %v\n%s", err, out)
	}
}
