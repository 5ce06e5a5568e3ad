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

// pool is a user pool's admin group and its members' MFA methods.
type pool struct {
	factors   map[string][]string
	disabled  map[string]bool
	admins    map[string]bool
	getErr    error
	removeErr error
	gets      int
}

func (p *pool) AdminGetUser(_ context.Context, in *cip.AdminGetUserInput, _ ...func(*cip.Options)) (*cip.AdminGetUserOutput, error) {
	p.gets++
	if p.getErr != nil {
		return nil, p.getErr
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

func (p *pool) AdminRemoveUserFromGroup(_ context.Context, in *cip.AdminRemoveUserFromGroupInput, _ ...func(*cip.Options)) (*cip.AdminRemoveUserFromGroupOutput, error) {
	if p.removeErr != nil {
		return nil, p.removeErr
	}
	if aws.ToString(in.GroupName) != AdminGroup || aws.ToString(in.UserPoolId) != "us-east-1_pool" {
		return nil, errors.New("ResourceNotFoundException")
	}
	delete(p.admins, aws.ToString(in.Username))
	return &cip.AdminRemoveUserFromGroupOutput{}, nil
}

// event is a version-2 pre-token-generation event as Cognito sends it.
func event(t *testing.T, user string, groups ...string) events.CognitoEventUserPoolsPreTokenGenV2_0 {
	t.Helper()
	g, _ := json.Marshal(groups)
	raw := `{"version":"2","triggerSource":"TokenGeneration_Authentication","region":"us-east-1",
		"userPoolId":"us-east-1_pool","userName":"` + user + `","callerContext":{"awsSdkVersion":"aws-sdk-unknown-unknown","clientId":"client"},
		"request":{"userAttributes":{"sub":"` + user + `","email":"` + user + `@example.com"},
		"groupConfiguration":{"groupsToOverride":` + string(g) + `,"iamRolesToOverride":[],"preferredRole":null},"scopes":["aws.cognito.signin.user.admin"]},
		"response":{"claimsAndScopeOverrideDetails":null}}`
	var ev events.CognitoEventUserPoolsPreTokenGenV2_0
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// groupsOverride is the response's groupsToOverride as Cognito reads it:
// null keeps the tokens' groups.
func groupsOverride(t *testing.T, ev events.CognitoEventUserPoolsPreTokenGenV2_0) string {
	t.Helper()
	b, err := json.Marshal(ev.Response)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Details struct {
			Groups struct {
				Override json.RawMessage `json:"groupsToOverride"`
			} `json:"groupOverrideDetails"`
		} `json:"claimsAndScopeOverrideDetails"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return string(r.Details.Groups.Override)
}

func TestAdminNeedsTOTP(t *testing.T) {
	for _, tc := range []struct {
		name, user string
		factors    []string
		groups     []string
		token      bool // a token is issued
		gets       int
		stillAdmin bool
	}{
		{"a shopper, untouched and no call", "ken", nil, nil, true, 0, false},
		{"a shopper in another group", "ken", nil, []string{"beta"}, true, 0, false},
		{"a group named like admin is not admin", "ken", nil, []string{"Admin", "admins"}, true, 0, false},
		{"an admin with TOTP enabled", "ada", []string{"SOFTWARE_TOKEN_MFA"}, []string{"admin"}, true, 1, true},
		{"an admin without a second factor", "grace", nil, []string{"admin"}, false, 1, false},
		{"an admin with an empty MFA list, in another group", "alan", []string{}, []string{"beta", "admin"}, false, 1, false},
		{"an admin with e-mail codes only", "barbara", []string{"EMAIL_OTP"}, []string{"admin"}, false, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pool{factors: map[string][]string{tc.user: tc.factors}, admins: map[string]bool{tc.user: slices.Contains(tc.groups, AdminGroup)}}
			h := &Handler{Users: p, Logger: slog.New(slog.DiscardHandler)}
			got, err := h.Handle(context.Background(), event(t, tc.user, tc.groups...))
			if tc.token && err != nil {
				t.Fatalf("got %v, want a token", err)
			}
			if !tc.token && !errors.Is(err, ErrNoSecondFactor) {
				t.Fatalf("got %v, want ErrNoSecondFactor (no token)", err)
			}
			// Tokens are issued as Cognito built them, or not at all.
			if o := groupsOverride(t, got); o != "null" {
				t.Errorf("groupsToOverride: got %s, want null", o)
			}
			if p.gets != tc.gets {
				t.Errorf("AdminGetUser calls: got %d, want %d", p.gets, tc.gets)
			}
			if p.admins[tc.user] != tc.stillAdmin {
				t.Errorf("in the admin group after: got %v, want %v", p.admins[tc.user], tc.stillAdmin)
			}
			if !slices.Equal(got.Request.GroupConfiguration.GroupsToOverride, tc.groups) {
				t.Errorf("the request changed: %v", got.Request.GroupConfiguration.GroupsToOverride)
			}
		})
	}
}

// The password thief: signs in as a member without TOTP. That sign-in
// issues nothing, not even a refresh token, and takes the member out of the
// group; enrolling a factor afterwards, with a shopper's tokens from a new
// sign-in, does not bring admin back.
func TestEnrollingAfterASignInDoesNotBringAdminBack(t *testing.T) {
	p := &pool{factors: map[string][]string{"grace": nil}, admins: map[string]bool{"grace": true}}
	h := &Handler{Users: p, Logger: slog.New(slog.DiscardHandler)}
	if _, err := h.Handle(context.Background(), event(t, "grace", "admin")); !errors.Is(err, ErrNoSecondFactor) {
		t.Fatalf("sign-in: got %v, want no token", err)
	}
	if p.admins["grace"] {
		t.Fatal("after the sign-in, grace is still in the admin group")
	}
	// Signed in again, a shopper now; enrols TOTP with those tokens, then
	// refreshes: Cognito sends the groups the user is in now, none.
	p.factors["grace"] = []string{TOTP}
	refresh := event(t, "grace")
	refresh.TriggerSource = "TokenGeneration_RefreshTokens"
	got, err := h.Handle(context.Background(), refresh)
	if err != nil || slices.Contains(got.Request.GroupConfiguration.GroupsToOverride, AdminGroup) || groupsOverride(t, got) != "null" || p.admins["grace"] {
		t.Errorf("refresh after enrolling: got groups %v, override %s, %v, in the group %v; want a shopper's token", got.Request.GroupConfiguration.GroupsToOverride, groupsOverride(t, got), err, p.admins["grace"])
	}
}

// When the pool cannot answer, or cannot take a member without TOTP out of
// the group, the trigger fails: Cognito issues no token, and the error says
// why.
func TestPoolFailuresIssueNoToken(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *pool
		user string
	}{
		{"AdminGetUser throttled", &pool{getErr: errors.New("TooManyRequestsException: Rate exceeded")}, "ada"},
		{"a user the pool does not know", &pool{factors: map[string][]string{}}, "nobody"},
		{"a disabled admin", &pool{factors: map[string][]string{"linus": {TOTP}}, disabled: map[string]bool{"linus": true}}, "linus"},
		{"the removal refused", &pool{factors: map[string][]string{"grace": nil}, removeErr: errors.New("AccessDeniedException")}, "grace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			h := &Handler{Users: tc.p, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
			if _, err := h.Handle(context.Background(), event(t, tc.user, "admin")); err == nil {
				t.Fatal("got a token, want the trigger to fail")
			}
			if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), `"user":"`+tc.user+`"`) {
				t.Errorf("log: got %s, want an error line naming the user", logs.String())
			}
		})
	}
	// A shopper never depends on the pool.
	h := &Handler{Users: &pool{getErr: errors.New("down")}, Logger: slog.New(slog.DiscardHandler)}
	if _, err := h.Handle(context.Background(), event(t, "ken")); err != nil {
		t.Errorf("a shopper with the pool down: %v", err)
	}
}

// A version-2 event as Cognito documents it decodes, and an admin without a
// second factor gets no token and leaves the group.
func TestSampleEvent(t *testing.T) {
	raw, err := os.ReadFile("testdata/admin-without-mfa.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.CognitoEventUserPoolsPreTokenGenV2_0
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Version != "2" || !slices.Contains(ev.Request.GroupConfiguration.GroupsToOverride, AdminGroup) {
		t.Fatalf("the sample is not a version-2 event of an admin: %s %v", ev.Version, ev.Request.GroupConfiguration.GroupsToOverride)
	}
	p := &pool{factors: map[string][]string{ev.UserName: nil}, admins: map[string]bool{ev.UserName: true}}
	h := &Handler{Users: p, Logger: slog.New(slog.DiscardHandler)}
	ev.UserPoolID = "us-east-1_pool"
	if _, err := h.Handle(context.Background(), ev); !errors.Is(err, ErrNoSecondFactor) || p.admins[ev.UserName] {
		t.Errorf("got %v, in the group %v; want ErrNoSecondFactor and out of the group", err, p.admins[ev.UserName])
	}
}

// TestMisreadableGroupsLeaveTheToken: API Gateway passes cognito:groups as
// "[a b]" and the API also reads a JSON array, so a group named `"admin"`
// (quotes are allowed in Cognito's group names) would reach the API as
// `["admin"]`, read as admin. Such groups are left out of the token; the
// others stay, and a token of plain groups is untouched.
func TestMisreadableGroupsLeaveTheToken(t *testing.T) {
	p := &pool{factors: map[string][]string{"mallory": nil}, admins: map[string]bool{}}
	h := &Handler{Users: p, Logger: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		groups []string
		want   string
	}{
		{[]string{`"admin"`, "users"}, `["users"]`},
		{[]string{`x","admin`}, `[]`},
		{[]string{"users", "support,admin"}, `null`},
		{[]string{"users"}, `null`},
	} {
		t.Run(strings.Join(tc.groups, " "), func(t *testing.T) {
			out, err := h.Handle(context.Background(), event(t, "mallory", tc.groups...))
			if err != nil {
				t.Fatal(err)
			}
			if got := groupsOverride(t, out); got != tc.want {
				t.Errorf("the token's groups override: got %s, want %s", got, tc.want)
			}
		})
	}
	if p.gets != 0 {
		t.Errorf("%d calls to the pool for tokens without admin, want 0", p.gets)
	}
}
