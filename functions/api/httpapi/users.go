package httpapi

import (
	"net/http"
	"net/url"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/users"
)

func (h *Handler) createUser(w http.ResponseWriter, r *http.Request) error {
	var in users.New
	if err := decode(r, &in); err != nil {
		return err
	}
	if err := in.Validate(); err != nil {
		return err
	}
	id := identity(r.Context())
	if id.Email != "" && !id.EmailVerified {
		return errUnverified
	}
	email, err := users.OwnEmail(id.Email, in.Email)
	if err != nil {
		return err
	}
	in.Email = email
	u, err := h.deps.Store.CreateUser(r.Context(), id.UserID, in)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/users/"+url.PathEscape(u.UserID))
	etag(w, u.Version)
	write(w, http.StatusCreated, u)
	return nil
}

func (h *Handler) getUser(w http.ResponseWriter, r *http.Request) error {
	u, err := h.deps.Store.GetUser(r.Context(), r.PathValue("userId"))
	if err != nil {
		return err
	}
	etag(w, u.Version)
	write(w, http.StatusOK, u)
	return nil
}

func (h *Handler) patchUser(w http.ResponseWriter, r *http.Request) error {
	version, err := ifMatch(r)
	if err != nil {
		return err
	}
	var in users.Patch
	if err := decode(r, &in); err != nil {
		return err
	}
	if err := in.Validate(); err != nil {
		return err
	}
	// A new address must be the email claim of the user's own token: an
	// admin's token carries the admin's address, never the user's.
	userID, tokenEmail := r.PathValue("userId"), ""
	if id := identity(r.Context()); id.UserID == userID {
		if in.Email != nil && id.Email != "" && !id.EmailVerified {
			return errUnverified
		}
		tokenEmail = id.Email
	}
	u, err := h.deps.Store.PatchUser(r.Context(), userID, in, version, tokenEmail)
	if err != nil {
		return err
	}
	etag(w, u.Version)
	write(w, http.StatusOK, u)
	return nil
}

// errUnverified refuses an address the identity provider has not confirmed:
// claiming it would lock its owner out (emails are unique).
var errUnverified = errcode.Errorf(errcode.Forbidden, "the token's email address is not verified (email_verified is not true)")
