package tokengate

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	cip "github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider"
)

// pool answers AdminGetUser from a map of users to their MFA methods.
type pool struct {
	factors  map[string][]string
	disabled map[string]bool
	err      error
	calls    int
}

func (p *pool) AdminGetUser(_ context.Context, in *cip.AdminGetUserInput, _ ...func(*cip.Options)) (*cip.AdminGetUserOutput, error) {
	p.calls++
	if p.err != nil {
		return nil, p.err
	}
	if aws.ToString(in.UserPoolId) != "us-east-1_pool" {
		return nil, errors.New("ResourceNotFoundException")
	}
	f, ok := p.factors[aws.ToString(in.Username)]
	if !ok {
		return nil, errors.New("UserNotFoundException")
	}
	return &cip.AdminGetUserOutput{Username: in.Username, Enabled: !p.disabled[aws.ToString(in.Username)], UserMFASettingList: f}, nil
}

// event is a version-1 pre-token-generation event as Cognito sends it.
func event(t *testing.T, user string, groups ...string) events.CognitoEventUserPoolsPreTokenGen {
	t.Helper()
	g, _ := json.Marshal(groups)
	raw := `{"version":"1","triggerSource":"TokenGeneration_Authentication","region":"us-east-1",
		"userPoolId":"us-east-1_pool","userName":"` + user + `","callerContext":{"awsSdkVersion":"aws-sdk-unknown-unknown","clientId":"client"},
		"request":{"userAttributes":{"sub":"` + user + `","email":"` + user + `@example.com"},
		"groupConfiguration":{"groupsToOverride":` + string(g) + `,"iamRolesToOverride":[],"preferredRole":null}},
		"response":{"claimsOverrideDetails":null}}`
	var ev events.CognitoEventUserPoolsPreTokenGen
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// groupsOverride is the response's groupsToOverride as Cognito reads it:
// null keeps the token's groups.
func groupsOverride(t *testing.T, ev events.CognitoEventUserPoolsPreTokenGen) string {
	t.Helper()
	b, err := json.Marshal(ev.Response)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		ClaimsOverrideDetails struct {
			GroupOverrideDetails struct {
				GroupsToOverride json.RawMessage `json:"groupsToOverride"`
			} `json:"groupOverrideDetails"`
		} `json:"claimsOverrideDetails"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return string(r.ClaimsOverrideDetails.GroupOverrideDetails.GroupsToOverride)
}

func TestAdminNeedsASecondFactor(t *testing.T) {
	p := &pool{factors: map[string][]string{
		"ada":   {"SOFTWARE_TOKEN_MFA"},
		"grace": nil,
		"alan":  {},
		"linus": {"SOFTWARE_TOKEN_MFA"},
		"ken":   nil,
	}, disabled: map[string]bool{"linus": true}}
	h := &Handler{Users: p, Logger: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		name, user string
		groups     []string
		want       string // the response's groupsToOverride
		calls      int
	}{
		{"a shopper, untouched and no call", "ken", nil, "null", 0},
		{"a shopper in another group", "ken", []string{"beta"}, "null", 0},
		{"an admin with TOTP enabled", "ada", []string{"admin"}, "null", 1},
		{"an admin without a second factor", "grace", []string{"admin"}, "[]", 1},
		{"an admin with an empty MFA list", "alan", []string{"beta", "admin"}, `["beta"]`, 1},
		{"a group named like admin is not admin", "ken", []string{"Admin", "admins"}, "null", 0},
		{"an admin the pool does not know", "nobody", []string{"admin"}, "[]", 1},
		{"a disabled admin", "linus", []string{"admin"}, "[]", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.calls = 0
			got, err := h.Handle(context.Background(), event(t, tc.user, tc.groups...))
			if err != nil {
				t.Fatal(err)
			}
			if o := groupsOverride(t, got); o != tc.want {
				t.Errorf("groupsToOverride: got %s, want %s", o, tc.want)
			}
			if p.calls != tc.calls {
				t.Errorf("AdminGetUser calls: got %d, want %d", p.calls, tc.calls)
			}
			if !slices.Equal(got.Request.GroupConfiguration.GroupsToOverride, tc.groups) {
				t.Errorf("the request changed: %v", got.Request.GroupConfiguration.GroupsToOverride)
			}
		})
	}
}

// When the pool cannot be asked, admin is left out and the token still
// issued: an admin loses a sign-in, a shopper nothing.
func TestPoolUnreachableLeavesAdminOut(t *testing.T) {
	var logs strings.Builder
	h := &Handler{Users: &pool{err: errors.New("ThrottlingException: Rate exceeded")}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	got, err := h.Handle(context.Background(), event(t, "ada", "admin", "beta"))
	if err != nil {
		t.Fatalf("got %v, want the token issued without admin", err)
	}
	if o := groupsOverride(t, got); o != `["beta"]` {
		t.Errorf("groupsToOverride: got %s, want [\"beta\"]", o)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "Rate exceeded") {
		t.Errorf("log: got %s, want an error line with the cause", logs.String())
	}
}

// A version-1 event as Cognito documents it decodes, and an admin without a
// second factor loses admin in the JSON Cognito reads back.
func TestSampleEvent(t *testing.T) {
	raw, err := os.ReadFile("testdata/admin-without-mfa.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.CognitoEventUserPoolsPreTokenGen
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ev.Request.GroupConfiguration.GroupsToOverride, AdminGroup) {
		t.Fatalf("the sample is not an admin's: %v", ev.Request.GroupConfiguration.GroupsToOverride)
	}
	h := &Handler{Users: &pool{factors: map[string][]string{ev.UserName: nil}}, Logger: slog.New(slog.DiscardHandler)}
	ev.UserPoolID = "us-east-1_pool"
	got, err := h.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if o := groupsOverride(t, got); o != "[]" {
		t.Errorf("groupsToOverride: got %s, want []", o)
	}
}
