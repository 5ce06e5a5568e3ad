// Package tokengate is the user pool's pre-token-generation trigger: the
// admin group reaches a token only for an admin with TOTP enabled.
//
// Cognito cannot require MFA for one group of a pool: the pool's MFA is
// optional so that shoppers can buy without a phone. An admin manages the
// catalogue, moves orders and reads every user's data, so a stolen password
// alone must not be enough. The pool challenges every user with TOTP enabled
// at each sign-in; this trigger runs before every token is issued (sign-in,
// refresh) and keeps the group to such users. A member without TOTP is taken
// out of the group and that sign-in fails: no token of any kind leaves it.
// A shopper's token is returned untouched, without a call, but for a group
// whose name holds a double quote, which no token carries (misreadable). When the pool
// cannot answer, an admin gets no token: the failure costs an admin a
// sign-in, never the shop an admin without a second factor.
//
// What the trigger cannot see is how old the session behind a refresh is: a
// refresh token from a sign-in made before the user was an admin becomes an
// admin's at the next refresh. Adding an admin therefore signs the user out
// everywhere first (make admin-add, infra/ops/admins).
package tokengate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	cip "github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider"

	"github.com/shopstream/shopstream/shared/routes"
)

// AdminGroup is the group whose members may do everything (docs/contract.md).
const AdminGroup = routes.AdminGroup

// TOTP is the one second factor the pool offers (MfaSecondFactor: OTP).
const TOTP = "SOFTWARE_TOKEN_MFA"

// Users is the part of the Cognito user pools client the trigger uses.
type Users interface {
	AdminGetUser(context.Context, *cip.AdminGetUserInput, ...func(*cip.Options)) (*cip.AdminGetUserOutput, error)
	AdminRemoveUserFromGroup(context.Context, *cip.AdminRemoveUserFromGroupInput, ...func(*cip.Options)) (*cip.AdminRemoveUserFromGroupOutput, error)
}

// Handler is the trigger.
type Handler struct {
	Users  Users
	Logger *slog.Logger
	// Timeout bounds the trigger's calls to the pool (default 2 s): Cognito
	// waits 5 s for a trigger, and an answer in time beats a retry that
	// outlasts it.
	Timeout time.Duration
}

// Handle answers a pre-token-generation event (version 2): unchanged for a
// user outside admin and for an admin with TOTP enabled. An admin without it
// is taken out of the group and gets no token at all this time (the trigger
// fails, and Cognito with it): no token, ID or access, and no refresh token
// ever leaves a sign-in or refresh that skipped the second factor while in
// the group. The next sign-in is a shopper's. When the pool cannot say, or
// cannot take the user out, the trigger fails too.
func (h *Handler) Handle(ctx context.Context, ev events.CognitoEventUserPoolsPreTokenGenV2_0) (events.CognitoEventUserPoolsPreTokenGenV2_0, error) {
	groups := ev.Request.GroupConfiguration.GroupsToOverride
	if slices.ContainsFunc(groups, misreadable) {
		kept := make([]string, 0, len(groups)) // empty, not nil: nil keeps every group
		for _, g := range groups {
			if !misreadable(g) {
				kept = append(kept, g)
			}
		}
		ev.Response.ClaimsAndScopeOverrideDetails.GroupOverrideDetails.GroupsToOverride = kept
		h.Logger.WarnContext(ctx, "groups left out of the token: a double quote in a group name lets the API misread the claim", "userPool", ev.UserPoolID, "user", ev.UserName, "left out", len(groups)-len(kept))
		groups = kept
	}
	if !slices.Contains(groups, AdminGroup) {
		return ev, nil
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	log := h.Logger.With("userPool", ev.UserPoolID, "user", ev.UserName, "trigger", ev.TriggerSource)
	totp, err := h.hasTOTP(ctx, ev.UserPoolID, ev.UserName)
	if err != nil {
		log.ErrorContext(ctx, "no token: the user pool could not say whether the admin has a second factor", "err", err.Error())
		return ev, fmt.Errorf("admin %s: second factor unknown: %w", ev.UserName, err)
	}
	if totp {
		return ev, nil
	}
	if _, err := h.Users.AdminRemoveUserFromGroup(ctx, &cip.AdminRemoveUserFromGroupInput{
		UserPoolId: aws.String(ev.UserPoolID), Username: aws.String(ev.UserName), GroupName: aws.String(AdminGroup),
	}); err != nil {
		log.ErrorContext(ctx, "no token: an admin without a second factor could not be taken out of the group", "err", err.Error())
		return ev, fmt.Errorf("admin %s without a second factor: leave the group: %w", ev.UserName, err)
	}
	log.WarnContext(ctx, "no token: taken out of admin, no second factor enabled; make admin-add WHO=… once TOTP is on")
	return ev, ErrNoSecondFactor
}

// misreadable says whether group name g could make the API read the
// claim as other groups than the token's. API Gateway passes an array
// claim as "[a b]", and the API also reads the claim as a JSON array (the
// contract allows both), so a group named `"admin"` would arrive as
// `["admin"]` and read as admin. Cognito's group names hold no white space;
// a double quote is what turns the rendering into JSON, so a group whose
// name holds one is left out of every token.
func misreadable(g string) bool { return strings.ContainsRune(g, '"') }

// ErrNoSecondFactor is the trigger's answer to a sign-in or refresh of an
// admin without TOTP, once taken out of the group: Cognito fails it, and
// the user's next sign-in is a shopper's.
var ErrNoSecondFactor = errors.New("admin without a second factor: taken out of the admin group; sign in again")

// hasTOTP reports whether the user has TOTP enabled.
func (h *Handler) hasTOTP(ctx context.Context, pool, user string) (bool, error) {
	if pool == "" || user == "" {
		return false, fmt.Errorf("event without userPoolId or userName")
	}
	out, err := h.Users.AdminGetUser(ctx, &cip.AdminGetUserInput{UserPoolId: aws.String(pool), Username: aws.String(user)})
	if err != nil {
		return false, fmt.Errorf("admin get user: %w", err)
	}
	if !out.Enabled {
		return false, fmt.Errorf("user %s is disabled", user)
	}
	return slices.Contains(out.UserMFASettingList, TOTP), nil
}
