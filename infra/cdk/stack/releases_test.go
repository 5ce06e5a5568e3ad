package stack_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shopstream/shopstream/infra/cdk/stack"
	"github.com/shopstream/shopstream/shared/wiring"
)

// TestReleases: every function is served by its live alias on a published
// version; API Gateway calls the API's alias; CodeDeploy shifts each alias
// with automatic rollback on failure and on its alarms, the API by the
// stage's canary or linear configuration (prod slower than dev), the stream
// functions all at once; prod keeps API environments provisioned.
func TestReleases(t *testing.T) {
	wantConfig := map[string]string{
		stack.Dev:  "CodeDeployDefault.LambdaCanary10Percent5Minutes",
		stack.Prod: "CodeDeployDefault.LambdaLinear10PercentEvery1Minute",
	}
	wantPC := map[string]any{stack.Dev: nil, stack.Prod: float64(5)}
	for _, name := range stageNames() {
		s := stages[name]
		t.Run(name, func(t *testing.T) {
			aliases := s.resources("AWS::Lambda::Alias")
			if len(aliases) != len(wiring.Functions()) {
				t.Fatalf("got %d aliases, want one per function (%d)", len(aliases), len(wiring.Functions()))
			}
			versions := s.resources("AWS::Lambda::Version")
			for _, fn := range wiring.Functions() {
				a := props(aliases[s.logicalID(s.stack.Aliases[fn])])
				if a["Name"] != stack.LiveAlias {
					t.Errorf("%s: alias %v, want %s", fn, a["Name"], stack.LiveAlias)
				}
				ref, _ := a["FunctionVersion"].(map[string]any)
				getAtt, _ := ref["Fn::GetAtt"].([]any)
				if len(getAtt) != 2 || versions[fmt.Sprint(getAtt[0])] == nil {
					t.Errorf("%s: alias points at %v, want a published version", fn, a["FunctionVersion"])
				}
				pc, _ := a["ProvisionedConcurrencyConfig"].(map[string]any)
				var got any
				if pc != nil {
					got = pc["ProvisionedConcurrentExecutions"]
				}
				if fn == wiring.API && got != wantPC[name] || fn != wiring.API && pc != nil {
					t.Errorf("%s: provisioned concurrency %v", fn, a["ProvisionedConcurrencyConfig"])
				}
			}
			apiAlias := s.logicalID(s.stack.Aliases[wiring.API])
			// The API's release runs the pre-traffic hook first, and the hook
			// targets the version this deploy publishes.
			up, _ := aliases[apiAlias]["UpdatePolicy"].(map[string]any)
			cd, _ := up["CodeDeployLambdaAliasUpdate"].(map[string]any)
			hookID := ""
			for id, f := range s.resources("AWS::Lambda::Function") {
				if props(f)["FunctionName"] == stageName(name)+"-"+stack.HookFunction {
					hookID = id
					env := fmt.Sprint(props(f)["Environment"])
					if !strings.Contains(env, "TARGET_VERSION_ARN") || !strings.Contains(env, "ApiFunctionCurrentVersion") {
						t.Errorf("hook environment %s: want TARGET_VERSION_ARN on the API's current version", env)
					}
				}
			}
			if hookID == "" || !strings.Contains(fmt.Sprint(cd["BeforeAllowTrafficHook"]), hookID) {
				t.Errorf("API alias update policy %v: want the hook %s before traffic", cd, hookID)
			}
			for _, in := range s.resources("AWS::ApiGatewayV2::Integration") {
				if uri := fmt.Sprint(props(in)["IntegrationUri"]); !strings.Contains(uri, apiAlias) {
					t.Errorf("integration %s: want the API's live alias %s", uri, apiAlias)
				}
			}
			groups := s.resources("AWS::CodeDeploy::DeploymentGroup")
			if len(groups) != len(wiring.Functions()) {
				t.Fatalf("got %d deployment groups, want %d", len(groups), len(wiring.Functions()))
			}
			for _, g := range groups {
				p := props(g)
				gname := fmt.Sprint(p["DeploymentGroupName"])
				want := "CodeDeployDefault.LambdaAllAtOnce"
				if gname == stack.DeploymentGroup(name, wiring.API) {
					want = wantConfig[name]
				}
				if got := fmt.Sprint(p["DeploymentConfigName"]); got != want {
					t.Errorf("%s: config %s, want %s", gname, got, want)
				}
				rb := p["AutoRollbackConfiguration"].(map[string]any)
				events := fmt.Sprint(rb["Events"])
				if rb["Enabled"] != true || !strings.Contains(events, "DEPLOYMENT_FAILURE") || !strings.Contains(events, "DEPLOYMENT_STOP_ON_ALARM") {
					t.Errorf("%s: rollback %v, want on failure and on alarm", gname, rb)
				}
				ac := p["AlarmConfiguration"].(map[string]any)
				if ac["Enabled"] != true || len(ac["Alarms"].([]any)) < 2 {
					t.Errorf("%s: alarms %v, want at least two", gname, ac)
				}
			}
			for id, r := range s.resources("AWS::IAM::Role") {
				if strings.Contains(id, "DeploymentRole") && props(r)["ManagedPolicyArns"] != nil {
					t.Errorf("%s: managed policies %v, want none", id, props(r)["ManagedPolicyArns"])
				}
			}
		})
	}
}

// TestFirstDeployRetryable: a prod create that fails and rolls back leaves
// nothing behind: no resource is plainly retained (retained data is
// RetainExceptOnCreate), and termination protection, which would block the
// cleanup of the rolled-back stack, is off in the template (make deploy
// turns it on after a successful deploy).
func TestFirstDeployRetryable(t *testing.T) {
	s := stages[stack.Prod]
	if tp := s.stack.TerminationProtection(); tp != nil && *tp {
		t.Error("termination protection on in the template")
	}
	retained := 0
	for id, r := range s.json["Resources"].(map[string]any) {
		res := r.(map[string]any)
		// UpdateReplacePolicy Retain keeps data across a replacement; only the
		// DeletionPolicy acts on a create's rollback.
		switch res["DeletionPolicy"] {
		case "Retain", "Snapshot":
			t.Errorf("%s (%s): DeletionPolicy %v, want RetainExceptOnCreate or Delete", id, res["Type"], res["DeletionPolicy"])
		case "RetainExceptOnCreate":
			retained++
		}
	}
	// Tables, user pool, search domain, secret, log groups, buckets.
	if retained == 0 {
		t.Error("nothing is retained in prod")
	}
	for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::Cognito::UserPool", "AWS::OpenSearchService::Domain", "AWS::SecretsManager::Secret"} {
		for id, r := range s.resources(typ) {
			if r["DeletionPolicy"] != "RetainExceptOnCreate" {
				t.Errorf("%s (%s): DeletionPolicy %v, want RetainExceptOnCreate", id, typ, r["DeletionPolicy"])
			}
		}
	}
}
