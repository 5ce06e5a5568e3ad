package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/routes"
	"github.com/shopstream/shopstream/shared/users"
)

// Access is who may call a route (declared in shared/routes).
type Access = routes.Access

// Access levels.
const (
	Public = routes.Public
	User   = routes.User
	Owner  = routes.Owner
	Admin  = routes.Admin
)

// Identity is the caller as the JWT authorizer verified it.
type Identity struct {
	UserID string
	Admin  bool
	// Email is the token's email claim; empty when the token has none.
	Email string
	// EmailVerified is the token's email_verified claim: the identity
	// provider confirmed the address belongs to the user. Cognito lets a
	// user change their email attribute and issues tokens with the new,
	// unconfirmed address and email_verified false.
	EmailVerified bool
	// Refused says why a verified token is still not served (a sub that is
	// not a usable user id); empty when it is.
	Refused string
}

// identityFrom reads the verified claims API Gateway passes in
// requestContext.authorizer.jwt.claims. No sub: anonymous. A sub that is not
// exactly a user id (surrounding space, control characters, too long) is
// refused rather than trimmed: trimming would let two tokens share one user.
func identityFrom(ev events.APIGatewayV2HTTPRequest) Identity {
	a := ev.RequestContext.Authorizer
	if a == nil || a.JWT == nil {
		return Identity{}
	}
	sub := a.JWT.Claims["sub"]
	if sub == "" {
		return Identity{}
	}
	// Claims arrive as strings: a JSON true is "true".
	id := Identity{UserID: sub, Email: a.JWT.Claims["email"], EmailVerified: strings.EqualFold(strings.TrimSpace(a.JWT.Claims["email_verified"]), "true")}
	if strings.TrimSpace(sub) != sub || !users.ValidID(sub) {
		id.Refused = "the token's sub is not a usable user id"
	}
	id.Admin = slices.Contains(Groups(a.JWT.Claims["cognito:groups"]), routes.AdminGroup)
	return id
}

// Groups parses a cognito:groups claim as API Gateway passes it. Claims reach
// the function as strings: a JSON array in the token arrives as a JSON array
// (`["admin","users"]`) or as API Gateway's rendering of it, "[admin users]";
// a plain string claim is one group. Cognito group names hold no white space,
// so "[a b]" splits on white space only; commas and quotes belong to the
// names ("support,admin" and "'admin'" are groups of their own, neither
// admin).
func Groups(claim string) []string {
	s := strings.TrimSpace(claim)
	if s == "" {
		return nil
	}
	if strings.HasPrefix(s, "[") {
		var arr []string
		if json.Unmarshal([]byte(s), &arr) == nil {
			return slices.DeleteFunc(arr, func(g string) bool { return g == "" })
		}
		if inner, ok := strings.CutSuffix(s[1:], "]"); ok {
			return strings.Fields(inner)
		}
	}
	return []string{s}
}

func identity(ctx context.Context) Identity {
	id, _ := ctx.Value(identityKey).(Identity)
	return id
}

// authenticate refuses a caller without a token on a route that needs one.
// Code: Unauthorized.
func authenticate(r *http.Request, access Access) error {
	if access != Public && identity(r.Context()).UserID == "" {
		return errcode.Errorf(errcode.Unauthorized, "a bearer token is required")
	}
	return nil
}

// authorize checks the caller against the route's access. Codes:
// Unauthorized, Forbidden.
func authorize(r *http.Request, access Access) error {
	id := identity(r.Context())
	if access == Public {
		return nil
	}
	if id.UserID == "" {
		return errcode.Errorf(errcode.Unauthorized, "a bearer token is required")
	}
	if id.Refused != "" {
		return errcode.Errorf(errcode.Forbidden, "%s", id.Refused)
	}
	switch access {
	case Admin:
		if !id.Admin {
			return errcode.Errorf(errcode.Forbidden, "only admins may do this")
		}
	case Owner:
		if !id.Admin && r.PathValue("userId") != id.UserID {
			return errcode.Errorf(errcode.Forbidden, "this belongs to another user")
		}
	}
	return nil
}
