package admins

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	cip "github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider"
	"github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider/types"
)

// pool records the calls a command makes, in order.
type pool struct {
	user  cip.AdminGetUserOutput
	fail  string // the call that fails
	calls []string
}

func (p *pool) call(name string) error {
	p.calls = append(p.calls, name)
	if p.fail == name {
		return errors.New(name + " refused")
	}
	return nil
}

func (p *pool) AdminGetUser(_ context.Context, in *cip.AdminGetUserInput, _ ...func(*cip.Options)) (*cip.AdminGetUserOutput, error) {
	if err := p.call("get"); err != nil {
		return nil, err
	}
	u := p.user
	u.Username = aws.String("3f1c2a9e-" + aws.ToString(in.Username)) // the alias resolves to the username
	return &u, nil
}

func (p *pool) AdminUserGlobalSignOut(_ context.Context, in *cip.AdminUserGlobalSignOutInput, _ ...func(*cip.Options)) (*cip.AdminUserGlobalSignOutOutput, error) {
	return &cip.AdminUserGlobalSignOutOutput{}, p.call("signout " + aws.ToString(in.Username))
}

func (p *pool) AdminAddUserToGroup(_ context.Context, in *cip.AdminAddUserToGroupInput, _ ...func(*cip.Options)) (*cip.AdminAddUserToGroupOutput, error) {
	return &cip.AdminAddUserToGroupOutput{}, p.call("add " + aws.ToString(in.Username) + " " + aws.ToString(in.GroupName))
}

func (p *pool) AdminRemoveUserFromGroup(_ context.Context, in *cip.AdminRemoveUserFromGroupInput, _ ...func(*cip.Options)) (*cip.AdminRemoveUserFromGroupOutput, error) {
	return &cip.AdminRemoveUserFromGroupOutput{}, p.call("remove " + aws.ToString(in.Username) + " " + aws.ToString(in.GroupName))
}

func ready() cip.AdminGetUserOutput {
	return cip.AdminGetUserOutput{Enabled: true, UserStatus: types.UserStatusTypeConfirmed, UserMFASettingList: []string{TOTP}}
}

// Add signs the user out everywhere before the group, never after: a
// refresh token from before would otherwise become an admin's.
func TestAddSignsOutBeforeTheGroup(t *testing.T) {
	p := &pool{user: ready()}
	var out strings.Builder
	if err := Add(context.Background(), p, "us-east-1_pool", "grace@example.com", &out); err != nil {
		t.Fatal(err)
	}
	want := []string{"get", "signout 3f1c2a9e-grace@example.com", "add 3f1c2a9e-grace@example.com admin"}
	if !slices.Equal(p.calls, want) {
		t.Errorf("calls: got %v, want %v", p.calls, want)
	}
	if !strings.Contains(out.String(), "signed out everywhere") || !strings.Contains(out.String(), "added to admin") {
		t.Errorf("output: %s", out.String())
	}
}

func TestAddRefusesWithoutTOTP(t *testing.T) {
	for _, tc := range []struct {
		name string
		user func(*cip.AdminGetUserOutput)
		want string
	}{
		{"no second factor", func(u *cip.AdminGetUserOutput) { u.UserMFASettingList = nil }, "no TOTP"},
		{"e-mail codes only", func(u *cip.AdminGetUserOutput) { u.UserMFASettingList = []string{"EMAIL_OTP"} }, "no TOTP"},
		{"disabled", func(u *cip.AdminGetUserOutput) { u.Enabled = false }, "disabled"},
		{"not confirmed", func(u *cip.AdminGetUserOutput) { u.UserStatus = types.UserStatusTypeForceChangePassword }, "want CONFIRMED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := ready()
			tc.user(&u)
			p := &pool{user: u}
			err := Add(context.Background(), p, "us-east-1_pool", "grace", io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			if !slices.Equal(p.calls, []string{"get"}) {
				t.Errorf("calls: got %v, want the read alone", p.calls)
			}
		})
	}
}

// A sign-out that fails adds nothing.
func TestAddStopsWhenTheSignOutFails(t *testing.T) {
	p := &pool{user: ready(), fail: "signout 3f1c2a9e-grace"}
	err := Add(context.Background(), p, "us-east-1_pool", "grace", io.Discard)
	if err == nil || !strings.Contains(err.Error(), "nothing added") {
		t.Fatalf("got %v, want the sign-out's error", err)
	}
	if len(p.calls) != 2 {
		t.Errorf("calls: got %v, want no add after the failed sign-out", p.calls)
	}
}

func TestRemoveTakesOutThenSignsOut(t *testing.T) {
	p := &pool{}
	var out strings.Builder
	if err := Remove(context.Background(), p, "us-east-1_pool", "grace", &out); err != nil {
		t.Fatal(err)
	}
	if want := []string{"remove grace admin", "signout grace"}; !slices.Equal(p.calls, want) {
		t.Errorf("calls: got %v, want %v", p.calls, want)
	}
	if !strings.Contains(out.String(), "an hour") {
		t.Errorf("output does not say issued tokens stay valid: %s", out.String())
	}
}
