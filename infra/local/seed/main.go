// Command seed loads demo products and users into a running local system
// (`make run`) through its HTTP API, as a client would.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/system"
)

type product struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Category    string `json:"category"`
	PriceCents  int    `json:"priceCents"`
	Stock       int    `json:"stock"`
}

var products = []product{
	{"Copper Kettle", "A copper kettle that whistles when the water boils", "kitchen", 4900, 40},
	{"Cast Iron Pan", "A 26 cm cast iron pan, pre-seasoned", "kitchen", 3900, 25},
	{"Chef's Knife", "A 20 cm chef's knife in carbon steel", "kitchen", 8900, 15},
	{"Linen Apron", "A washed linen apron with two pockets", "kitchen", 2900, 60},
	{"Trail Backpack", "A 28 litre backpack for day hikes", "outdoor", 7900, 30},
	{"Camp Stove", "A folding gas stove for two-burner camp cooking", "outdoor", 6400, 12},
	{"Wool Socks", "Merino wool hiking socks, pack of three", "outdoor", 2400, 100},
	{"Desk Lamp", "An adjustable LED desk lamp with warm light", "home", 5600, 20},
}

var users = []struct{ ID, Email, Name string }{
	{"u1", "ada@example.com", "Ada"},
	{"u2", "grace@example.com", "Grace"},
}

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	base := "http://127.0.0.1:" + or(getenv("API_PORT"), "3000")
	secret := []byte(or(getenv("LOCAL_JWT_SECRET"), system.DefaultJWTSecret))
	client := &http.Client{Timeout: 10 * time.Second}
	call := func(method, path string, who apigw.Claims, body any) (int, string, error) {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, "", err
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(raw))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Content-Type", "application/json")
		tok, err := apigw.TokenFor(secret, who, time.Hour)
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", fmt.Errorf("%s %s (is `make run` up?): %w", method, path, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out), nil
	}
	for _, p := range products {
		code, body, err := call("POST", "/products", apigw.Claims{Sub: "admin", Admin: true}, p)
		if err != nil {
			return err
		}
		if code != http.StatusCreated {
			return fmt.Errorf("create product %q: %d %s", p.Name, code, body)
		}
		fmt.Printf("product %s\n", body)
	}
	for _, u := range users {
		code, body, err := call("POST", "/users", apigw.Claims{Sub: u.ID, Email: u.Email}, map[string]string{"name": u.Name})
		if err != nil {
			return err
		}
		if code != http.StatusCreated && code != http.StatusConflict {
			return fmt.Errorf("create user %s: %d %s", u.ID, code, body)
		}
		fmt.Printf("user %s: %d\n", u.ID, code)
	}
	return nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
