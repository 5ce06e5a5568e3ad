package productsearch

import "testing"

func TestSigned(t *testing.T) {
	tests := []struct {
		endpoint, flag string
		want           bool
		wantErr        bool
	}{
		{"http://127.0.0.1:9200", "", false, false},
		{"https://search-shop-abc.eu-west-1.es.amazonaws.com", "", true, false},
		{"https://vpc-shop-abc.eu-west-1.es.amazonaws.com:443", "", true, false},
		{"https://search.example.com", "", false, false},
		{"https://search.example.com", "true", true, false},
		{"https://search-shop-abc.eu-west-1.es.amazonaws.com", "false", false, false},
		{"https://amazonaws.com.example.com", "", false, false},
		{"http://127.0.0.1:9200", "yes please", false, true},
		{"127.0.0.1:9200", "", false, true},
		{"ftp://127.0.0.1", "", false, true},
		{"", "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint+" "+tt.flag, func(t *testing.T) {
			got, err := Signed(tt.endpoint, tt.flag)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
