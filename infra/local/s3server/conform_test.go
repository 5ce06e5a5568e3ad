package s3server_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// rawGet sends a GET of key with the given headers over a plain connection
// and returns the status line and the header lines as they came (Go's
// client puts header names in their canonical form).
func rawGet(t *testing.T, base, key string, headers ...string) (status string, lines []string) {
	return raw(t, "GET", base, key, headers...)
}

func raw(t *testing.T, method, base, key string, headers ...string) (status string, lines []string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := method + " /" + bucket + "/" + key + " HTTP/1.1\r\nHost: " + u.Host + "\r\nConnection: close\r\n"
	for _, h := range headers {
		req += h + "\r\n"
	}
	if _, err := conn.Write([]byte(req + "\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	status, err = r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if l = strings.TrimRight(l, "\r\n"); l == "" {
			return strings.TrimSpace(status), lines
		}
		lines = append(lines, l)
	}
}

func statusOf(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// TestObjectReadsAnswerAsS3: an object's GET and HEAD answer with S3's
// headers and conditions. The store sent the object's checksum with a 304
// (boto3's get_object of a matching If-None-Match raised a TypeError), sent
// back the PUT's request headers (X-Amz-Date, X-Amz-Content-Sha256) with
// every read, named user metadata m as M, and ignored If-Match and
// If-Unmodified-Since on reads (200 where S3 answers 412).
func TestObjectReadsAnswerAsS3(t *testing.T) {
	hs := httptest.NewServer(memServer(t))
	t.Cleanup(hs.Close)
	c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	put(t, c, "a/1.txt", "hello", func(in *s3.PutObjectInput) {
		in.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32
		in.Metadata = map[string]string{"m": "1"}
	})
	ctx := context.Background()
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("a/1.txt")})
	if err != nil {
		t.Fatal(err)
	}
	etag := aws.ToString(head.ETag)

	for _, method := range []string{"GET", "HEAD"} {
		t.Run("headers of a "+method, func(t *testing.T) {
			status, lines := raw(t, method, hs.URL, "a/1.txt", "x-amz-checksum-mode: ENABLED")
			all := strings.Join(lines, "\n")
			if !strings.HasSuffix(status, "200 OK") || !strings.Contains(all, "\nx-amz-meta-m: 1") || !strings.Contains(all, "X-Amz-Checksum-Crc32:") {
				t.Errorf("%s: %s\n%s\nwant 200, x-amz-meta-m and the checksum", method, status, all)
			}
			for _, h := range []string{"X-Amz-Date", "X-Amz-Content-Sha256", "X-Amz-Sdk-Checksum-Algorithm", "X-Amz-Meta-M"} {
				if strings.Contains(all, h+":") {
					t.Errorf("%s answers %s:\n%s", method, h, all)
				}
			}
		})
	}

	t.Run("a 304 carries no checksum", func(t *testing.T) {
		status, lines := rawGet(t, hs.URL, "a/1.txt", "x-amz-checksum-mode: ENABLED", "If-None-Match: "+etag)
		all := strings.Join(lines, "\n")
		if !strings.HasSuffix(status, "304 Not Modified") || strings.Contains(strings.ToLower(all), "x-amz-checksum-") {
			t.Errorf("conditional get: %s\n%s\nwant 304 without a checksum", status, all)
		}
	})

	t.Run("read preconditions", func(t *testing.T) {
		past, later := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		for _, tc := range []struct {
			name string
			in   s3.GetObjectInput
			want int
		}{
			{"If-Match another ETag", s3.GetObjectInput{IfMatch: aws.String(`"0123"`)}, 412},
			{"If-Match its ETag", s3.GetObjectInput{IfMatch: aws.String(etag)}, 200},
			{"If-Match any", s3.GetObjectInput{IfMatch: aws.String("*")}, 200},
			{"If-Unmodified-Since before its change", s3.GetObjectInput{IfUnmodifiedSince: &past}, 412},
			{"If-Match its ETag wins over If-Unmodified-Since", s3.GetObjectInput{IfMatch: aws.String(etag), IfUnmodifiedSince: &past}, 200},
			{"If-None-Match its ETag", s3.GetObjectInput{IfNoneMatch: aws.String(etag)}, 304},
			{"If-None-Match any", s3.GetObjectInput{IfNoneMatch: aws.String("*")}, 304},
			{"If-None-Match another ETag makes If-Modified-Since ignored", s3.GetObjectInput{IfNoneMatch: aws.String(`"0123"`), IfModifiedSince: &later}, 200},
			{"If-Modified-Since after its change", s3.GetObjectInput{IfModifiedSince: &later}, 304},
		} {
			t.Run(tc.name, func(t *testing.T) {
				in := tc.in
				in.Bucket, in.Key = aws.String(bucket), aws.String("a/1.txt")
				_, err := c.GetObject(ctx, &in)
				got := 200
				if err != nil {
					got = statusOf(err)
				}
				if got != tc.want {
					t.Errorf("get: %d (%v), want %d", got, err, tc.want)
				}
				hin := &s3.HeadObjectInput{Bucket: in.Bucket, Key: in.Key, IfMatch: in.IfMatch, IfUnmodifiedSince: in.IfUnmodifiedSince,
					IfNoneMatch: in.IfNoneMatch, IfModifiedSince: in.IfModifiedSince}
				_, err = c.HeadObject(ctx, hin)
				got = 200
				if err != nil {
					got = statusOf(err)
				}
				if got != tc.want {
					t.Errorf("head: %d (%v), want %d", got, err, tc.want)
				}
			})
		}
	})
}
