// Package admins adds a user to a stage's admin group, and takes one out,
// the one safe way (docs/deploy.md, "Admins need a second factor").
//
// The pool's token trigger keeps the group to users with TOTP enabled, but it
// cannot see how old the session behind a refresh is: a refresh token from a
// sign-in made before the user was an admin (a password thief's, from the
// days the user had no second factor) would become an admin's at its next
// refresh. So Add checks TOTP, signs the user out everywhere (every refresh
// token revoked), and only then adds the user to the group: the first admin
// token comes from a sign-in that passed the TOTP challenge. Remove takes
// the user out and signs them out everywhere; tokens already issued stay
// valid until they expire (an hour): API Gateway's JWT authorizer does not
// ask Cognito about revocation.
package admins

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	cip "github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider"
	"github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider/types"

	"github.com/shopstream/shopstream/functions/pre-token/tokengate"
	"github.com/shopstream/shopstream/shared/routes"
)

// Group is the admin group (docs/contract.md).
const Group = routes.AdminGroup

// TOTP is the pool's one second factor.
const TOTP = tokengate.TOTP

// Pool is the part of the Cognito user pools client the commands use.
type Pool interface {
	AdminGetUser(context.Context, *cip.AdminGetUserInput, ...func(*cip.Options)) (*cip.AdminGetUserOutput, error)
	AdminUserGlobalSignOut(context.Context, *cip.AdminUserGlobalSignOutInput, ...func(*cip.Options)) (*cip.AdminUserGlobalSignOutOutput, error)
	AdminAddUserToGroup(context.Context, *cip.AdminAddUserToGroupInput, ...func(*cip.Options)) (*cip.AdminAddUserToGroupOutput, error)
	AdminRemoveUserFromGroup(context.Context, *cip.AdminRemoveUserFromGroupInput, ...func(*cip.Options)) (*cip.AdminRemoveUserFromGroupOutput, error)
}

// ErrNoTOTP refuses to add a user without TOTP enabled.
var ErrNoTOTP = errors.New("the user has no TOTP enabled: they enable it on their account first (docs/deploy.md, \"Admins need a second factor\")")

// Add makes user an admin of the pool: TOTP enabled and the account
// confirmed and enabled, or nothing is done; then every session signed out;
// then the group.
func Add(ctx context.Context, p Pool, poolID, user string, out io.Writer) error {
	u, err := p.AdminGetUser(ctx, &cip.AdminGetUserInput{UserPoolId: aws.String(poolID), Username: aws.String(user)})
	if err != nil {
		return fmt.Errorf("read user %s: %w", user, err)
	}
	switch {
	case !u.Enabled:
		return fmt.Errorf("user %s is disabled", user)
	case u.UserStatus != types.UserStatusTypeConfirmed:
		return fmt.Errorf("user %s is %s, want CONFIRMED", user, u.UserStatus)
	case !slices.Contains(u.UserMFASettingList, TOTP):
		return fmt.Errorf("user %s: %w", user, ErrNoTOTP)
	}
	name := aws.ToString(u.Username)
	if _, err := p.AdminUserGlobalSignOut(ctx, &cip.AdminUserGlobalSignOutInput{UserPoolId: aws.String(poolID), Username: aws.String(name)}); err != nil {
		return fmt.Errorf("sign %s out everywhere (nothing added): %w", user, err)
	}
	fmt.Fprintf(out, "%s: TOTP enabled; signed out everywhere (every refresh token revoked)\n", user)
	if _, err := p.AdminAddUserToGroup(ctx, &cip.AdminAddUserToGroupInput{UserPoolId: aws.String(poolID), Username: aws.String(name), GroupName: aws.String(Group)}); err != nil {
		return fmt.Errorf("add %s to %s: %w", user, Group, err)
	}
	fmt.Fprintf(out, "%s: added to %s; their next sign-in, with their TOTP code, carries it\n", user, Group)
	return nil
}

// Remove takes user out of the admin group and signs them out everywhere.
func Remove(ctx context.Context, p Pool, poolID, user string, out io.Writer) error {
	if _, err := p.AdminRemoveUserFromGroup(ctx, &cip.AdminRemoveUserFromGroupInput{UserPoolId: aws.String(poolID), Username: aws.String(user), GroupName: aws.String(Group)}); err != nil {
		return fmt.Errorf("take %s out of %s: %w", user, Group, err)
	}
	fmt.Fprintf(out, "%s: taken out of %s\n", user, Group)
	if _, err := p.AdminUserGlobalSignOut(ctx, &cip.AdminUserGlobalSignOutInput{UserPoolId: aws.String(poolID), Username: aws.String(user)}); err != nil {
		return fmt.Errorf("sign %s out everywhere: %w", user, err)
	}
	fmt.Fprintf(out, "%s: signed out everywhere; tokens already issued stay valid until they expire (an hour)\n", user)
	return nil
}
