// Package loopback guards the local stack's ports against the one client on
// this machine that is not the developer's: a web page open in a browser.
// The stack binds 127.0.0.1 only, but a page can still send requests to it
// (cross-site fetches, form posts) or reach it under its own name through
// DNS rebinding. Without a guard, a page could read the archive, write the
// tables, or inject faults.
package loopback

import (
	"net"
	"net/http"
	"strings"
)

// Only serves h for requests that no browser sends on a page's behalf:
//   - the Host names this machine's loopback (127.0.0.1, ::1, localhost or a
//     name under it), so a rebound name is refused;
//   - with crossSite false, no Origin header, no Sec-Fetch-Site other than
//     "none" (typed by hand) or "same-origin", and no CORS preflight: SDKs,
//     the AWS CLI, curl and dynamodb-admin's server send none of these.
//
// Refused requests get 403 and never reach h.
func Only(h http.Handler, crossSite bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !LoopbackHost(r.Host) {
			http.Error(w, "the local stack answers only requests addressed to 127.0.0.1 or localhost", http.StatusForbidden)
			return
		}
		if !crossSite && fromAPage(r) {
			http.Error(w, "the local stack refuses requests from web pages", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// LoopbackHost says whether host (with or without a port) names this
// machine's loopback interface.
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func fromAPage(r *http.Request) bool {
	if r.Header.Get("Origin") != "" {
		return true
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		return true
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "none", "same-origin":
		return false
	}
	return true
}
