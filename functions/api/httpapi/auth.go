package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/routes"
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
}

// identityFrom reads the verified claims API Gateway passes in
// requestContext.authorizer.jwt.claims. No sub: anonymous.
func identityFrom(ev events.APIGatewayV2HTTPRequest) Identity {
	a := ev.RequestContext.Authorizer
	if a == nil || a.JWT == nil {
		return Identity{}
	}
	sub := strings.TrimSpace(a.JWT.Claims["sub"])
	if sub == "" {
		return Identity{}
	}
	id := Identity{UserID: sub}
	for _, g := range Groups(a.JWT.Claims["cognito:groups"]) {
		if g == "admin" {
			id.Admin = true
		}
	}
	return id
}

// Groups parses a cognito:groups claim as API Gateway passes it: claims arrive
// as strings, so a list may be "[admin users]" (API Gateway's rendering of a
// JSON array), `["admin","users"]`, "admin,users", "admin users" or "admin".
func Groups(claim string) []string {
	s := strings.TrimSpace(claim)
	if s == "" {
		return nil
	}
	if strings.HasPrefix(s, "[") {
		var arr []string
		if json.Unmarshal([]byte(s), &arr) == nil {
			return clean(arr)
		}
		s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	}
	return clean(strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }))
}

func clean(in []string) []string {
	var out []string
	for _, g := range in {
		g = strings.Trim(strings.TrimSpace(g), `"'`)
		if g != "" {
			out = append(out, g)
		}
	}
	return out
}

func identity(ctx context.Context) Identity {
	id, _ := ctx.Value(identityKey).(Identity)
	return id
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
