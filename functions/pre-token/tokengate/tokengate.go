// Package tokengate is the user pool's pre-token-generation trigger: the
// admin group reaches a token only for an admin with a second factor.
//
// Cognito cannot require MFA for one group of a pool: the pool's MFA is
// optional so that shoppers can buy without a phone. An admin manages the
// catalogue, moves orders and reads every user's data, so a stolen password
// alone must not be enough. The pool asks every user with a second factor
// enabled for it at each sign-in; this trigger runs before every token is
// issued (sign-in, refresh, device sign-in) and leaves admin out of
// cognito:groups unless the user has one enabled. A shopper's token is
// returned untouched, without a call. When the user pool cannot be asked,
// admin is left out: the failure costs an admin a sign-in, never the shop
// an admin without a second factor.
package tokengate

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	cip "github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider"
)

// AdminGroup is the group whose members may do everything (docs/contract.md).
const AdminGroup = "admin"

// Users is the part of the Cognito user pools client the trigger uses.
type Users interface {
	AdminGetUser(context.Context, *cip.AdminGetUserInput, ...func(*cip.Options)) (*cip.AdminGetUserOutput, error)
}

// Handler is the trigger.
type Handler struct {
	Users  Users
	Logger *slog.Logger
}

// Handle answers a pre-token-generation event (version 1): unchanged, or with
// the user's groups less admin.
func (h *Handler) Handle(ctx context.Context, ev events.CognitoEventUserPoolsPreTokenGen) (events.CognitoEventUserPoolsPreTokenGen, error) {
	groups := ev.Request.GroupConfiguration.GroupsToOverride
	if !slices.Contains(groups, AdminGroup) {
		return ev, nil
	}
	factors, err := h.secondFactors(ctx, ev.UserPoolID, ev.UserName)
	switch {
	case err != nil:
		h.Logger.ErrorContext(ctx, "admin left out of the token: the user pool could not say whether the user has a second factor",
			"userPool", ev.UserPoolID, "user", ev.UserName, "trigger", ev.TriggerSource, "err", err.Error())
	case len(factors) > 0:
		return ev, nil
	default:
		h.Logger.WarnContext(ctx, "admin left out of the token: the user has no second factor enabled",
			"userPool", ev.UserPoolID, "user", ev.UserName, "trigger", ev.TriggerSource)
	}
	kept := make([]string, 0, len(groups))
	for _, g := range groups {
		if g != AdminGroup {
			kept = append(kept, g)
		}
	}
	// A non-nil list replaces the token's groups; nil would keep them.
	ev.Response.ClaimsOverrideDetails.GroupOverrideDetails.GroupsToOverride = kept
	return ev, nil
}

// secondFactors returns the MFA methods the user has enabled.
func (h *Handler) secondFactors(ctx context.Context, pool, user string) ([]string, error) {
	if pool == "" || user == "" {
		return nil, fmt.Errorf("event without userPoolId or userName")
	}
	out, err := h.Users.AdminGetUser(ctx, &cip.AdminGetUserInput{UserPoolId: aws.String(pool), Username: aws.String(user)})
	if err != nil {
		return nil, fmt.Errorf("admin get user: %w", err)
	}
	if !out.Enabled {
		return nil, fmt.Errorf("user %s is disabled", user)
	}
	return out.UserMFASettingList, nil
}
