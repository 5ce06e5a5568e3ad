package stack_test

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/cdk/stack"
	"github.com/shopstream/shopstream/shared/cfntemplate"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// samDoc is template.yaml as plain data, its intrinsic tags (!Ref, !GetAtt,
// !Sub) turned into their long forms as in a JSON template.
type samDoc map[string]any

func loadSAM(t *testing.T) samDoc {
	t.Helper()
	raw, err := os.ReadFile(samTemplate)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := cfntemplate.Decode(raw)
	if err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	return doc
}

func (d samDoc) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range d["Resources"].(map[string]any) {
		if res := r.(map[string]any); res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

// samName is the physical name template.yaml gives a resource of the stage.
func samName(suffix string) map[string]any {
	return map[string]any{"Fn::Sub": "shopstream-${Stage}-" + suffix}
}

func (d samDoc) byName(typ, nameProp, suffix string) (string, map[string]any) {
	for id, r := range d.resources(typ) {
		if cmp.Equal(props(r)[nameProp], samName(suffix)) {
			return id, props(r)
		}
	}
	return "", nil
}

// TestSAMTablesMatchSharedDefinitions: template.yaml declares every table of
// shared/tables, and nothing else, with its keys, indexes, stream and TTL.
func TestSAMTablesMatchSharedDefinitions(t *testing.T) {
	sam := loadSAM(t)
	if got, want := len(sam.resources("AWS::DynamoDB::Table")), len(tables.All()); got != want {
		t.Errorf("got %d tables, want %d", got, want)
	}
	for _, def := range tables.All() {
		t.Run(def.Name, func(t *testing.T) {
			_, p := sam.byName("AWS::DynamoDB::Table", "TableName", def.Name)
			if p == nil {
				t.Fatalf("no table named shopstream-${Stage}-%s", def.Name)
			}
			checkTable(t, def, p)
		})
	}
}

// TestSAMFunctionsMatchCDK: template.yaml runs the same code, the same way,
// with the same environment as the CDK app.
func TestSAMFunctionsMatchCDK(t *testing.T) {
	sam := loadSAM(t)
	globals := sam["Globals"].(map[string]any)["Function"].(map[string]any)
	cdk := stages[stack.Dev]
	tableByID := map[string]string{}
	for _, def := range tables.All() {
		id, _ := sam.byName("AWS::DynamoDB::Table", "TableName", def.Name)
		tableByID[id] = def.Name
	}
	if got, want := len(sam.resources("AWS::Serverless::Function")), len(wiring.Functions()); got != want {
		t.Errorf("got %d functions, want %d", got, want)
	}
	for _, fnName := range wiring.Functions() {
		t.Run(fnName, func(t *testing.T) {
			id, p := sam.byName("AWS::Serverless::Function", "FunctionName", fnName)
			if p == nil {
				t.Fatalf("no function named shopstream-${Stage}-%s", fnName)
			}
			// sam build: the Makefile's build-<LogicalId> target (CodeUri is where the Makefile is).
			meta, _ := sam.resources("AWS::Serverless::Function")[id]["Metadata"].(map[string]any)
			if got := meta["BuildMethod"]; got != "makefile" {
				t.Errorf("Metadata.BuildMethod: got %v, want makefile", got)
			}
			eff := map[string]any{}
			for k, v := range globals {
				eff[k] = v
			}
			for k, v := range p {
				eff[k] = v
			}
			c := props(cdk.resources("AWS::Lambda::Function")[cdk.logicalID(cdk.stack.Functions[fnName])])
			want := map[string]any{
				"CodeUri":       ".",
				"Runtime":       c["Runtime"],
				"Architectures": c["Architectures"],
				"Handler":       c["Handler"],
				"Tracing":       c["TracingConfig"].(map[string]any)["Mode"],
				"LoggingConfig": map[string]any{"LogFormat": c["LoggingConfig"].(map[string]any)["LogFormat"]},
				"MemorySize":    c["MemorySize"],
				"Timeout":       c["Timeout"],
			}
			got := map[string]any{}
			for k := range want {
				got[k] = eff[k]
			}
			if d := cmp.Diff(asJSON(t, want), asJSON(t, got)); d != "" {
				t.Errorf("template.yaml differs from the CDK app (-cdk +sam):\n%s", d)
			}

			samVars, _ := eff["Environment"].(map[string]any)["Variables"].(map[string]any)
			cdkVars, _ := c["Environment"].(map[string]any)["Variables"].(map[string]any)
			// Beyond the CDK app's variables, the local-only ones, declared empty
			// (`sam local invoke --env-vars` can only set declared ones): the AWS
			// SDK's endpoint variable of each service the function calls (the SDK
			// ignores an empty one) and the cursor key itself (on AWS the function
			// reads it from CURSOR_SECRET_ARN's secret).
			wantVars := keysOf(cdkVars)
			contract := stack.Accesses()[fnName].Contract
			for _, name := range contract.LocalOnly() {
				wantVars = append(wantVars, name)
				if v, ok := samVars[name]; !ok || v != "" {
					t.Errorf("%s: got %#v, want an empty value", name, v)
				}
			}
			sort.Strings(wantVars)
			if d := cmp.Diff(wantVars, keysOf(samVars)); d != "" {
				t.Errorf("environment names (-cdk and local-only +sam):\n%s", d)
			}
			for _, name := range keysOf(samVars) {
				if !contract.Allows(name) {
					t.Errorf("%s: not in the function's environment contract (shared/envcontract)", name)
				}
			}
			for _, tn := range stack.Accesses()[fnName].Tables {
				def, _ := tables.ByName(tn)
				ref, _ := samVars[def.EnvVar].(map[string]any)["Ref"].(string)
				if tableByID[ref] != tn {
					t.Errorf("%s refers to %q, want the %s table", def.EnvVar, ref, tn)
				}
			}
		})
	}
}

func keysOf(m map[string]any) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestSAMEventSourcesMatchWiring: every mapping of shared/wiring, with the
// same batching, filters, retries and failure destination, and no other.
func TestSAMEventSourcesMatchWiring(t *testing.T) {
	sam := loadSAM(t)
	tableID := map[string]string{}
	for _, def := range tables.All() {
		id, _ := sam.byName("AWS::DynamoDB::Table", "TableName", def.Name)
		tableID[def.Name] = id
	}
	type event struct {
		fn    string
		props map[string]any
	}
	var events []event
	for _, r := range sam.resources("AWS::Serverless::Function") {
		evs, _ := props(r)["Events"].(map[string]any)
		for _, e := range evs {
			e := e.(map[string]any)
			if e["Type"] == "DynamoDB" {
				name := props(r)["FunctionName"].(map[string]any)["Fn::Sub"].(string)
				events = append(events, event{strings.TrimPrefix(name, "shopstream-${Stage}-"), e["Properties"].(map[string]any)})
			}
		}
	}
	if got, want := len(events), len(wiring.Mappings()); got != want {
		t.Errorf("got %d DynamoDB events, want %d", got, want)
	}
	for _, m := range wiring.Mappings() {
		t.Run(m.Name, func(t *testing.T) {
			var p map[string]any
			for _, e := range events {
				if e.fn == m.Function && cmp.Equal(e.props["Stream"], map[string]any{"Fn::GetAtt": []any{tableID[m.Table], "StreamArn"}}) {
					p = e.props
				}
			}
			if p == nil {
				t.Fatalf("no DynamoDB event from %s to %s", m.Table, m.Function)
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
					"Destination": map[string]any{"Fn::GetAtt": []any{samFailureBucket, "Arn"}},
				}},
				"MetricsConfig": map[string]any{"Metrics": []string{"EventCount"}},
			}
			if m.ReportBatchItemFailures {
				want["FunctionResponseTypes"] = []string{"ReportBatchItemFailures"}
			}
			if len(m.Filters) > 0 {
				var fs []any
				for _, f := range m.Filters {
					fs = append(fs, map[string]any{"Pattern": f})
				}
				want["FilterCriteria"] = map[string]any{"Filters": fs}
			}
			got := map[string]any{}
			for k := range p {
				if k != "Stream" {
					got[k] = p[k]
				}
			}
			if d := cmp.Diff(asJSON(t, want), asJSON(t, got)); d != "" {
				t.Errorf("mapping %s differs from shared/wiring (-wiring +sam):\n%s", m.Name, d)
			}
		})
	}
}

// TestSAMArchiveMatchesCDK: template.yaml's archive bucket has the CDK
// app's encryption, public access, versioning and lifecycle.
func TestSAMArchiveMatchesCDK(t *testing.T) {
	sam := loadSAM(t)
	cdk := stages[stack.Dev]
	r, ok := sam["Resources"].(map[string]any)["ArchiveBucket"].(map[string]any)
	if !ok {
		t.Fatal("no ArchiveBucket in template.yaml")
	}
	c := props(cdk.resources("AWS::S3::Bucket")[cdk.logicalID(cdk.stack.Archive)])
	for _, k := range []string{"BucketEncryption", "PublicAccessBlockConfiguration", "VersioningConfiguration", "LifecycleConfiguration", "OwnershipControls"} {
		if d := cmp.Diff(asJSON(t, c[k]), asJSON(t, props(r)[k])); d != "" {
			t.Errorf("%s (-cdk +sam):\n%s", k, d)
		}
	}
}

// samFailureBucket is the logical id of the failure bucket in template.yaml.
const samFailureBucket = "FailureBucket"

// TestSAMFailureBucketMatchesCDK: template.yaml's failure bucket is the CDK
// app's (encryption, public access, versioning, lifecycle), TLS-only, and
// each stream function may put objects in it (never under replayed/) and
// list it, in this account only, nothing more; no SQS destination is left.
func TestSAMFailureBucketMatchesCDK(t *testing.T) {
	sam := loadSAM(t)
	cdk := stages[stack.Dev]
	r, ok := sam["Resources"].(map[string]any)[samFailureBucket].(map[string]any)
	if !ok || r["Type"] != "AWS::S3::Bucket" {
		t.Fatalf("no bucket %s in template.yaml", samFailureBucket)
	}
	c := props(cdk.resources("AWS::S3::Bucket")[cdk.logicalID(cdk.stack.Failures)])
	for _, k := range []string{"BucketEncryption", "PublicAccessBlockConfiguration", "VersioningConfiguration", "LifecycleConfiguration", "OwnershipControls"} {
		if d := cmp.Diff(asJSON(t, c[k]), asJSON(t, props(r)[k])); d != "" {
			t.Errorf("%s (-cdk +sam):\n%s", k, d)
		}
	}
	if r["DeletionPolicy"] != "Retain" {
		t.Errorf("DeletionPolicy %v, want Retain", r["DeletionPolicy"])
	}
	var tlsOnly bool
	for _, bp := range sam.resources("AWS::S3::BucketPolicy") {
		if cmp.Equal(props(bp)["Bucket"], map[string]any{"Ref": samFailureBucket}) {
			tlsOnly = strings.Contains(fmt.Sprint(props(bp)["PolicyDocument"]), "aws:SecureTransport:false")
		}
	}
	if !tlsOnly {
		t.Error("no bucket policy denying plain HTTP on the failure bucket")
	}
	if n := len(sam.resources("AWS::SQS::Queue")); n != 0 {
		t.Errorf("got %d SQS queues, want none", n)
	}
	account := map[string]any{"StringEquals": map[string]any{"s3:ResourceAccount": map[string]any{"Ref": "AWS::AccountId"}}}
	want := []string{
		fmt.Sprint("Allow s3:ListBucket ", map[string]any{"Fn::GetAtt": []any{samFailureBucket, "Arn"}}, " ", account),
		fmt.Sprint("Allow s3:PutObject ", map[string]any{"Fn::Sub": "${" + samFailureBucket + ".Arn}/*"}, " ", account),
		fmt.Sprint("Deny s3:PutObject ", []any{map[string]any{"Fn::Sub": "${" + samFailureBucket + ".Arn}/" + failures.ReplayedPrefix + "*"}, map[string]any{"Fn::Sub": "${" + samFailureBucket + ".Arn}/" + failures.ReindexPrefix + "*"}}, " ", nil),
	}
	for _, fn := range wiring.Functions() {
		_, p := sam.byName("AWS::Serverless::Function", "FunctionName", fn)
		var got []string
		pols, _ := p["Policies"].([]any)
		for _, pol := range pols {
			sts, _ := pol.(map[string]any)["Statement"].([]any)
			for _, st := range sts {
				st := st.(map[string]any)
				if slices.Contains(refs(st["Resource"]), samFailureBucket) || strings.Contains(fmt.Sprint(st["Resource"]), samFailureBucket) {
					got = append(got, fmt.Sprint(st["Effect"], " ", st["Action"], " ", st["Resource"], " ", st["Condition"]))
				}
			}
		}
		var w []string
		if len(stack.Accesses()[fn].StreamTables) > 0 {
			w = want
		}
		if d := cmp.Diff(w, sorted(got)); d != "" {
			t.Errorf("%s: failure bucket grants (-want +got):\n%s", fn, d)
		}
	}
}

// TestSAMRoutesMatchCDK: the api function serves the same routes in
// template.yaml as in the CDK app, public exactly where the CDK app is.
func TestSAMRoutesMatchCDK(t *testing.T) {
	sam := loadSAM(t)
	_, api := sam.byName("AWS::Serverless::Function", "FunctionName", wiring.API)
	var got []string
	for _, e := range api["Events"].(map[string]any) {
		e := e.(map[string]any)
		if e["Type"] != "HttpApi" {
			continue
		}
		p := e["Properties"].(map[string]any)
		auth := "JWT"
		if a, ok := p["Auth"].(map[string]any); ok && a["Authorizer"] == "NONE" {
			auth = "NONE"
		}
		got = append(got, fmt.Sprintf("%s %s %s", p["Method"], p["Path"], auth))
	}
	var want []string
	cdk := stages[stack.Dev]
	for _, r := range cdk.resources("AWS::ApiGatewayV2::Route") {
		want = append(want, fmt.Sprintf("%s %s", props(r)["RouteKey"], props(r)["AuthorizationType"]))
	}
	if d := cmp.Diff(sorted(want), sorted(got)); d != "" {
		t.Errorf("routes (-cdk +sam):\n%s", d)
	}
}
