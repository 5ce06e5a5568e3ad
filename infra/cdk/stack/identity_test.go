package stack_test

import (
	"fmt"
	"sort"
	"testing"
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
