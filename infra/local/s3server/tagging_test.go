package s3server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/shopstream/shopstream/infra/local/s3server"
)

const bucket = "failures"

// memServer is an S3 service in memory, closed with the test.
func memServer(t *testing.T) *s3server.Server {
	t.Helper()
	srv, err := s3server.New("", bucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// client is an S3 client of srv, as the stack's users configure one.
func client(t *testing.T, srv *s3server.Server) *s3.Client {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(hs.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
	})
}

func put(t *testing.T, c *s3.Client, key, body string, opts ...func(*s3.PutObjectInput)) {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte(body))}
	for _, o := range opts {
		o(in)
	}
	if _, err := c.PutObject(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

func tag(c *s3.Client, key string, kv ...string) error {
	var set []types.Tag
	for i := 0; i+1 < len(kv); i += 2 {
		set = append(set, types.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	_, err := c.PutObjectTagging(context.Background(), &s3.PutObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(key), Tagging: &types.Tagging{TagSet: set}})
	return err
}

func tags(t *testing.T, c *s3.Client, key string) map[string]string {
	t.Helper()
	out, err := c.GetObjectTagging(context.Background(), &s3.GetObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tg := range out.TagSet {
		got[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	return got
}

func body(t *testing.T, c *s3.Client, key string) string {
	t.Helper()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return fmt.Sprint(err)
}

// TestObjectTagging: tags are set, read and removed through the AWS SDK as on
// S3, the object itself is left as it was (the engine underneath would have
// stored the tagging document as the object), a write of the object or its
// deletion drops them, a PutObject's own tags and a copy's are kept, and
// S3's limits answer InvalidTag.
func TestObjectTagging(t *testing.T) {
	ctx := context.Background()
	c := client(t, memServer(t))
	const key = "aws/lambda/m/shard/2026/11/26/batch"
	put(t, c, key, `{"version":"1.0"}`)

	if err := tag(c, key, "shopstream-replayed", "true", "team", "orders"); err != nil {
		t.Fatal(err)
	}
	if got, want := tags(t, c, key), map[string]string{"shopstream-replayed": "true", "team": "orders"}; !maps.Equal(got, want) {
		t.Errorf("tags: got %v, want %v", got, want)
	}
	if got := body(t, c, key); got != `{"version":"1.0"}` {
		t.Errorf("object after tagging: %q, want it unchanged", got)
	}

	if _, err := c.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
		t.Fatal(err)
	}
	if got := tags(t, c, key); len(got) != 0 {
		t.Errorf("tags after DeleteObjectTagging: %v, want none", got)
	}

	if err := tag(c, key, "a", "1"); err != nil {
		t.Fatal(err)
	}
	put(t, c, key, "again")
	if got := tags(t, c, key); len(got) != 0 {
		t.Errorf("tags after the object was written again: %v, want none", got)
	}
	put(t, c, key, "tagged", func(in *s3.PutObjectInput) { in.Tagging = aws.String("a=1&b=two%20words") })
	if got, want := tags(t, c, key), map[string]string{"a": "1", "b": "two words"}; !maps.Equal(got, want) {
		t.Errorf("tags of a PutObject with its own: got %v, want %v", got, want)
	}

	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("copy"), CopySource: aws.String(bucket + "/" + key)}); err != nil {
		t.Fatal(err)
	}
	if got, want := tags(t, c, "copy"), map[string]string{"a": "1", "b": "two words"}; !maps.Equal(got, want) {
		t.Errorf("tags of a copy: got %v, want the source's %v", got, want)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("copy"), CopySource: aws.String(bucket + "/" + key),
		TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("c=3")}); err != nil {
		t.Fatal(err)
	}
	if got, want := tags(t, c, "copy"), map[string]string{"c": "3"}; !maps.Equal(got, want) {
		t.Errorf("tags of a copy that replaces them: got %v, want %v", got, want)
	}

	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
		t.Fatal(err)
	}
	if err := tag(c, key, "a", "1"); code(err) != "NoSuchKey" {
		t.Errorf("tagging a deleted object: %v, want NoSuchKey", err)
	}
	put(t, c, key, "new")
	if got := tags(t, c, key); len(got) != 0 {
		t.Errorf("tags of an object deleted and written again: %v, want none", got)
	}
	if _, err := c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String("nobucket"), Key: aws.String(key), Tagging: &types.Tagging{TagSet: []types.Tag{}}}); code(err) != "NoSuchBucket" {
		t.Errorf("tagging in a missing bucket: %v, want NoSuchBucket", err)
	}

	eleven := []string{}
	for i := range 11 {
		eleven = append(eleven, fmt.Sprintf("k%d", i), "v")
	}
	for name, kv := range map[string][]string{
		"11 tags":        eleven,
		"an aws: key":    {"aws:replayed", "true"},
		"a repeated key": {"a", "1", "a", "2"},
		"an empty key":   {"", "1"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tag(c, key, kv...); code(err) != "InvalidTag" {
				t.Errorf("got %v, want InvalidTag", err)
			}
		})
	}
	if got := tags(t, c, key); len(got) != 0 {
		t.Errorf("tags after refused taggings: %v, want none", got)
	}
}

// TestObjectTagsOnlyGoWithTheObject: a write that fails, a copy onto
// itself, an aborted multipart upload leave the tags as they were; a read
// counts them; an object DeleteObjects removed has none to read; what the
// local S3 does not keep (a version's tags, a multipart upload's) is
// refused, not dropped.
func TestObjectTagsOnlyGoWithTheObject(t *testing.T) {
	ctx := context.Background()
	c := client(t, memServer(t))
	const key = "k"
	put(t, c, key, "v")
	if err := tag(c, key, "a", "1"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "1"}

	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte("other")),
		ContentMD5: aws.String("1B2M2Y8AsgTpgAmY7PhCfg==")}) // the digest of nothing
	if err == nil {
		t.Fatal("a PutObject whose Content-MD5 does not match: got nil error")
	}
	if got := tags(t, c, key); !maps.Equal(got, want) {
		t.Errorf("tags after a failed write: %v, want %v", got, want)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), CopySource: aws.String(bucket + "/" + key),
		MetadataDirective: types.MetadataDirectiveReplace}); err != nil {
		t.Fatal(err)
	}
	if got := tags(t, c, key); !maps.Equal(got, want) {
		t.Errorf("tags after a copy onto itself: %v, want %v", got, want)
	}
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId}); err != nil {
		t.Fatal(err)
	}
	if got := tags(t, c, key); !maps.Equal(got, want) {
		t.Errorf("tags after an aborted upload: %v, want %v", got, want)
	}
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	got.Body.Close()
	if aws.ToInt32(got.TagCount) != 1 {
		t.Errorf("GetObject's tag count: %d, want 1", aws.ToInt32(got.TagCount))
	}

	if _, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: aws.String("v1")}); code(err) != "NotImplemented" {
		t.Errorf("tags of a version: %v, want NotImplemented", err)
	}
	if _, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("big"), Tagging: aws.String("a=1")}); code(err) != "NotImplemented" {
		t.Errorf("a multipart upload with tags: %v, want NotImplemented", err)
	}

	if _, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String(key)}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(key)}); code(err) != "NoSuchKey" {
		t.Errorf("tags of an object deleted by DeleteObjects: %v, want NoSuchKey", err)
	}
}

// TestObjectTagsSurviveARestart: with a data dir the tags are kept on disk
// beside the objects.
func TestObjectTagsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	srv, err := s3server.New(dir, bucket)
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, srv)
	put(t, c, "k", "v")
	if err := tag(c, "k", "shopstream-replayed", "true"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv, err = s3server.New(dir, bucket)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if got := tags(t, client(t, srv), "k"); got["shopstream-replayed"] != "true" {
		t.Errorf("tags after a restart: %v, want shopstream-replayed=true", got)
	}
}
