package stack_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/infra/cdk/stack"
)

// TestUserPoolKeepsOriginalEmail: a changed address waits for its owner's
// confirmation (the pool keeps the original meanwhile), and the app client
// writes the address and the name only.
func TestUserPoolKeepsOriginalEmail(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		t.Run(name, func(t *testing.T) {
			for _, p := range s.resources("AWS::Cognito::UserPool") {
				got := fmt.Sprint(props(p)["UserAttributeUpdateSettings"])
				if got != "map[AttributesRequireVerificationBeforeUpdate:[email]]" {
					t.Errorf("update settings: got %s, want email verified before update", got)
				}
			}
			clients := s.resources("AWS::Cognito::UserPoolClient")
			if len(clients) != 1 {
				t.Fatalf("got %d app clients, want 1", len(clients))
			}
			for _, c := range clients {
				var write []string
				for _, a := range props(c)["WriteAttributes"].([]any) {
					write = append(write, a.(string))
				}
				sort.Strings(write)
				if fmt.Sprint(write) != "[email name]" {
					t.Errorf("write attributes: got %v, want [email name]", write)
				}
				// No OAuth: no grant, scope or callback a hosted UI added
				// later would hand tokens to.
				cp := props(c)
				if cp["AllowedOAuthFlowsUserPoolClient"] != false || cp["AllowedOAuthFlows"] != nil || cp["AllowedOAuthScopes"] != nil || cp["CallbackURLs"] != nil {
					t.Errorf("app client OAuth: flows enabled %v, flows %v, scopes %v, callbacks %v; want none", cp["AllowedOAuthFlowsUserPoolClient"], cp["AllowedOAuthFlows"], cp["AllowedOAuthScopes"], cp["CallbackURLs"])
				}
			}
		})
	}
}

// TestAdminsNeedASecondFactor: the pool calls the pre-token trigger (event
// version 2) before every token, may invoke it, and the trigger may read
// this pool's users and take one out of a group, nothing else; the pool challenges every user with a
// second factor at each sign-in (optional TOTP, no remembered devices that
// would skip it).
func TestAdminsNeedASecondFactor(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		cfg, _ := stack.StageConfig(name)
		t.Run(name, func(t *testing.T) {
			fnID := ""
			for id, f := range s.resources("AWS::Lambda::Function") {
				if props(f)["FunctionName"] == cfg.Name+"-"+stack.TokenFunction {
					fnID = id
				}
			}
			if fnID == "" {
				t.Fatalf("no function %s-%s", cfg.Name, stack.TokenFunction)
			}
			fnArn := fmt.Sprint(map[string]any{"Fn::GetAtt": []any{fnID, "Arn"}})
			pools := s.resources("AWS::Cognito::UserPool")
			if len(pools) != 1 {
				t.Fatalf("got %d user pools, want 1", len(pools))
			}
			for poolID, p := range pools {
				pp := props(p)
				lc, _ := pp["LambdaConfig"].(map[string]any)
				// Version 2, the event tokengate answers: its group override
				// reaches the access token too. It needs Essentials or Plus.
				want := fmt.Sprint(map[string]any{"LambdaArn": map[string]any{"Fn::GetAtt": []any{fnID, "Arn"}}, "LambdaVersion": "V2_0"})
				if got := fmt.Sprint(lc["PreTokenGenerationConfig"]); got != want {
					t.Errorf("pre-token trigger: got LambdaConfig %v, want PreTokenGenerationConfig %s", lc, want)
				}
				if plan := pp["UserPoolTier"]; plan != "ESSENTIALS" && plan != "PLUS" {
					t.Errorf("feature plan: got %v, want ESSENTIALS or PLUS (version 2 events)", plan)
				}
				if pp["MfaConfiguration"] != "OPTIONAL" || fmt.Sprint(pp["EnabledMfas"]) != "[SOFTWARE_TOKEN_MFA]" {
					t.Errorf("MFA: got %v %v, want OPTIONAL with TOTP", pp["MfaConfiguration"], pp["EnabledMfas"])
				}
				if dc, ok := pp["DeviceConfiguration"]; ok {
					t.Errorf("device configuration %v: a remembered device would skip the second factor", dc)
				}
				poolArn := fmt.Sprint(map[string]any{"Fn::GetAtt": []any{poolID, "Arn"}})
				invokes := 0
				for _, perm := range s.resources("AWS::Lambda::Permission") {
					pp := props(perm)
					if fmt.Sprint(pp["FunctionName"]) == fnArn {
						invokes++
						if pp["Principal"] != "cognito-idp.amazonaws.com" || fmt.Sprint(pp["SourceArn"]) != poolArn {
							t.Errorf("permission to invoke the trigger: %v, want cognito-idp from %s only", pp, poolArn)
						}
					}
				}
				// The only ways to a token: SRP (challenged for TOTP) and
				// refresh. An admin-initiated, password or passwordless flow
				// would need its own look at the second factor.
				for _, c := range s.resources("AWS::Cognito::UserPoolClient") {
					if got := fmt.Sprint(props(c)["ExplicitAuthFlows"]); got != "[ALLOW_USER_SRP_AUTH ALLOW_REFRESH_TOKEN_AUTH]" {
						t.Errorf("app client auth flows: got %s, want SRP and refresh only", got)
					}
				}
				if invokes != 1 {
					t.Errorf("got %d permissions to invoke the trigger, want 1", invokes)
				}
				roleID := s.logicalID(s.stack.Stack.Node().FindChild(jsii.String("PreTokenRole")))
				var cognito []string
				for _, pol := range s.resources("AWS::IAM::Policy") {
					pp := props(pol)
					if !strings.Contains(fmt.Sprint(pp["Roles"]), roleID) {
						continue
					}
					for _, st := range pp["PolicyDocument"].(map[string]any)["Statement"].([]any) {
						st := st.(map[string]any)
						if a := fmt.Sprint(st["Action"]); strings.Contains(a, "cognito") {
							cognito = append(cognito, a+" on "+fmt.Sprint(st["Resource"]))
						}
					}
				}
				if want := []string{"[cognito-idp:AdminGetUser cognito-idp:AdminRemoveUserFromGroup] on " + poolArn}; !slices.Equal(cognito, want) {
					t.Errorf("the trigger's Cognito grants: got %v, want %v", cognito, want)
				}
			}
		})
	}
}
