package loopback

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestOnlyRefusesWhatAPageSends(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for _, tc := range []struct {
		name      string
		host      string
		header    map[string]string
		method    string
		crossSite bool
		want      int
	}{
		{"an SDK", "127.0.0.1:8000", nil, "POST", false, http.StatusTeapot},
		{"localhost", "localhost:9000", nil, "GET", false, http.StatusTeapot},
		{"a bucket under localhost", "shopstream-archive.localhost:9000", nil, "GET", false, http.StatusTeapot},
		{"IPv6 loopback", "[::1]:9200", nil, "GET", false, http.StatusTeapot},
		{"typed in the address bar", "127.0.0.1:9200", map[string]string{"Sec-Fetch-Site": "none"}, "GET", false, http.StatusTeapot},
		{"a rebound name", "evil.example:8000", nil, "POST", false, http.StatusForbidden},
		{"a rebound name, cross-site allowed", "evil.example:3000", nil, "GET", true, http.StatusForbidden},
		{"a LAN address", "192.168.1.5:8000", nil, "POST", false, http.StatusForbidden},
		{"a page's fetch", "127.0.0.1:8000", map[string]string{"Origin": "https://evil.example"}, "POST", false, http.StatusForbidden},
		{"a page's form post", "127.0.0.1:8000", map[string]string{"Sec-Fetch-Site": "cross-site"}, "POST", false, http.StatusForbidden},
		{"another local page", "127.0.0.1:8000", map[string]string{"Sec-Fetch-Site": "same-site"}, "POST", false, http.StatusForbidden},
		{"a preflight", "127.0.0.1:9000", map[string]string{"Access-Control-Request-Method": "PUT"}, "OPTIONS", false, http.StatusForbidden},
		{"the API, cross-site allowed", "127.0.0.1:3000", map[string]string{"Origin": "http://localhost:5173"}, "GET", true, http.StatusTeapot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://"+tc.host+"/", nil)
			r.Host = tc.host
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			Only(ok, tc.crossSite).ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("status %d, want %d", w.Code, tc.want)
			}
		})
	}
}
